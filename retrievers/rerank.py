"""Rerankers (R→R): reorder a first stage's top hits by a second opinion, PyTerrier `>>` style.

- `EmbeddingReranker`: cosine of all-MiniLM-L6-v2 embeddings of the query and each passage (the
  unsupervised embedding reranking of Rohatgi et al. 2020, §2.2: "rank the candidates using their
  cosine distance to the topic embedding"; local model via `mathscout.dense.model`).
- `OpenAIEmbeddingReranker`: the same with an OpenAI-compatible embeddings API (Zhong 2023 thesis ch. 6, Ada-002).
- `CrossEncoderReranker`: the cross-encoder trained for the index (`mathscout train cross-encoder`) reads the question
  and each passage together (Zhong 2023 thesis §2.2.2); an index without one says what to run.
- `LLMListwiseReranker`: a chat model sorts the passages (Zhong 2023 thesis ch. 6 prompt, `prompts/rerank_listwise.md`).
  Malformed replies are repaired: ids it names are taken in its order (unknown and repeated ones
  ignored), the ones it leaves out follow in first-stage order; an empty reply, an API error or a
  time-out keeps the first-stage order, with a notice.

`Reranked(retriever, reranker, depth)` is a Retriever: the first stage's top `depth` hits reordered, the
rest after them. Reranked hits keep their `components` and gain `components["rerank"]`.
"""

from __future__ import annotations

import importlib.util
import re
from dataclasses import replace
from pathlib import Path
from typing import Any, Protocol, cast

import numpy as np

from mathscout.errors import MathScoutError
from mathscout.limits import RERANK_DEPTH
from mathscout.notices import notice
from mathscout.options import RERANK_DEPTH as RERANK_DEPTH_OPTION
from mathscout.retrievers.base import BaseRetriever, Composable, Reranker, Retriever, prepare_query
from mathscout.settings import LOCAL_KEY, settings
from mathscout.types import Hit, Query, renumbered

PROMPT_FILE = Path(__file__).resolve().parents[1] / "prompts" / "rerank_listwise.md"
MAX_PASSAGE_CHARS = 2000  # text embedded per hit (MiniLM reads 256 word pieces; the rest is ignored anyway)
MAX_PROMPT_PASSAGE_CHARS = 800  # text per passage in the LLM prompt
DEFAULT_DEPTH = RERANK_DEPTH_OPTION.default  # Zhong 2023 thesis ch. 6 reranks the top-10 with GPT-4
DEFAULT_CHAT_MODEL = "gpt-4o-mini"
DEFAULT_EMBEDDING_MODEL = "text-embedding-3-small"
RERANK_BACKEND = "torch"  # the embedding reranker's `Encoder` backend (fp32; `onnx-int8` is the dense index's)


def passage_text(title: str, text: str, limit: int = MAX_PASSAGE_CHARS) -> str:
    """What a reranker reads of a document: its title and text, cut at `limit` characters (the cross-encoder is
    trained on the same, mathscout.evaluation.training.cross_encoder)."""
    return f"{title}\n{text}".strip()[:limit]


class _BaseReranker(Composable):
    """Passage texts (from the store when known, else the hit's snippet) and the common bookkeeping."""

    name = "rerank"

    def __init__(self, store=None):
        self.store = store
        self.last_notice: str | None = None

    def passages(self, hits: list[Hit], limit: int = MAX_PASSAGE_CHARS) -> list[str]:
        documents = self.store.get_many(h.doc_id for h in hits) if self.store is not None else {}
        texts = []
        for hit in hits:
            document = documents.get(hit.doc_id)
            texts.append(
                passage_text(document.title, document.text, limit)
                if document is not None
                else (hit.snippet or hit.doc_id).strip()[:limit]
            )
        return texts

    def rerank(self, query: str | Query, hits: list[Hit], k: int | None = None) -> list[Hit]:
        self.last_notice = None
        hits = [replace(h, components=dict(h.components)) for h in hits]
        if not hits:
            return []
        text = query.text if isinstance(query, Query) else query
        try:
            scores = self.scores(text, hits)
        except MathScoutError as exc:  # API errors and time-outs: keep the first stage's order
            self.last_notice = f"{self.name}: {exc}; first-stage order kept"
            notice(f"notice: {self.last_notice}")
            scores = [float(len(hits) - i) for i in range(len(hits))]
        order = sorted(range(len(hits)), key=lambda i: (-scores[i], i))
        for i in order:
            hits[i].components["rerank"] = hits[i].score = float(scores[i])
        reranked = renumbered([hits[i] for i in order])
        return reranked[:k] if k is not None else reranked

    def scores(self, query: str, hits: list[Hit]) -> list[float]:
        raise NotImplementedError


