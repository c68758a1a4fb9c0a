"""Learned sparse retrieval (SPLADE-max, Zhong 2023 thesis Eq. 5.17; text-only, Eq. 5.19): the `splade` component and mode,
MABOWDOR-full's sparse text run.

No SPLADE checkpoint ships with MathScout and none can be downloaded offline: the component encodes with a
local masked-LM checkpoint directory named by MATHSCOUT_SPLADE_MODEL. Document weights are quantised as
pyserini does (×256/5) and indexed as term frequencies of a Lucene impact index; queries are encoded the
same way and searched with pyserini's LuceneImpactSearcher (score = Σ query weight × document weight).
"""

from __future__ import annotations

import json
import logging
import sys
import time
from pathlib import Path
from typing import Any

from mathscout import java
from mathscout.dense.model import libraries_quiet
from mathscout.dense.untrusted import check_model_folder
from mathscout.errors import IndexMissingError, MathScoutError, QueryError
from mathscout.index.components import BuildOptions
from mathscout.index.layout import IndexDir
from mathscout.progress import bar as progress_bar
from mathscout.retrievers.base import BaseRetriever, RankResult
from mathscout.settings import settings
from mathscout.store import DocumentStore
from mathscout.types import Document, Hit, Query

log = logging.getLogger(__name__)

MODEL_ENV = "MATHSCOUT_SPLADE_MODEL"  # named in error messages (mathscout.settings)
MAX_DOC_TOKENS = 512
MAX_QUERY_TOKENS = 256
BATCH = 8
QUANT_RANGE, WEIGHT_RANGE = 256, 5.0  # pyserini's quantisation of SPLADE weights


def model_path(configured: str | Path | None = None) -> Path:
    """The local SPLADE checkpoint: the argument, else $MATHSCOUT_SPLADE_MODEL; a clear error when there is none."""
    value = configured or settings().splade_model
    if not value:
        raise MathScoutError(
            f"learned sparse retrieval needs a local SPLADE checkpoint (a masked-LM model directory); "
            f"none ships with MathScout and none can be downloaded offline: set {MODEL_ENV}=PATH"
        )
    path = Path(value)
    if not (path / "config.json").is_file():
        raise MathScoutError(
            f"{path} is not a model directory (no config.json): point {MODEL_ENV} at a SPLADE checkpoint"
        )
    check_model_folder(path, f"point {MODEL_ENV} at a SPLADE checkpoint saved with safetensors")  # runs no code
    return path


class SpladeEncoder:
    """Text → quantised term weights: max over tokens of log(1 + ReLU(MLM logits)) (Zhong 2023 thesis, Eq. 5.17); with
    `text_only`, the tokenizer's added (math) vocabulary is masked out of the output (Zhong 2023 thesis, Eq. 5.19)."""

    def __init__(self, path: Path, text_only: bool = True):
        import torch
        from transformers import AutoModelForMaskedLM, AutoTokenizer

        try:
            self.tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True, trust_remote_code=False)
            with libraries_quiet():
                self.model = AutoModelForMaskedLM.from_pretrained(
                    str(path), local_files_only=True, trust_remote_code=False, use_safetensors=True
                ).eval()
        except (OSError, ValueError) as exc:
            raise MathScoutError(f"cannot load the SPLADE checkpoint {path}: {str(exc).splitlines()[0]}") from exc
        self.torch = torch
        self.path = path
        self.vocabulary = {i: t for t, i in self.tokenizer.get_vocab().items()}
        size = self.model.config.vocab_size
        self.mask = torch.ones(size)
        if text_only:  # Γ = the non-math vocabulary: math tokens are the ones added to the base tokenizer
            special = set(self.tokenizer.all_special_ids)
            for token_id in self.tokenizer.get_added_vocab().values():
                if token_id < size and token_id not in special:
                    self.mask[token_id] = 0.0

    def encode(self, texts: list[str], max_length: int = MAX_DOC_TOKENS) -> list[dict[str, int]]:
        inputs = self.tokenizer(texts, max_length=max_length, truncation=True, padding="longest", return_tensors="pt")
        with self.torch.inference_mode():
            logits = self.model(**inputs).logits
            weights = self.torch.log1p(self.torch.relu(logits)) * inputs["attention_mask"].unsqueeze(-1)
            pooled = weights.max(dim=1).values * self.mask  # Zhong 2023 thesis, Eq. 5.17 (and 5.19's mask)
        quantised = self.torch.round(pooled / WEIGHT_RANGE * QUANT_RANGE).to(self.torch.int64)
        result = []
        for row in quantised:
            ids = self.torch.nonzero(row).flatten().tolist()
            result.append({self.vocabulary[i]: int(row[i]) for i in ids if i in self.vocabulary})
        return result


