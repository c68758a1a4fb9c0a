"""Texts → normalised passage embeddings (and, in the same pass, token embeddings for late interaction).

Zhong et al. 2022 §3 / Zhong 2023 thesis §5.2.2: a bi-encoder maps a query and a passage to vectors compared by inner
product. Documents longer than the model's window (256 word pieces for all-MiniLM-L6-v2) are split
into consecutive windows; only the first `max_passages` windows of a document are encoded (default
2: 100 % of the words of 74 % of the collection's documents, 254 × 2 word pieces of the rest; every
extra window adds ≈ 15 % encoding time) and a document scores the max over its passages.

Backends: `onnx-int8` (default) runs the model's transformer as an ONNX graph with int8 dynamic
quantisation (per-channel weights) in onnxruntime: 1.5–1.9× the documents/s of torch fp32 on this
2-core machine with cosine 0.993 to the fp32 embeddings (measured on 300 collection documents);
`torch` runs the sentence-transformers model as is, on the CPU or (`device="cuda"`, mathscout.dense.device) on a GPU
under bf16 autocast; ONNX runs on the CPU only, so a CUDA encoder is a torch one. The ONNX export is cached per model
folder under MATHSCOUT_HOME/onnx/.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from mathscout.config import home
from mathscout.dense.device import autocast
from mathscout.dense.model import default_model_path, libraries_quiet, load_sentence_model
from mathscout.dense.query_adapter import QueryAdapter
from mathscout.dense.untrusted import check_graph
from mathscout.errors import MathScoutError
from mathscout.notices import notice
from mathscout.settings import settings

if TYPE_CHECKING:
    import torch

BACKENDS = ("onnx-int8", "onnx", "torch")
DEFAULT_MAX_PASSAGES = 2
BATCH_TOKENS = 8192  # word pieces per batch (length-sorted batches of similar length)
MAX_BATCH = 64
# How passages (and queries) are grouped into forward passes. int8 dynamic quantisation scales activations per batch,
# so under "length" (length-sorted batches of ≤ MAX_BATCH, the policy of a dense component that records none) a passage's vector
# depends on its batch peers (cosine down to 0.963 between the two policies on 500 collection documents); under
# "passage" (the default for new builds) each sequence is encoded alone, so its vector is the same whichever documents
# are encoded with it (a shard's vectors are the single index's). On this machine "passage" is not slower (docs/shards.md, "Dense batching").
BATCHINGS = ("passage", "length")
DEFAULT_BATCHING = "passage"

_sessions: dict[tuple[str, str], object] = {}
_lock = threading.Lock()


@dataclass
class EncodedBatch:
    """Embeddings of a batch of sequences: pooled (n, dim) and, on request, the token vectors."""

    pooled: np.ndarray
    tokens: list[np.ndarray] = field(default_factory=list)  # per sequence (length, dim), specials removed
    token_ids: list[np.ndarray] = field(default_factory=list)


EXPORT_VERSION = 2  # 2: traced on a padded batch (version 1's graphs ignored the attention mask)


def _model_key(folder: Path, output: str = "hidden", int8_ops: tuple[str, ...] | None = None) -> str:
    config = folder / "config.json"
    weights = sorted(folder.glob("*.safetensors")) + sorted(folder.glob("*.bin"))
    stamp = "|".join(f"{p.name}:{p.stat().st_size}:{int(p.stat().st_mtime)}" for p in [config, *weights] if p.exists())
    recipe = "" if int8_ops is None else "|int8:" + ",".join(int8_ops)  # the default recipe keeps the older keys
    return hashlib.sha1(f"{folder.resolve()}|{stamp}|{output}|{EXPORT_VERSION}{recipe}".encode()).hexdigest()[:16]


def onnx_file(folder: Path, quantized: bool, graph: OnnxGraph | None = None) -> Path:
    """The model's ONNX graph (default: the transformer's last hidden states) exported (and int8-quantised), cached
    under MATHSCOUT_HOME/onnx."""
    graph = graph or _last_hidden_graph(folder)
    cache = home() / "onnx" / _model_key(folder, graph.output, graph.int8_ops)
    plain, int8 = cache / "model.onnx", cache / "model.int8.onnx"
    target = int8 if quantized else plain
    if target.is_file():
        return target
    cache.mkdir(parents=True, exist_ok=True)
    with _only_process(cache / "export.lock"):  # parallel builds (shard tasks) export and quantise once, one at a time
        if not target.is_file():
            export_onnx(graph, plain, int8 if quantized else None)
    return target


@contextmanager
def _only_process(lock_path: Path):
    """Hold an exclusive lock on `lock_path` across processes (onnxruntime's quantiser writes a shared side file)."""
    import fcntl

    with open(lock_path, "a+b") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@dataclass(frozen=True)
class OnnxGraph:
    """What to export: `model()` gives the Hugging Face transformer, whose output `attribute` (for word pieces, their
    mask and segment ids) becomes the graph's output `output`; `folder` names the model in errors; `int8_ops` are the
    operator types its int8 graph quantises (None: onnxruntime's dynamic default, embedding lookups included)."""

    model: Callable[[], Any]  # a transformers model (torch's stubs type a submodule's attribute as Tensor | Module)
    attribute: str
    output: str
    folder: Path
    int8_ops: tuple[str, ...] | None = None


def _graph_module(graph: OnnxGraph) -> torch.nn.Module:
    """The transformer wrapped to take the three inputs positionally and return the one tensor the graph outputs."""
    import torch

    class Output(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, input_ids, attention_mask, token_type_ids):
            outputs = self.inner(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
            return getattr(outputs, graph.attribute)

    # eval() on the wrapper too: export restores the wrapper's mode, which would put the cached model in training
    return Output(graph.model().eval()).eval()


def _last_hidden_graph(folder: Path) -> OnnxGraph:
    """The bi-encoder's transformer: word pieces → last hidden states (pooling is done outside the graph)."""
    return OnnxGraph(lambda: load_sentence_model(folder)[0].auto_model, "last_hidden_state", "hidden", folder)


def export_onnx(graph: OnnxGraph, plain: Path, int8: Path | None) -> None:
    """`graph` → `plain` (ONNX, opset 17, dynamic batch and length) unless there, then → `int8` (dynamic int8, per
    channel, of the operator types `graph.int8_ops`) if asked."""
    import torch

    if not plain.is_file():
        # a padded example: traced on an all-ones mask, transformers drops the mask and the graph ignores padding
        mask = torch.ones(2, 8, dtype=torch.long)
        mask[1, 5:] = 0
        example = (torch.ones(2, 8, dtype=torch.long), mask, torch.zeros(2, 8, dtype=torch.long))
        axes = {name: {0: "batch", 1: "length"} for name in ("input_ids", "attention_mask", "token_type_ids")}
        axes[graph.output] = {0: "batch", 1: "length"} if graph.output == "hidden" else {0: "batch"}
        tmp = plain.with_suffix(f".tmp{os.getpid()}")
        try:
            module = _graph_module(graph)
            with libraries_quiet():  # the tracer's warnings about the model's Python branches: not the user's
                torch.onnx.export(
                    module,
                    example,
                    str(tmp),
                    input_names=["input_ids", "attention_mask", "token_type_ids"],
                    output_names=[graph.output],
                    dynamic_axes=axes,
                    opset_version=17,
                    dynamo=False,
                )
        except Exception as exc:
            tmp.unlink(missing_ok=True)
            raise MathScoutError(
                f"cannot export {graph.folder} to ONNX ({str(exc).splitlines()[0]}): use backend 'torch'"
            ) from exc
        os.replace(tmp, plain)
    if int8 is not None:
        from onnxruntime.quantization import QuantType, quantize_dynamic

        tmp = int8.with_suffix(f".tmp{os.getpid()}.onnx")
        ops = list(graph.int8_ops) if graph.int8_ops is not None else None
        with libraries_quiet():  # onnxruntime's pre-processing advice
            quantize_dynamic(
                str(plain), str(tmp), weight_type=QuantType.QInt8, per_channel=True, op_types_to_quantize=ops
            )
        os.replace(tmp, int8)


def onnx_threads() -> int:
    """How many threads ONNX inference uses: MATHSCOUT_DENSE_THREADS, default one per core."""
    return settings().dense_threads or os.cpu_count() or 1


def onnx_session(path: Path, threads: int | None = None):
    """An onnxruntime CPU session of the graph in `path`: `threads` threads (default `onnx_threads()`), no busy-waiting
    (the CPUs are shared). A graph MathScout did not export into MATHSCOUT_HOME/onnx (one stored with an index) is
    checked first (`mathscout.dense.untrusted.check_graph`); a graph onnxruntime refuses is one line."""
    import onnxruntime as ort

    remedy = f"rebuild or retrain what stored it, or delete {Path(path).name}"
    if not Path(path).resolve().is_relative_to((home() / "onnx").resolve()):
        check_graph(Path(path), remedy)
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads or onnx_threads()
    options.log_severity_level = 3
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")  # shared CPUs: no busy-waiting
    try:
        return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    except Exception as exc:  # onnxruntime's own errors (Fail, InvalidProtobuf …): the graph's fault
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise MathScoutError(f"the ONNX graph {path} cannot be loaded ({first[:200]}): {remedy}") from exc


def _session(folder: Path, backend: str):
    key = (str(folder.resolve()), backend)
    with _lock:
        if key not in _sessions:
            _sessions[key] = onnx_session(onnx_file(folder, quantized=backend == "onnx-int8"))
        return _sessions[key]


def _mean_pooled(model) -> bool:
    """Transformer → mean pooling (→ Normalize): what the ONNX path computes itself."""
    names = [type(m).__name__ for m in model]
    if names[:2] != ["Transformer", "Pooling"] or any(n != "Normalize" for n in names[2:]):
        return False
    config = model[1].get_config_dict()
    return config.get("pooling_mode", "mean" if config.get("pooling_mode_mean_tokens") else None) == "mean"


def default_backend() -> str:
    """MATHSCOUT_DENSE_BACKEND, else onnx-int8."""
    return settings().dense.backend or "onnx-int8"


class Encoder:
    """One model folder + backend: tokenises, splits into passages, encodes batches."""

    def __init__(
        self,
        model_path: str | Path | None = None,
        backend: str | None = None,
        batching: str = DEFAULT_BATCHING,
        device: str = "cpu",
    ):
        self.device = device  # "cpu" or "cuda" (resolved: mathscout.dense.device); CUDA runs the torch backend
        backend = "torch" if device == "cuda" else backend or default_backend()
        if backend not in BACKENDS:
            raise MathScoutError(f"unknown dense backend '{backend}' (available: {', '.join(BACKENDS)})")
        if batching not in BATCHINGS:
            raise MathScoutError(f"unknown dense batching '{batching}' (available: {', '.join(BATCHINGS)})")
        self.batching = batching
        self.max_batch = 1 if batching == "passage" else MAX_BATCH
        self.folder = Path(model_path) if model_path else default_model_path()
        self.backend = backend
        self.model = load_sentence_model(self.folder, device)
        self.tokenizer = self.model.tokenizer
        self.window = min(int(self.model.max_seq_length or 256), 512)
        dimension = (
            self.model.get_embedding_dimension()
            if hasattr(self.model, "get_embedding_dimension")
            else self.model.get_sentence_embedding_dimension()
        )
        assert dimension is not None, f"the dense model at {self.folder} does not tell its embedding dimension"
        self.dimension = int(dimension)
        self.normalize = any(type(m).__name__ == "Normalize" for m in self.model)
        self.query_adapter = QueryAdapter.load(self.folder)  # query-side fine-tuning: queries only
        if self.query_adapter is not None and self.query_adapter.dimension != self.dimension:
            raise MathScoutError(
                f"the query adapter in {self.folder} is {self.query_adapter.dimension}-dimensional, "
                f"the model {self.dimension}: retrain it with 'mathscout train dense'"
            )
        if backend != "torch" and not _mean_pooled(self.model):
            log(
                f"notice: {self.folder} is not a plain mean-pooled encoder (modules "
                f"{', '.join(type(m).__name__ for m in self.model)}): encoding with torch"
            )
            self.backend = backend = "torch"
        self.cls, self.sep = self.tokenizer.cls_token_id, self.tokenizer.sep_token_id
        self.pad = self.tokenizer.pad_token_id or 0
        if backend != "torch":
            self._session = _session(self.folder, backend)

    # --- word pieces -------------------------------------------------------------------------------------

    def pieces(self, texts: Sequence[str]) -> list[list[int]]:
        """Word-piece ids of each text, without special tokens and without a length limit."""
        import transformers

        verbosity = transformers.logging.get_verbosity()
        transformers.logging.set_verbosity_error()  # "longer than the maximum length": splitting is the point
        try:
            return self.tokenizer(list(texts), add_special_tokens=False, truncation=False)["input_ids"]
        finally:
            transformers.logging.set_verbosity(verbosity)

    def passages(self, pieces: list[int], max_passages: int) -> list[list[int]]:
        """Consecutive windows of word pieces (each framed by [CLS] … [SEP]), at most `max_passages`."""
        size = self.window - 2
        windows = [pieces[i : i + size] for i in range(0, max(len(pieces), 1), size)][:max_passages]
        return [[self.cls, *w, self.sep] for w in windows]

    # --- encoding ------------------------------------------------------------------------------------------

    def encode_ids(self, sequences: Sequence[list[int]], with_tokens: bool = False) -> EncodedBatch:
        """Mean-pooled (and normalised when the model normalises) embeddings of framed word-piece sequences."""
        length = max(len(s) for s in sequences)
        ids = np.full((len(sequences), length), self.pad, dtype=np.int64)
        mask = np.zeros((len(sequences), length), dtype=np.int64)
        for row, seq in enumerate(sequences):
            ids[row, : len(seq)] = seq
            mask[row, : len(seq)] = 1
        if self.backend == "torch":
            hidden, pooled = self._torch(ids, mask)
        else:
            hidden = self._session.run(
                None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
            )[0]
            weights = mask[..., None].astype(np.float32)
            pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1.0)
            if self.normalize:
                pooled /= np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
        batch = EncodedBatch(pooled.astype(np.float32))
        if with_tokens:
            for row, seq in enumerate(sequences):
                batch.tokens.append(hidden[row, 1 : len(seq) - 1])
                batch.token_ids.append(np.asarray(seq[1:-1], dtype=np.int64))
        return batch

    def _torch(self, ids: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The whole sentence-transformers pipeline (any pooling, Dense layers …): token states and embeddings."""
        import torch

        features = {
            "input_ids": torch.from_numpy(ids).to(self.device),
            "attention_mask": torch.from_numpy(mask).to(self.device),
            "token_type_ids": torch.zeros_like(torch.from_numpy(ids)).to(self.device),
        }
        with torch.inference_mode(), autocast(self.device):
            out = self.model(features)
        return out["token_embeddings"].float().cpu().numpy(), out["sentence_embedding"].float().cpu().numpy()

    def encode_queries(self, texts: Sequence[str], with_tokens: bool = False) -> EncodedBatch:
        """Query embeddings: each query's first window (queries longer than 254 word pieces are cut), through
        the folder's query adapter when it has one."""
        sequences = [self.passages(p, 1)[0] for p in self.pieces(texts)]
        if self.max_batch == 1 and len(sequences) > 1:  # each query alone: its vector does not depend on the others
            parts = [self.encode_ids([s], with_tokens) for s in sequences]
            batch = EncodedBatch(
                np.concatenate([b.pooled for b in parts]),
                [t for b in parts for t in b.tokens],
                [t for b in parts for t in b.token_ids],
            )
        else:
            batch = self.encode_ids(sequences, with_tokens)
        if self.query_adapter is not None:
            batch.pooled = self.query_adapter.apply(batch.pooled)
        return batch

    def encode_texts(self, texts: Sequence[str], batch_size: int = 32) -> np.ndarray:
        """Normalised embeddings of whole texts, each cut to the model's window, no query adapter (what a reranker
        compares): the sentence-transformers pipeline itself under `torch`; otherwise each text's first window, in
        the batches `encode_passages` forms (one text per forward pass under the "passage" batching)."""
        if self.backend == "torch":
            with autocast(self.device):
                vectors = self.model.encode(
                    list(texts), batch_size=batch_size, normalize_embeddings=True, show_progress_bar=False
                )
            return np.asarray(vectors, dtype=np.float32)
        pooled = self.encode_passages([self.passages(p, 1)[0] for p in self.pieces(texts)])
        return pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)

    def encode_passages(
        self,
        sequences: list[list[int]],
        with_tokens: Callable[[int], bool] | None = None,
        progress: Callable[[int], object] | None = None,
        on_batch: Callable[[np.ndarray, EncodedBatch], None] | None = None,
    ) -> np.ndarray:
        """Embeddings of many sequences in length-sorted batches (longest first, ≤ BATCH_TOKENS pieces and
        `max_batch` sequences each: 1 under the "passage" batching);
        `on_batch(positions, batch)` sees each batch (with token vectors for the sequences `with_tokens` picks)."""
        out = np.zeros((len(sequences), self.dimension), dtype=np.float32)
        order = np.argsort([-len(s) for s in sequences], kind="stable")
        start = 0
        while start < len(order):
            size = max(1, min(self.max_batch, BATCH_TOKENS // len(sequences[order[start]])))
            positions = order[start : start + size]
            tokens = with_tokens is not None and any(with_tokens(int(p)) for p in positions)
            batch = self.encode_ids([sequences[p] for p in positions], with_tokens=tokens)
            out[positions] = batch.pooled
            if on_batch is not None:
                on_batch(positions, batch)
            if progress is not None:
                progress(len(positions))
            start += size
        return out


def log(message: str) -> None:
    notice(message)