class EmbeddingReranker(_BaseReranker):
    """Cosine similarity of local sentence-transformer embeddings (default all-MiniLM-L6-v2), encoded by the dense
    `Encoder` with `backend` (default `torch`, fp32: the scores the reranker was measured with) on `device` (auto: CUDA
    when torch sees a GPU, mathscout.dense.device)."""

    name = "embedding"

    def __init__(
        self,
        model_path: str | Path | None = None,
        store=None,
        batch_size: int = 32,
        backend: str = RERANK_BACKEND,
        device: str | None = None,
    ):
        super().__init__(store)
        from mathscout.dense.device import resolve_device
        from mathscout.dense.encoder import Encoder

        resolved = resolve_device(device) if backend == "torch" else "cpu"
        self.encoder = Encoder(model_path, backend=backend, device=resolved)
        self.batch_size = batch_size

    def scores(self, query: str, hits: list[Hit]) -> list[float]:
        from mathscout.dense.model import model_input_text

        texts = [model_input_text(query)] + [model_input_text(t) for t in self.passages(hits)]
        vectors = self.encoder.encode_texts(texts, batch_size=self.batch_size)
        return [float(v) for v in vectors[1:] @ vectors[0]]


def _client(base_url: str | None, api_key: str | None, timeout: float | None):
    """An OpenAI client for the endpoint given, else the settings' (`mathscout.settings`: OPENAI_API_KEY and
    OPENAI_BASE_URL over the config file's [llm] api_key and base_url, as the agent reads them); a base URL alone (a
    local server) needs no key."""
    from openai import OpenAI

    configured = settings()
    base_url = base_url or configured.llm_base_url or None
    key = api_key or configured.llm_api_key or (LOCAL_KEY if base_url else None)
    if not key:
        raise MathScoutError(
            "no API key: set OPENAI_API_KEY or [llm] api_key in the config file (or pass api_key) to use an OpenAI "
            "reranker"
        )
    timeout = configured.llm_timeout if timeout is None else timeout
    return OpenAI(base_url=base_url, api_key=key, timeout=timeout, max_retries=0)


def _api_error(exc: Exception) -> MathScoutError:
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
    return MathScoutError(f"the API call failed ({type(exc).__name__}: {first})")


class OpenAIEmbeddingReranker(_BaseReranker):
    """Cosine similarity of embeddings from an OpenAI-compatible `/v1/embeddings` endpoint."""

    name = "openai-embedding"

    def __init__(
        self,
        model: str = DEFAULT_EMBEDDING_MODEL,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 30.0,
        store=None,
    ):
        super().__init__(store)
        self.model = model
        self.client = _client(base_url, api_key, timeout)

    def scores(self, query: str, hits: list[Hit]) -> list[float]:
        try:
            response = self.client.embeddings.create(model=self.model, input=[query] + self.passages(hits))
        except Exception as exc:  # openai raises its own error classes (timeouts, HTTP statuses, connection)
            raise _api_error(exc) from exc
        vectors = np.array([d.embedding for d in sorted(response.data, key=lambda d: d.index)], dtype=np.float64)
        if len(vectors) != len(hits) + 1:
            raise MathScoutError(f"the embeddings API returned {len(vectors)} vectors for {len(hits) + 1} texts")
        vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
        return [float(v) for v in vectors[1:] @ vectors[0]]


_PASSAGE_REF = re.compile(r"PASSAGE[\s_#-]*(\d+)", re.IGNORECASE)
_NUMBER = re.compile(r"\b(\d+)\b")


def parse_listwise_reply(reply: str, count: int) -> list[int]:
    """0-based passage indices in the order the model gave them: `PASSAGEn` names (or, failing that, bare
    numbers inside the first bracketed list); unknown and repeated ones are dropped, the missing ones
    follow in first-stage order."""
    text = reply or ""
    first_list = re.search(r"\[?([^\[\]]*)\]", text)  # the prompt ends with "[", so the reply may start inside the list
    refs = [int(n) for n in _PASSAGE_REF.findall(first_list.group(1))] if first_list else []
    if not refs:
        refs = [int(n) for n in _PASSAGE_REF.findall(text)]
    if not refs and first_list:
        refs = [int(n) for n in _NUMBER.findall(first_list.group(1))]
    order, seen = [], set()
    for n in refs:
        if 1 <= n <= count and n - 1 not in seen:
            seen.add(n - 1)
            order.append(n - 1)
    return order + [i for i in range(count) if i not in seen]