class QueryEncoder:
    """The query side for pyserini's LuceneImpactSearcher (`encode(text) → {term: weight}`)."""

    def __init__(self, encoder: SpladeEncoder):
        self.encoder = encoder

    def encode(self, text: str, **_options) -> dict[str, int]:
        return self.encoder.encode([text], MAX_QUERY_TOKENS)[0]


class SpladeComponent:
    """Encodes every document with the local checkpoint into a Lucene impact index."""

    name = "splade"

    def build(self, store: DocumentStore, target: Path, options: BuildOptions) -> dict[str, Any]:
        path = model_path()
        encoder = SpladeEncoder(path)
        started = time.perf_counter()
        indexer = java.lucene_index().LuceneIndexer(
            args=["-index", str(target), "-pretokenized", "-impact", "-quiet"], threads=1
        )
        docs = postings = 0
        batch: list[Document] = []

        def flush() -> None:
            nonlocal docs, postings
            vectors = encoder.encode([d.titled() for d in batch])
            lines = []
            for document, vector in zip(batch, vectors):
                postings += len(vector)
                contents = " ".join(" ".join([term] * weight) for term, weight in vector.items())
                lines.append(json.dumps({"id": document.id, "contents": contents}, ensure_ascii=False))
            indexer.add_batch_raw(lines)
            docs += len(batch)
            batch.clear()

        try:
            for document in progress_bar(
                store.iter_documents(),
                total=store.count(),
                desc="splade",
                unit=" docs",
                file=sys.stderr,
                mininterval=1.0,
            ):
                batch.append(document)
                if len(batch) == BATCH:
                    flush()
            if batch:
                flush()
        finally:
            indexer.close()
        seconds = time.perf_counter() - started
        log.info(
            f"splade: {docs:,} documents in {seconds:.1f} s ({docs / max(seconds, 1e-9):.1f} docs/s), "
            f"{postings / max(docs, 1):.0f} terms per document"
        )
        return {
            "docs": docs,
            "model": str(path.resolve()),
            "vocab_size": len(encoder.vocabulary),
            "terms_per_doc": round(postings / max(docs, 1), 1),
            "seconds": round(seconds, 2),
            "bytes": sum(f.stat().st_size for f in target.rglob("*") if f.is_file()),
        }


class SpladeRetriever(BaseRetriever):
    """SPLADE over the `splade` impact index, queries encoded by the checkpoint the index was built with
    (or MATHSCOUT_SPLADE_MODEL / `model=` when it has moved; its vocabulary must match)."""

    name = "splade"

    def __init__(self, index: IndexDir, model: str | Path | None = None):
        folder = index.component_path("splade")
        stats = index.manifest.components.get("splade", {})
        path = model_path(model or settings().splade_model or stats.get("model"))
        self.encoder = SpladeEncoder(path)
        if stats.get("vocab_size") not in (None, len(self.encoder.vocabulary)):
            raise MathScoutError(
                f"the SPLADE checkpoint {path} has a {len(self.encoder.vocabulary):,}-term vocabulary "
                f"but {index.path} was built with {stats['vocab_size']:,}: use the same checkpoint"
            )
        try:
            searcher_class = java.lucene_search().LuceneImpactSearcher
            with java.jni_lock:
                self._searcher = searcher_class(str(folder), QueryEncoder(self.encoder))
        except Exception as exc:  # a Java exception: not a readable Lucene index
            raise IndexMissingError(
                f"the splade index in {folder} is unreadable ({str(exc).splitlines()[0]}): rebuild "
                f"it with 'mathscout index --index {index.path} --components splade'"
            ) from exc

    def rank(self, query: Query, k: int) -> RankResult:
        with java.jni_lock:
            results = self._searcher.search(query.text, k)
        if not results and not self.encoder.encode([query.text], MAX_QUERY_TOKENS)[0]:
            raise QueryError(f"the query {query.text[:60]!r} has no SPLADE terms")
        return RankResult(
            [
                Hit(doc_id=r.docid, score=float(r.score), rank=n, components={self.name: float(r.score)})
                for n, r in enumerate(results, start=1)
            ]
        )

    def _search(self, query: Query, k: int) -> list[Hit]:
        return self.rank(query, k).hits


def open_splade(index: IndexDir, **options) -> SpladeRetriever:
    return SpladeRetriever(index, **options)
