"""Approach Zero structure search: the `structure` index component and search mode (Zhong 2023 thesis ch. 3–4).

Formula hits become document hits: a document scores its best formula (Zhong 2023 thesis §4.2.2), summed over the
query's formulas. A query that also has words adds BM25 over them (Zhong 2023 thesis, Eq. 3.18: λ_m · math + BM25). With
the component's text lists (`text_lists.py`, built with the component) the top k of Zhong 2023 thesis Eq. 3.18 is exact,
by heterogeneous MaxScore (Zhong 2023 thesis, Alg. 5, `hetero.py`); a query without any formula is then plain BM25 over
its words. Older components without text lists fall back to the union of both rankings' top documents.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from mathscout.corpus.math_spans import formulas_and_words
from mathscout.errors import DamagedIndexError, QueryError
from mathscout.index.components import BuildOptions
from mathscout.index.layout import IndexDir
from mathscout.index.stored import StoredFile
from mathscout.index.tuned import TunedFile
from mathscout.latex.aliases import VOCABULARY, recorded_vocabulary
from mathscout.latex.tokens import formula_terms, query_terms
from mathscout.notices import notice, warning
from mathscout.render import make_snippet
from mathscout.retrievers.base import BaseRetriever, RankResult, prepare_query
from mathscout.settings import settings
from mathscout.store import DocumentStore
from mathscout.structure.fusion import fuse_formula_lists, rank_by_tier
from mathscout.structure.hetero import TEXT, KeywordList, heterogeneous_search, math_keyword
from mathscout.structure.highlight import leaf_spans, merge_spans
from mathscout.structure.index import BuildReport, PathIndex, build_path_index
from mathscout.structure.lexer import LEXER, recorded_lexer
from mathscout.structure.parallel import build_path_index_parallel, default_workers
from mathscout.structure.parser import parse_latex
from mathscout.structure.paths import leaf_count, path_prefixes
from mathscout.structure.scoring import (
    BETAS,
    ETA_ARQMATH,
    LAMBDA_M,
    formula_similarity,
    multi_tree_formula_similarity,
)
from mathscout.structure.search import FormulaHit, PreparedQuery, StructureSearcher
from mathscout.structure.text_lists import TextLists, build_text_lists
from mathscout.types import Formula, Hit, MatchedFormula, Query, renumbered

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from mathscout.retrievers.bm25 import BM25Retriever

EXPLAINED_HITS = 20  # hits that get a snippet and their highlighted best formula in `search`
SETTINGS_FILE = "structure.json"  # StructureSettings, written by `mathscout train structure`
MIXED_CANDIDATES = 1000  # per ranking, for Zhong 2023 thesis Eq. 3.18 fusion of math and words
MAX_QUERY_FORMULAS = 100  # a query keeps at most its 100 widest formulas (bounded time for pasted documents)
MAX_LAMBDA_M = 10_000.0  # the largest stored λ_m of Zhong 2023 thesis Eq. 3.18 (tuned: 0.1–100)


class StructureComponent:
    """Builds the path index (`mathscout.structure.index`) of every formula in the store."""

    name = "structure"

    def build(self, store: DocumentStore, target: Path, options: BuildOptions) -> dict[str, Any]:
        n_formulas, workers = store.formula_count(), default_workers(options.workers)
        # below MATHSCOUT_PARALLEL_ABOVE formulas, starting the workers costs more than they save
        report: BuildReport
        if workers > 1 and n_formulas >= settings().parallel_above:
            report = build_path_index_parallel(store.path, n_formulas, target, workers)
        else:
            report = build_path_index(store.iter_formula_latex(), n_formulas, target)
        stats = report.as_stats(target)
        started = time.perf_counter()
        text = build_text_lists(
            store, target, vocabulary=VOCABULARY
        )  # the top level of the heterogeneous index (Zhong 2023 thesis, Alg. 5)
        stats["text_lists"] = {
            "terms": len(text.terms),
            "postings": len(text.docs),
            "seconds": round(time.perf_counter() - started, 2),
            "bytes": sum((target / name).stat().st_size for name in ("text.npz", "text_terms.json.gz")),
        }
        stats["vocabulary"] = VOCABULARY  # the text lists' BM25 token vocabulary (`mathscout.latex.aliases`)
        stats["lexer"] = LEXER  # the lexer version that parsed the formulas (`mathscout.structure.lexer`)
        notice(
            f"structure: {report.indexed:,} of {report.formulas:,} formulas indexed in {report.seconds:.1f} s "
            f"({stats['formulas_per_second']:,.0f} formulas/s, {stats['bytes'] / 2**20:.1f} MiB); skipped: "
            + (", ".join(f"{n:,} {why}" for why, n in report.skipped.most_common()) or "none")
        )
        return stats


TEXT_PARTS = (
    "words",
    "full",
    "parts",
)  # Zhong 2023 thesis, Eq. 3.18's text part (KindSetting.text); "parts" for formula-only queries
QUERY_KINDS = ("formula", "mixed", "text")  # the planner's classification (mathscout.question): formula-only, words and
# formulas, words only (lone symbols do not count as formulas); each kind gets its own Zhong 2023 thesis Eq. 3.18 setting


@dataclass
class KindSetting:
    """Zhong 2023 thesis, Eq. 3.18's setting for one kind of query and how it was fitted (`mathscout train structure`).

    text: "words" (BM25 over the words without the math; for a formula-only query: structure similarity alone,
    Zhong 2023 thesis, Eq. 3.16), "full" (the bm25 mode's BM25 over the whole query, math tokens included) or, for formula-only
    queries, "parts" (Zhong 2023 thesis, Eq. 3.18 with BM25 over the whole query for documents holding only part of the query, match
    tier PART; structure similarity alone orders those holding its whole structure, where BM25 over renamed
    variable letters would only mislead)."""

    lambda_m: float
    text: str
    max_formulas: int = 0
    tuned_on: str = ""  # what it was fitted on, e.g. "topics.train.jsonl (mixed)" or "formula queries (fitting half)"
    queries: int = 0
    measure: str = ""
    score: float = 0.0  # the measure of this setting on the queries it was fitted on
    before: float | None = None  # the measure of the setting it replaced, on the same queries

    def check(self) -> KindSetting:
        if self.text not in TEXT_PARTS or not self.lambda_m > 0 or self.max_formulas < 0:
            raise ValueError(f"setting {asdict(self)}")
        return self


def _stored_setting(file: StoredFile, fields: Any, what: str) -> dict[str, Any]:
    """The fields of a KindSetting stored in structure.json, each checked (λ_m × a structure score stays finite)."""
    fields = file.mapping(fields, what)
    before = fields.get("before")
    return {
        "lambda_m": file.number(fields.get("lambda_m"), f"{what}'s lambda_m", 0, MAX_LAMBDA_M),
        "text": file.name(fields.get("text"), f"{what}'s text", TEXT_PARTS),
        "max_formulas": file.whole(fields.get("max_formulas", 0), f"{what}'s max_formulas", 0, MAX_QUERY_FORMULAS),
        "tuned_on": file.text(fields.get("tuned_on", ""), f"{what}'s tuned_on"),
        "queries": file.whole(fields.get("queries", 0), f"{what}'s queries"),
        "measure": file.text(fields.get("measure", ""), f"{what}'s measure"),
        "score": file.number(fields.get("score", 0.0), f"{what}'s score", 0, 1),
        "before": None if before is None else file.number(before, f"{what}'s before", 0, 1),
    }


@dataclass
class StructureSettings(TunedFile):
    """`<index>/structure.json`: Zhong 2023 thesis Eq. 3.18's settings fitted by `mathscout train structure` (evaluation/structure_tuning.py)
    with how each was obtained. The top-level fields are the setting of questions with words and formulas (the
    only one a file without `kinds` holds); `kinds` holds one `KindSetting` per query kind (QUERY_KINDS)."""

    FILE = SETTINGS_FILE
    LABEL = "the structure setting"

    lambda_m: float
    max_formulas: int
    text: str  # "words" or "full"
    tuned_on: str = "train topics"
    topics: int = 0
    measure: str = ""
    score: float = 0.0
    # older files: a setting for formula-only queries ({"lambda_m", "text", …}); None = structure similarity alone
    formula: dict | None = None
    kinds: dict[str, dict] | None = None  # kind → KindSetting fields

    @classmethod
    def remedy(cls, folder: Path) -> str:
        return f"rerun `mathscout train structure --index {folder}` or delete it to use the thesis defaults"

    @classmethod
    def parse(cls, file: StoredFile, data: dict[str, Any]) -> StructureSettings:
        """Every stored setting checked, and usable."""
        question = _stored_setting(file, data, "the question setting")
        formula, kinds = data.get("formula"), data.get("kinds")
        if kinds is not None:
            kinds = {
                file.name(kind, "a query kind", QUERY_KINDS): _stored_setting(file, fields, f"the {kind} setting")
                for kind, fields in file.mapping(kinds, "kinds").items()
            }
        settings = cls(
            lambda_m=question["lambda_m"],
            max_formulas=question["max_formulas"],
            text=file.name(data.get("text"), "text", ("words", "full")),
            tuned_on=question["tuned_on"],
            topics=file.whole(data.get("topics", 0), "topics"),
            measure=question["measure"],
            score=question["score"],
            kinds=kinds,
            formula=None if formula is None else _stored_setting(file, formula, "the formula setting"),
        )
        try:
            settings.kind_settings()  # every stored setting must be usable
        except ValueError as exc:
            raise file.damaged(str(exc)) from None
        return settings

    def kind_settings(self) -> dict[str, KindSetting]:
        """The stored setting of each kind: `kinds`, else (older files) the top-level setting for questions and the
        `formula` part for formula-only queries; a kind without one is absent."""
        question = KindSetting(
            self.lambda_m, self.text, self.max_formulas, self.tuned_on, self.topics, self.measure, self.score
        )
        out = {"mixed": question.check(), "text": question}
        if self.formula is not None:
            if not isinstance(self.formula, dict):
                raise ValueError("formula setting")
            out["formula"] = KindSetting(
                float(self.formula.get("lambda_m", LAMBDA_M)),
                str(self.formula.get("text")),
                tuned_on=str(self.formula.get("tuned_on", "")),
            ).check()
        for kind, fields in (self.kinds or {}).items():
            if kind not in QUERY_KINDS:
                raise ValueError(f"unknown query kind '{kind}'")
            out[kind] = KindSetting(**fields).check()
        return out


def query_kind(query: Query) -> str:
    """formula, mixed or text (QUERY_KINDS), by the planner's classifier (`mathscout.question.read_question`), except
    that a formula with filler words ("Compute $…$", "Find $…$") is scored as a question: the formula setting is
    fitted on formulas alone, and on the 55 such questions of 1,000 train topics the question setting does better
    (nDCG@10 0.730 vs 0.671)."""
    from mathscout.question import read_question

    if query.formula:
        return "formula"
    kind = read_question(query.text).kind
    if kind == "formula" and split_query(query)[1]:
        return "mixed"
    return kind if kind in QUERY_KINDS else "text"


class StructureRetriever(BaseRetriever):
    """Documents ranked by the structure similarity of their formulas to the query's formulas."""

    name = "structure"

    def __init__(
        self,
        index: IndexDir,
        strategy: str = "gbp-len",
        eta: float = ETA_ARQMATH,
        lambda_m: float | None = None,
        initial_threshold_factor: float = 0.0,
        max_formulas: int | None = None,
        exact: bool = False,
        depth: int = MIXED_CANDIDATES,
        text: str | None = None,
        trees: int = 1,
        formula_text: str | None = None,
        formula_lambda_m: float | None = None,
    ):
        """strategy: formula pruning (exhaustive, maxref, gbp-num, gbp-len); eta: η of Zhong 2023 thesis Eq. 3.15 (0.3 ARQMath,
        0.05 NTCIR-12); lambda_m: λ_m of Zhong 2023 thesis Eq. 3.18; initial_threshold_factor: λ0 of Eq. 4.17 (unsafe when > 0);
        max_formulas: keep only the query's N widest formulas (0 = all); exact: the exact top k of Zhong 2023 thesis Eq. 3.18 by
        Zhong 2023 thesis, Alg. 5 over the text lists (as slow as exhaustive search when formulas are many and common); otherwise
        Zhong 2023 thesis, Eq. 3.18 over the union of each formula's and BM25's top `depth` documents (0 outside a list);
        text: Zhong 2023 thesis Eq. 3.18's text part, "words" (BM25 over the words without the math, as the thesis) or "full" (the
        bm25 mode's math-aware BM25 over the whole query, the better text part here: see docs/results.md);
        trees: 1 = single-tree matching (Zhong 2023 thesis, Eq. 3.4/3.5, pruned search); 2–3 = multi-tree matching (Alg. 1, Eq. 3.3,
        α = 0.4, β = 0.9/0.06/0.04) re-scoring each formula's single-tree top `depth` formulas (Zhong 2023 thesis §3.3.1: the
        thesis used it on NTCIR-12 only, for its cost).
        lambda_m, max_formulas and text left unset come from the index's structure.json when `mathscout train
        structure` wrote one, else the thesis defaults (λ_m = 2.5, all formulas, words); they apply to questions
        with words. Each query is scored by the setting of its kind (QUERY_KINDS, the planner's classification):
        structure.json holds one per kind, fitted on train topics of that kind, and for formula-only queries on
        formula queries made from the collection. A formula-only query without a fitted setting is ranked by
        structure similarity alone (Zhong 2023 thesis, Eq. 3.16: its math tokens as BM25 "text" outweigh renamed-variable matches);
        formula_text / formula_lambda_m set its setting explicitly. A formula-only query ranks documents by match
        tier first (`search.match_tier`: its formula as written, its whole structure, a part of it), then by its
        setting: Zhong 2023 thesis Eq. 3.15's length penalty otherwise ranks a shorter formula with other symbols above a longer one
        that holds the query verbatim, which is what a sub-expression query looks for."""
        tuned = self.stored_settings(index)
        self.settings_source = f"tuned on {tuned.tuned_on} ({SETTINGS_FILE})" if tuned else "thesis defaults"
        defaults = tuned or StructureSettings(
            lambda_m=LAMBDA_M, max_formulas=0, text="words"
        )  # Zhong 2023 thesis §3.3.1
        stored = defaults.kind_settings()
        stored.setdefault("formula", _formula_default(index))
        if trees not in (1, 2, 3):
            raise QueryError(f"trees must be 1, 2 or 3 (got {trees})")
        self.trees = trees
        for name, value in (("text", text), ("formula_text", formula_text)):
            if value is not None and value not in TEXT_PARTS[: 2 if name == "text" else 3]:
                raise QueryError(
                    f"{name} must be one of {', '.join(TEXT_PARTS[: 2 if name == 'text' else 3])} (got '{value}')"
                )
        question = {
            k: v for k, v in (("lambda_m", lambda_m), ("max_formulas", max_formulas), ("text", text)) if v is not None
        }
        formula = {k: v for k, v in (("lambda_m", formula_lambda_m), ("text", formula_text)) if v is not None}
        self.kind_settings = {
            kind: replace(setting, **(formula if kind == "formula" else question)) for kind, setting in stored.items()
        }
        mixed, formula_setting = self.kind_settings["mixed"], self.kind_settings["formula"]
        self.lambda_m, self.max_formulas, self.text_part = mixed.lambda_m, mixed.max_formulas, mixed.text
        self.formula_text, self.formula_lambda_m = formula_setting.text, formula_setting.lambda_m
        self.index = index
        self.store = index.store
        folder = index.component_path("structure")
        self.paths = PathIndex.open(folder)
        # queries are parsed with the lexer that parsed the index's formulas (an index recording none: the legacy one)
        self.searcher = StructureSearcher(
            self.paths, eta=eta, lexer=recorded_lexer(index.manifest.components.get("structure", {}))
        )
        self.strategy = strategy
        self.initial_threshold_factor = initial_threshold_factor
        self.depth = depth
        # the text lists answer the words: for the exact top k, and on an index without Lucene's bm25 (a core install)
        self.text = TextLists.open(folder) if exact or "bm25" not in index.components else None
        if (
            self.text is not None
            and "bm25" in index.components
            and (
                recorded_vocabulary(index.manifest.components.get("structure", {}))
                != recorded_vocabulary(index.manifest.components.get("bm25", {}))
            )
        ):
            warning(
                f"the structure and bm25 components of {index.path} were built with different token "
                f"vocabularies: rebuild both ('mathscout index --index {index.path} --components bm25,structure') "
                "for exact text scores in structure search"
            )
        documents = self.store.count()
        if (len(self.paths.doc) and self.paths.doc.max() >= documents) or (
            self.text is not None and self.text.doc_count != documents
        ):
            raise DamagedIndexError(
                f"the structure component of {index.path} does not belong to its document store; "
                f"rebuild it with 'mathscout index --index {index.path} --components structure'"
            )
        self._formula_first = np.searchsorted(self.paths.doc, np.arange(documents + 1)).astype(np.int64)
        self._bm25: BM25Retriever | None = None
        self._ordinals: dict[str, int] | None = None
        self._doc_ids: list[str] | None = None

    def stored_settings(self, index: IndexDir) -> StructureSettings | None:
        """The Zhong 2023 thesis Eq. 3.18 setting stored with the index (a shard of a sharded index reads its index's: shards/scoring.py)."""
        return StructureSettings.read(index)

    def rank(self, query: Query, k: int) -> RankResult:
        """Top-k documents, and for each the best formula hit of the query's first formula that matched it, by the
        setting of the query's kind."""
        hits, best = self._ranked(query, k)
        return RankResult(hits, formulas=best)

    def _ranked(self, query: Query, k: int) -> tuple[list[Hit], dict[int, FormulaHit]]:
        formulas, words = split_query(query)
        setting = self.setting_for(query)
        by_tier = formulas and setting is self.kind_settings["formula"]  # a formula alone: what it holds of it first
        if by_tier and setting.text == "words":
            words = ""  # structure similarity alone
        if setting.text in ("full", "parts") and "bm25" in self.index.components:
            # a formula alone that cannot be read is an error, as with structure similarity alone
            prepared = self._prepare(formulas, setting.max_formulas, strict=bool(by_tier)) if formulas else []
            return self.fused(
                prepared,
                self.bm25_scores(query, max(self.depth, k)),
                k,
                setting.lambda_m,
                bool(by_tier),
                parts=setting.text == "parts",
            )
        if not formulas and not (words and ("bm25" in self.index.components or self.text is not None)):
            raise QueryError("structure search needs a formula: write it between $…$, e.g. $x^2+y^2=z^2$")
        prepared = self._prepare(formulas, setting.max_formulas, strict=not words)
        if self.text is not None and (words or len(prepared) != 1):
            return self._heterogeneous(prepared, words, k, setting.lambda_m), {}
        if len(prepared) == 1 and not words:  # a lone formula: per-document pruned search is exact
            if by_tier:  # its top `depth` by Zhong 2023 thesis Eq. 3.16 (the candidates a tier can lift), ranked by match tier first
                hits = self._formula_documents(prepared[0], max(self.depth, k))
                scores = {h.doc: h.score for h in hits}
                return self._by_tier(scores, {h.doc: {self.name: h.score} for h in hits}, {h.doc: h for h in hits}, k)
            hits = self._formula_documents(prepared[0], k)
            return [self._hit(h.doc, h.score, {self.name: h.score}) for h in hits], {h.doc: h for h in hits}
        return self.fused(
            prepared, self.bm25_scores(words, max(self.depth, k)) if words else {}, k, setting.lambda_m, bool(by_tier)
        )

    def setting_for(self, query: Query) -> KindSetting:
        """The Zhong 2023 thesis Eq. 3.18 setting of the query's kind (`query_kind`)."""
        return self.kind_settings[query_kind(query)]

    def perfect_score(self, query: Query) -> float | None:
        """Σ over the query formulas this retriever searches of a perfect match's structure score (each formula's
        widest subtree matched in full); None when the query has no readable formula. A document's math score
        divided by it is the share of the query's formulas its best matches cover (a ranking feature)."""
        formulas, _ = split_query(query)
        prepared = self._prepare(formulas, strict=False) if formulas else []
        total = sum(q.width for q in prepared)
        return total if total > 0 else None

    def _formula_documents(self, query: PreparedQuery, k: int) -> list[FormulaHit]:
        """Documents by their best formula: pruned single-tree search, or its top formulas re-scored by multi-tree
        matching (Zhong 2023 thesis, Eq. 3.3) when `trees` > 1."""
        if self.trees == 1:
            return self.searcher.search(
                query, k, self.strategy, per_document=True, initial_threshold_factor=self.initial_threshold_factor
            )
        betas = BETAS[: self.trees] if self.trees < 3 else BETAS
        best: dict[int, FormulaHit] = {}
        for hit in self.searcher.search(query, max(self.depth, k), self.strategy, per_document=False):
            tree = parse_latex(self.store.formula_at(hit.formula).latex, self.searcher.lexer).tree
            if tree is None:
                continue
            score = multi_tree_formula_similarity(
                query.prefixes,
                path_prefixes(tree, wildcard_paths=True),
                leaf_count(tree),
                idf=self.paths.path_idf,
                eta=self.searcher.eta,
                betas=betas,
            )
            if score > 0 and (hit.doc not in best or score > best[hit.doc].score):
                best[hit.doc] = FormulaHit(
                    hit.formula, score, hit.doc, hit.query_node, hit.doc_node, hit.width, hit.tier
                )
        return sorted(best.values(), key=lambda h: (-h.score, h.doc))[:k]

    def _prepare(self, formulas: list[str], max_formulas: int = 0, strict: bool = True) -> list[PreparedQuery]:
        """The query formulas the parser can read, the widest `max_formulas` of them when set (a lone unreadable
        formula is an error when `strict`: the query has nothing else)."""
        if strict and len(formulas) == 1:
            prepared = [self.searcher.prepare(formulas[0])]  # raises a clear QueryError when unreadable
            if prepared[0].empty:
                raise QueryError(f"the formula '{formulas[0][:80]}' shares no structure with any indexed formula")
            return prepared
        prepared = self.prepare_all(formulas)
        if max_formulas and len(prepared) > max_formulas:
            prepared = sorted(prepared, key=lambda q: -q.width)[:max_formulas]
        return prepared

    def prepare_all(self, formulas: list[str]) -> list[PreparedQuery]:
        """Every readable query formula that shares a token path with the index (others are left out)."""
        prepared = []
        for latex in formulas[: 4 * MAX_QUERY_FORMULAS]:
            try:
                query = self.searcher.prepare(latex)
            except QueryError:
                continue
            if not query.empty:
                prepared.append(query)
        if len(prepared) > MAX_QUERY_FORMULAS:
            prepared = sorted(prepared, key=lambda q: -q.width)[:MAX_QUERY_FORMULAS]
        return prepared

    def _heterogeneous(self, prepared: list[PreparedQuery], words: str, k: int, lambda_m: float) -> list[Hit]:
        """Exact top k of Zhong 2023 thesis Eq. 3.18 by Alg. 5: one iterator per text term (Lucene-exact BM25) and per formula."""
        assert self.text is not None  # the caller's condition
        keywords: list[KeywordList] = []
        for term, boost in self._text_weights(words).items():
            docs, scores = self.text.term_scores(term, boost)
            if len(docs):
                keywords.append(KeywordList(TEXT, docs, scores))
        text_keywords = list(keywords)
        for query in prepared:
            keywords.append(math_keyword(self.searcher, query))
        docs, scores = heterogeneous_search(self.searcher, keywords, k, lambda_m, self._formula_first)
        text = np.zeros(len(self._formula_first) - 1)
        for kw in text_keywords:  # each document's BM25 part, for the hit's score components
            text[kw.docs] += kw.scores
        hits = []
        for doc, score in zip(docs.tolist(), scores.tolist()):
            math = (score - text[doc]) / lambda_m if lambda_m else 0.0
            hits.append(self._hit(doc, score, {self.name: max(math, 0.0), "bm25": float(text[doc])}))
        return hits

    def _text_weights(self, words: str):
        """The BM25 query terms of the words: as the bm25 mode weighs them, or, on an index without a bm25 component
        (a core install has no Lucene), the words' terms as the structure component's own text lists hold them."""
        if not words:
            return {}
        if "bm25" in self.index.components:
            return self._bm25_retriever().query_weights(Query(id="words", text=words))
        return Counter(query_terms(words, recorded_vocabulary(self.index.manifest.components.get("structure", {}))))

    def fused(
        self,
        prepared: list[PreparedQuery],
        bm25: dict[int, float],
        k: int,
        lambda_m: float,
        by_tier: bool = False,
        parts: bool = False,
    ) -> tuple[list[Hit], dict[int, FormulaHit]]:
        """Zhong 2023 thesis, Eq. 3.18 over the union of each formula's top `depth` documents (per-document pruned search, §4.2.2)
        and BM25's: λ_m · Σ_formulas best formula score + BM25, a list's score counting 0 outside it; `by_tier`:
        documents by their first formula's match tier first (`search.match_tier`; outside its list: PART); `parts`:
        BM25 is added for PART documents only (KindSetting.text "parts")."""
        ranked, best = fuse_formula_lists(self.formula_lists(prepared, k), bm25, k, lambda_m, by_tier, parts, self.name)
        return [self._hit(h.doc, h.score, h.components) for h in ranked], best

    def formula_lists(self, prepared: list[PreparedQuery], k: int) -> list[list[FormulaHit]]:
        """Each formula's top max(depth, k) documents, searched one after another: each formula's decoded blocks are
        dropped before the next one is searched, so a query holds one formula's blocks at a time."""
        lists = []
        for query in prepared:
            lists.append(self._formula_documents(query, max(self.depth, k)))
            query.release()
        return lists

    def _by_tier(
        self, scores: dict[int, float], parts: dict[int, dict[str, float]], best: dict[int, FormulaHit], k: int
    ) -> tuple[list[Hit], dict[int, FormulaHit]]:
        """A formula-only query's top k by match tier, then by score (`fusion.rank_by_tier`)."""
        return [self._hit(h.doc, h.score, h.components) for h in rank_by_tier(scores, parts, best, k)], best

    def _bm25_retriever(self):
        """The index's BM25 retriever, opened on first use (the JVM starts only when words are searched)."""
        if self._bm25 is None:
            from mathscout.retrievers.bm25 import BM25Retriever

            self._bm25 = BM25Retriever(self.index)
        return self._bm25

    def bm25_scores(self, words: str | Query, k: int) -> dict[int, float]:
        """BM25 of the top k documents for the words (a string) or for a whole query (math-aware terms)."""
        if "bm25" not in self.index.components:
            return {}
        bm25 = self._bm25_retriever()
        ordinals = self.doc_ordinals()
        try:
            hits = bm25.rank(words if isinstance(words, Query) else Query(id="words", text=words), k).hits
        except QueryError:  # only stop words
            return {}
        return {ordinals[h.doc_id]: h.score for h in hits if h.doc_id in ordinals}

    def doc_ordinals(self) -> dict[str, int]:
        if self._ordinals is None:
            self._ordinals = {doc_id: n for n, doc_id in enumerate(self.store.doc_ids())}
        return self._ordinals

    def _hit(self, doc: int, score: float, components: dict[str, float]) -> Hit:
        if self._doc_ids is None:
            self._doc_ids = self.store.doc_ids()
        return Hit(doc_id=self._doc_ids[doc], score=score, components=components)

    def _search(self, query: Query, k: int) -> list[Hit]:
        ranking = self.rank(query, k)
        hits, best = ranking.hits, ranking.formulas
        formulas, words = split_query(query)
        weights = highlight_weights(formulas, words)
        explained = hits[:EXPLAINED_HITS]
        documents = self.store.get_many(h.doc_id for h in explained)
        ordinals = self.doc_ordinals()
        first_tree = parse_latex(formulas[0], self.searcher.lexer).tree if formulas else None
        query_prefixes = path_prefixes(first_tree) if first_tree is not None else []
        renumbered(hits)
        if formulas and any(ordinals[h.doc_id] not in best for h in explained):
            best.update(self._best_formulas(formulas[0], [ordinals[h.doc_id] for h in explained]))
        for hit in explained:
            document = documents.get(hit.doc_id)
            if document is None:
                continue
            hit.snippet = make_snippet(document, weights)
            formula_hit = best.get(ordinals[hit.doc_id])
            if formula_hit is not None:
                hit.formulas = [self.matched_formula(formula_hit, query_prefixes)]
        return hits

    def _best_formulas(self, latex: str, docs: list[int]) -> dict[int, FormulaHit]:
        """Each document's best formula for one query formula (for highlighting)."""
        try:
            query = self.searcher.prepare(latex)
        except QueryError:
            return {}
        formulas = np.concatenate(
            [np.arange(self._formula_first[d], self._formula_first[d + 1]) for d in docs] or [np.zeros(0, np.int64)]
        )
        best: dict[int, FormulaHit] = {}
        for hit in self.searcher.score_formulas(query, formulas):
            if hit.doc not in best or hit.score > best[hit.doc].score:
                best[hit.doc] = hit
        return best

    @property
    def highlight_idf(self):
        """The path weights the highlighted common subtree is found with (`matched_formula`)."""
        return self.paths.path_idf

    def matched_formula(self, hit: FormulaHit, query_prefixes) -> MatchedFormula:
        """The document's best formula with the operands of its widest common subtree highlighted."""
        formula = self.store.formula_at(hit.formula)
        tree = parse_latex(formula.latex, self.searcher.lexer).tree
        spans: list[tuple[int, int]] = []
        if tree is not None:
            match = formula_similarity(
                query_prefixes,
                path_prefixes(tree, wildcard_paths=True),
                leaf_count(tree),
                idf=self.highlight_idf,
                eta=self.searcher.eta,
            )
            if match is not None:
                spans = merge_spans(leaf_spans(tree, match.doc_leaves), formula.latex)
        return MatchedFormula(formula_id=formula.id, latex=formula.latex, score=hit.score, highlight=spans)

    def formula_hits(self, latex: str, k: int = 1000) -> list[tuple[Formula, float]]:
        """Top-k formulas (not documents) for one query formula by structure similarity, best first (Zhong 2023 thesis §3.1:
        the formula scores that documents are then ranked by; ARQMath Task 2). QueryError when unreadable."""
        hits = self.searcher.search(self.searcher.prepare(latex), k, self.strategy, per_document=False)
        return [(self.store.formula_at(h.formula), h.score) for h in sorted(hits, key=lambda h: (-h.score, h.formula))]

    def batch_search(self, queries: list[Query], k: int = 1000) -> dict[str, list[Hit]]:
        """Ranked ids and scores for many queries (no snippets); a query without a formula gets no hits."""
        return {qid: ranking.hits for qid, ranking in self.batch_rank(queries, k).items()}

    def batch_rank(self, queries: list[Query], k: int = 1000) -> dict[str, RankResult]:
        """`rank` of many queries, hits numbered (no snippets); a query without a formula gets an empty ranking."""
        rankings: dict[str, RankResult] = {}
        started = time.perf_counter()
        for query in queries:
            try:
                ranking = self.rank(prepare_query(query), k)
            except QueryError as exc:
                warning(f"topic {query.id}: {exc}")
                ranking = RankResult([])
            renumbered(ranking.hits)
            rankings[query.id] = ranking
        log.debug(f"structure: {len(queries)} queries in {time.perf_counter() - started:.1f} s")
        return rankings


def highlight_weights(formulas: list[str], words: str) -> dict[str, float]:
    """The terms a snippet marks: the query's words and the tokens of its formulas."""
    weights = dict.fromkeys(query_terms(words), 1.0) if words else {}
    for latex in formulas:
        weights.update(dict.fromkeys(formula_terms(latex), 1.0))
    return weights


def _formula_default(index: IndexDir) -> KindSetting:
    """Formula-only queries on an index without a fitted setting: the thesis' λ_m = 2.5 (Zhong 2023 thesis, Eq. 3.18) with BM25 over the
    whole query for partial matches only ("parts"), structure similarity alone without a bm25 component. On the
    fitting half's formula queries (`mathscout train structure`) it keeps every transformation kind at structure
    alone's level (renamed 0.9277 vs 0.9280, sub-expression 0.819 both) and lifts transformed queries 0.290 → 0.423."""
    if "bm25" in index.components:
        return KindSetting(LAMBDA_M, "parts", tuned_on="thesis λ_m = 2.5, BM25 for partial matches (no setting fitted)")
    return KindSetting(LAMBDA_M, "words", tuned_on="structure similarity alone (no setting fitted)")


def split_query(query: Query) -> tuple[list[str], str]:
    """The query's formulas (the topic formula, or each formula of its text) and its words without the math
    (`mathscout.corpus.math_spans.formulas_and_words`, as the question reader splits a question)."""
    if query.formula:
        return [query.formula], ""
    formulas, words = formulas_and_words(query.text)
    return formulas, words


def open_structure(index: IndexDir, **options) -> StructureRetriever:
    return StructureRetriever(index, **options)