def listwise_prompt(question: str, passages: list[str]) -> str:
    """The Zhong 2023 thesis ch. 6 prompt (`prompts/rerank_listwise.md`) filled in: plain replacement, texts may hold braces."""
    try:
        template = PROMPT_FILE.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise MathScoutError(f"the prompt file {PROMPT_FILE} is missing ({exc.strerror}); reinstall MathScout") from exc
    quoted = [" ".join(p.split()).replace('"', "'") for p in passages]
    listing = ", ".join(f'PASSAGE{i} = "{p}"' for i, p in enumerate(quoted, start=1))
    names = ", ".join(f"PASSAGE{i}" for i in range(1, len(passages) + 1))
    question = " ".join(question.split()).replace('"', "'")
    # {question} last: the question is user text and must not be searched for placeholders again
    return template.replace("{passages}", listing).replace("{names}", names).replace("{question}", question)


class LLMListwiseReranker(_BaseReranker):
    """A chat model (OpenAI-compatible API) sorts the passages; see `parse_listwise_reply` for repairs."""

    name = "llm-listwise"

    def __init__(
        self,
        model: str | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float | None = None,
        store=None,
    ):
        super().__init__(store)
        configured = settings()
        self.model = model or configured.rerank_model or configured.llm_model or DEFAULT_CHAT_MODEL
        self.client = _client(base_url, api_key, timeout)
        self.last_reply: str | None = None

    def scores(self, query: str, hits: list[Hit]) -> list[float]:
        prompt = listwise_prompt(query, self.passages(hits, MAX_PROMPT_PASSAGE_CHARS))
        try:
            response = self.client.chat.completions.create(
                model=self.model, messages=[{"role": "user", "content": prompt}], temperature=0
            )
            reply = (response.choices[0].message.content or "") if response.choices else ""
        except Exception as exc:
            raise _api_error(exc) from exc
        self.last_reply = reply
        if not reply.strip():
            raise MathScoutError("the model returned an empty reply")
        order = parse_listwise_reply(reply, len(hits))
        named = len({int(n) for n in _PASSAGE_REF.findall(reply) if 1 <= int(n) <= len(hits)})
        if named < len(hits):
            self.last_notice = (
                f"{self.name}: the model placed {named} of {len(hits)} passages; the rest keep their first-stage order"
            )
        scores = [0.0] * len(hits)
        for position, i in enumerate(order):
            scores[i] = float(len(hits) - position)
        return scores


class CrossEncoderReranker(_BaseReranker):
    """The cross-encoder trained for the index (`mathscout train cross-encoder`, mathscout.dense.cross): the question
    and each passage read together (Zhong 2023 thesis §2.2.2, Fig. 2.2), its logit interpolated with the hit's
    first-stage score by the weight training tuned for that first stage (the hits' one search component, else the
    stored weight; `weight`: fixed, 1 for the logit alone); on the backend its training chose unless `backend` says
    otherwise (torch where `device` resolves to CUDA). An index without one is an IndexMissingError naming the
    command."""

    name = "cross"

    def __init__(
        self,
        index,
        store=None,
        backend: str | None = None,
        batch_size: int | None = None,
        weight: float | None = None,
        device: str | None = None,
    ):
        super().__init__(store)
        from mathscout.dense.cross import BATCH, open_cross_scorer

        self.scorer = open_cross_scorer(getattr(index, "path", index), backend, device)
        self.batch_size = batch_size or BATCH
        self.weight = weight  # None: the weight stored for the hits' first stage (`weight_for`)

    def weight_for(self, hits: list[Hit]) -> float:
        """The fixed `weight`, else the one tuned for the first stage whose scores the hits carry."""
        from mathscout.dense.cross import weight_for

        if self.weight is not None:
            return self.weight
        stages = {name for hit in hits for name in hit.components if name != "rerank"}
        info = self.scorer.info
        if info is None:
            return self.scorer.weight
        return weight_for(info, stages.pop() if len(stages) == 1 else None)

    def scores(self, query: str, hits: list[Hit]) -> list[float]:
        from mathscout.dense.cross import PROBABILITY, interpolate

        logits = self.scorer.scores(query, self.passages(hits), self.batch_size)
        info = self.scorer.info
        scale = info.scale if info is not None else PROBABILITY  # the scale its stored weights were tuned on
        return [float(s) for s in interpolate(logits, [h.score for h in hits], self.weight_for(hits), scale)]


def cross_encoder_usable(index) -> bool:
    """True when `index` has a trained cross-encoder (`mathscout train cross-encoder`) and the libraries to run it are
    installed (the `dense` extra)."""
    from mathscout.dense.cross import has_cross_encoder

    return (
        index is not None
        and has_cross_encoder(getattr(index, "path", index))
        and importlib.util.find_spec("sentence_transformers") is not None
    )


def auto_reranker(index, llm: bool) -> str:
    """What `rerank="auto"` means, the one rule of every search and question: the LLM's listwise reranker when `llm`
    (an LLM is configured and may be used), else the index's trained cross-encoder when it has one, else local
    embeddings."""
    if llm:
        return "llm"
    return "cross" if cross_encoder_usable(index) else "embedding"


def open_embedding(index=None, store=None, **options) -> Reranker:
    return EmbeddingReranker(store=store, **options)


def open_openai_embedding(index=None, store=None, **options) -> Reranker:
    return OpenAIEmbeddingReranker(store=store, **options)


def open_llm(index=None, store=None, **options) -> Reranker:
    return LLMListwiseReranker(store=store, **options)


def open_cross(index=None, store=None, **options) -> Reranker:
    if index is None:
        raise MathScoutError("the cross-encoder reranker reads the model stored with an index: give the index")
    return CrossEncoderReranker(index, store=store, **options)


def open_reranker(kind: str = "auto", store=None, index=None, **options) -> Reranker:
    """A reranker of the table (`mathscout.retrievers.registry.RERANKERS`, by name or alias) or `auto`
    (`auto_reranker`, the LLM when one is configured, `Settings.llm_configured`); options go to the reranker (model,
    base_url, api_key, timeout, model_path, backend)."""
    from mathscout.retrievers.registry import AUTO_RERANK, reranker_entry

    if kind == AUTO_RERANK:
        kind = auto_reranker(index, settings().llm_configured)
    return reranker_entry(kind).open(index=index, store=store, **options)


class _ReadsPassages(Protocol):
    """A reranker that reads passages from a store (`lend_store` gives one without a store the first stage's)."""

    store: Any


def lend_store(reranker: Reranker, store) -> None:
    """Give a reranker that reads passages but has no store (`store` None) the first stage's; a composed reranker
    (`RerankChain`, `QueryMap >> reranker`) lends it to its `parts`."""
    for part in getattr(reranker, "parts", ()):
        lend_store(part, store)
    if store is not None and getattr(reranker, "store", "absent") is None:
        cast(_ReadsPassages, reranker).store = store


class Reranked(BaseRetriever):
    """`retriever >> reranker`: the top `depth` first-stage hits reordered, the others after them."""

    def __init__(self, retriever: Retriever, reranker: Reranker, depth: int = DEFAULT_DEPTH):
        depth = RERANK_DEPTH.check(depth)
        self.retriever, self.reranker, self.depth = retriever, reranker, depth
        self.name = f"{retriever.name}>>{reranker.name}"
        lend_store(reranker, getattr(retriever, "store", None))

    def _combine(self, query: Query, hits: list[Hit], k: int) -> list[Hit]:
        head = self.reranker.rerank(query, hits[: self.depth])
        tail = [replace(h, components=dict(h.components)) for h in hits[self.depth :]]
        floor = min((h.score for h in head), default=0.0)
        for i, hit in enumerate(tail, start=1):  # below every reranked hit, first-stage order kept
            hit.score = floor - i
        return renumbered((head + tail)[:k])

    def _search(self, query: Query, k: int) -> list[Hit]:
        return self._combine(query, self.retriever.search(query, max(k, self.depth)), k)

    def batch_search(self, queries: list[Query], k: int = 1000) -> dict[str, list[Hit]]:
        first = self.retriever.batch_search(queries, max(k, self.depth))
        by_id = {q.id: q for q in queries}
        return {qid: self._combine(prepare_query(by_id[qid]), hits, k) for qid, hits in first.items()}
