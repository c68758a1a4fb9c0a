"""A trained cross-encoder: (question, answer passage) → relevance, read together (Zhong 2023 thesis §2.2.2, Fig. 2.2:
"full pair-wise token interactions between both query and candidate passages"), stored with an index.

    <index>/cross-encoder/
      cross-encoder.json   CrossEncoderInfo: the inference backend and length, how it was trained, its files' CRC-32
      model/               the sentence-transformers CrossEncoder (all-MiniLM-L6-v2 + a one-logit head, fine-tuned)
      model.int8.onnx      its int8 ONNX graph, when training found that int8 keeps the scores' order

`mathscout train cross-encoder` (mathscout.evaluation.training.cross_encoder) writes the folder; `open_cross_scorer`
reads it offline (files checked against their recorded sizes and checksums). Both sides read a pair the same way:
`model_input_text` (formulas kept as LaTeX, unified with the sparse side's lexer) of the question and of the passage
(a reranker's `passage_text`: title and text), cut together to the trained number of word pieces (the longer first).

Backends: `torch` (fp32, the trained model as is; on CUDA under bf16 autocast), `onnx` (fp32 graph) and `onnx-int8`
(dynamic int8, per channel, the MatMuls only), exported as the bi-encoder's are (mathscout.dense.encoder); a backend not
stored with the index is exported once into MATHSCOUT_HOME/onnx. The ONNX backends load the model folder's tokenizer
only, not the torch model. Weights are stored fp32 whichever device trained them.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from mathscout.dense.device import autocast, resolve_device
from mathscout.dense.encoder import OnnxGraph, onnx_file, onnx_session, onnx_threads
from mathscout.dense.model import libraries_quiet, model_input_text, offline_model_folder
from mathscout.errors import IndexMissingError, MathScoutError
from mathscout.index.integrity import verify_folder
from mathscout.index.stored import StoredFile
from mathscout.index.tuned import TunedFile

FOLDER = "cross-encoder"  # inside an index folder
INFO_FILE = "cross-encoder.json"
MODEL_DIR = "model"
ONNX_FILES = {"onnx-int8": "model.int8.onnx", "onnx": "model.onnx"}  # a stored graph per backend (the chosen one)
BACKENDS = ("onnx-int8", "onnx", "torch")
# the cross-encoder's scale in `interpolate`: its probability (the logistic of its logit: what the library's predict()
# gives) or the raw logit (models stored before issue 43's fourth session, whose weights were tuned on that)
PROBABILITY, LOGIT = SCALES = ("probability", "logit")
BATCH = 32  # pairs per forward pass on torch (ONNX runs each pair alone)
INT8_OPS = ("MatMul",)  # what the int8 graph quantises (`onnx_graph`)
# hits the cross-encoder reads where the product chooses the depth (the `auto` plan, the ranker's `cross.*` features): the
# top 30, the depth its training mines hard negatives from (mathscout.evaluation.training.cross_encoder) and measured at
CROSS_DEPTH = 30
TRAIN_COMMAND = "mathscout train cross-encoder --index {index}"

_lock = threading.Lock()
_models: dict[tuple[str, int, str], Any] = {}
_tokenizers: dict[str, Any] = {}
_sessions: dict[str, Any] = {}


@dataclass
class CrossEncoderInfo(TunedFile):
    """`cross-encoder/cross-encoder.json`: how to run the model (`backend`, `max_length`), its files and how it was
    trained."""

    FILE = f"{FOLDER}/{INFO_FILE}"
    LABEL = "the cross-encoder description"

    backend: str
    max_length: int
    weight: float = (
        1.0  # the cross-encoder's share when its scores are interpolated with the first stage's (`interpolate`)
    )
    # the share tuned for each first stage measured held out (`weight_for`); `weight` is the strongest stage's
    weights: dict[str, float] = field(default_factory=dict)
    scale: str = LOGIT  # what the weights were tuned on (SCALES); a file without it: the logit
    files: dict[str, dict] = field(default_factory=dict)  # path inside the folder → size and CRC-32 (index integrity)
    training: dict[str, Any] = field(
        default_factory=dict
    )  # index build, topics, qrels, counts, held-out, backends, time

    @classmethod
    def remedy(cls, folder: Path) -> str:
        return "retrain with '" + TRAIN_COMMAND.format(index=folder.parent) + "'"

    @classmethod
    def parse(cls, file: StoredFile, data: dict[str, Any]) -> CrossEncoderInfo:
        """The backend and length, and every file's record, which the folder's files must match."""
        info = cls(
            backend=file.name(data.get("backend"), "backend", BACKENDS),
            max_length=file.whole(data.get("max_length"), "max_length", 16, 512),
            weight=file.number(data.get("weight", 1.0), "weight", 0.0, 1.0),
            weights={
                str(k): file.number(v, "weights", 0.0, 1.0)
                for k, v in file.mapping(data.get("weights", {}), "weights").items()
            },
            scale=file.name(data.get("scale", LOGIT), "scale", SCALES),
            files=file.mapping(data.get("files"), "files"),
            training=file.mapping(data.get("training", {}), "training"),
        )
        for relative, record in info.files.items():
            file.record(record, relative)
        file.require(f"{MODEL_DIR}/config.json" in info.files, "its file list has no model")
        verify_folder(file.path.parent, info.files, file.remedy)
        return info

    @classmethod
    def require(cls, index_path: Path | str) -> CrossEncoderInfo:
        """The info of the cross-encoder stored with the index; one line saying what to run when there is none."""
        info = cls.read(Path(index_path))
        if info is None:
            raise IndexMissingError(
                f"the index {index_path} has no trained cross-encoder: run " + TRAIN_COMMAND.format(index=index_path)
            )
        return info


def weight_for(info: CrossEncoderInfo, first_stage: str | None) -> float:
    """The interpolation weight for hits of `first_stage`: the one tuned for it held out, else the stored `weight`."""
    return info.weights.get(first_stage or "", info.weight)


def measured_gain(info: CrossEncoderInfo, first_stage: str) -> bool:
    """True when the cross-encoder's training measured that reranking `first_stage`'s top hits with the weight stored
    for it beats that first stage on its held-out topics (only the stages it measured: over another one, e.g. the
    learned ranker, it is not assumed to help)."""
    held_out = info.training.get("held_out", {})
    before = held_out.get("first_stage", {}).get(first_stage)
    weight = weight_for(info, first_stage)
    interpolation = held_out.get("interpolation", {})
    after = interpolation.get("grid", {}).get(f"{weight:.2f}", {}).get(first_stage)
    if after is None and weight == info.weight:  # a model stored before the grid was recorded
        after = interpolation.get("reranked", {}).get(first_stage)
    return isinstance(before, (int, float)) and isinstance(after, (int, float)) and weight > 0 and after > before


def interpolate(
    cross: Sequence[float] | np.ndarray, first: Sequence[float], weight: float, scale: str = PROBABILITY
) -> np.ndarray:
    """`weight` · z(cross-encoder) + (1 − `weight`) · z(first stage), each standardised over one query's reranked hits
    (a constant list standardises to 0): the relevance signals fused by linear interpolation, the weight tuned on
    held-out topics (Zhong 2023 thesis §5.2.4, MABOWDOR's fusion). `weight` 1 is the cross-encoder alone. `cross` are
    logits; on the `probability` scale their logistic is standardised: a listwise-trained model's logits have a long
    upper tail that lets its top hit override the first stage at any weight, which the probability bounds."""

    def z(values: Sequence[float] | np.ndarray) -> np.ndarray:
        array = np.asarray(values, dtype=np.float64)
        spread = array.std() if len(array) else 0.0
        return (array - array.mean()) / spread if spread > 0 else np.zeros_like(array)

    if weight >= 1.0:
        return np.asarray(cross, dtype=np.float64)
    signal = np.asarray(cross, dtype=np.float64)
    if scale == PROBABILITY:
        signal = 0.5 * (1.0 + np.tanh(0.5 * signal))  # the logistic, without overflow
    return weight * z(signal) + (1.0 - weight) * z(first)


def load_cross_model(model_dir: Path, max_length: int, cached: bool = True, device: str = "cpu"):
    """The sentence-transformers CrossEncoder in `model_dir` (or the base bi-encoder's weights with a new one-logit
    head), offline, on `device`; cached per folder, length and device unless `cached` is False (a model to train)."""
    key = (str(Path(model_dir).resolve()), max_length, device)
    with _lock:
        if not cached:
            return _load(Path(model_dir), max_length, device)
        if key not in _models:
            _models[key] = _load(Path(model_dir), max_length, device)
        return _models[key]


def load_tokenizer(model_dir: Path):
    """The model folder's tokenizer alone (transformers AutoTokenizer, offline), cached per folder: what the ONNX
    backends need instead of the torch model (~0.2 s instead of seconds)."""
    key = str(Path(model_dir).resolve())
    with _lock:
        if key not in _tokenizers:
            offline_model_folder(Path(model_dir))
            from transformers import AutoTokenizer

            try:
                _tokenizers[key] = AutoTokenizer.from_pretrained(key, local_files_only=True)
            except Exception as exc:  # a loading failure is the folder's, said in one line
                first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
                raise MathScoutError(f"cannot load the cross-encoder's tokenizer in {model_dir}: {first}") from exc
        return _tokenizers[key]


def pair_features(tokenizer: Any, query: str, texts: list[str], max_length: int) -> dict[str, np.ndarray]:
    """Word pieces of each (query, text) pair as the CrossEncoder's `preprocess` makes them: cut together to
    `max_length` (the longer first), padded to the longest pair; input_ids, attention_mask, token_type_ids."""
    encoded = tokenizer(
        [query] * len(texts),
        texts,
        truncation="longest_first",
        max_length=max_length,
        padding=True,
        return_tensors="np",
    )
    ids = np.asarray(encoded["input_ids"], dtype=np.int64)
    features = {"input_ids": ids, "attention_mask": np.asarray(encoded["attention_mask"], dtype=np.int64)}
    types = encoded.get("token_type_ids")
    features["token_type_ids"] = np.asarray(types, dtype=np.int64) if types is not None else np.zeros_like(ids)
    return features


def _load(model_dir: Path, max_length: int, device: str = "cpu"):
    offline_model_folder(model_dir)
    from sentence_transformers.cross_encoder import CrossEncoder

    try:  # quiet: "classifier newly initialized" is what training starts from; no 'Loading weights' bar
        with libraries_quiet():
            model = CrossEncoder(
                str(model_dir), num_labels=1, max_length=max_length, device=device, local_files_only=True
            )
    except Exception as exc:  # a loading failure is the folder's, said in one line
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise MathScoutError(f"cannot load the cross-encoder in {model_dir}: {first}") from exc
    model.max_seq_length = max_length
    model.eval()
    return model


def onnx_graph(model_dir: Path, max_length: int) -> OnnxGraph:
    """The classifier as an ONNX graph: word pieces of a (question, passage) pair → its logit. Its int8 graph quantises
    the MatMuls (the linear layers' weights, where int8 saves time) and keeps the embedding tables fp32: a lookup gains
    nothing from int8 but error (top-10 agreement with fp32 0.893 → 0.910 on the training's 30 agreement topics)."""
    return OnnxGraph(
        lambda: load_cross_model(model_dir, max_length).model, "logits", "logits", Path(model_dir), int8_ops=INT8_OPS
    )


class CrossScorer:
    """One model folder + backend: the relevance logits of passages for a question (higher is more relevant). torch
    runs on `device` ("cpu" or "cuda", bf16 autocast there); the ONNX backends on the CPU, with the tokenizer alone."""

    def __init__(
        self, model_dir: Path, max_length: int, backend: str = "torch", graph: Path | None = None, device: str = "cpu"
    ):
        if backend not in BACKENDS:
            raise MathScoutError(f"unknown cross-encoder backend '{backend}' (available: {', '.join(BACKENDS)})")
        self.model_dir, self.max_length, self.backend = Path(model_dir), max_length, backend
        self.device = device if backend == "torch" else "cpu"
        self.weight = 1.0  # the stored interpolation weight (`open_cross_scorer`)
        self.info: CrossEncoderInfo | None = None  # the stored model's description (`open_cross_scorer`)
        self.model = load_cross_model(self.model_dir, max_length, device=self.device) if backend == "torch" else None
        self.tokenizer = load_tokenizer(self.model_dir) if backend != "torch" else None
        self.session = None
        if backend != "torch":
            path = graph or onnx_file(self.model_dir, backend == "onnx-int8", onnx_graph(self.model_dir, max_length))
            with _lock:
                if str(path) not in _sessions:
                    _sessions[str(path)] = onnx_session(path, threads=1)  # pairs run side by side instead
                self.session = _sessions[str(path)]

    def scores(self, question: str, passages: list[str], batch_size: int = BATCH) -> np.ndarray:
        """One logit per passage, in the given order; the model reads the question and each passage with their formulas
        as unified LaTeX (`model_input_text`, the question rendered once). torch runs batches of `batch_size`; ONNX runs
        each pair alone (`_pairs_alone`)."""
        query = model_input_text(question)
        texts = [model_input_text(p) for p in passages]
        if not texts:
            return np.zeros(0, dtype=np.float32)
        if self.session is None:
            return self._torch_batches(query, texts, batch_size)
        return self._pairs_alone(self.session, pair_features(self.tokenizer, query, texts, self.max_length))

    def _torch_batches(self, query: str, texts: list[str], batch_size: int) -> np.ndarray:
        import torch
        from sentence_transformers.util import batch_to_device

        assert self.model is not None, "the torch backend loads the model"
        out = []
        with torch.inference_mode(), autocast(self.device):
            for start in range(0, len(texts), batch_size):
                features = self.model.preprocess([(query, text) for text in texts[start : start + batch_size]])
                scores = self.model(batch_to_device(features, self.model.device))["scores"]
                out.append(scores.view(-1).float().cpu().numpy())
        return np.concatenate(out)

    @staticmethod
    def _pairs_alone(session: Any, features: dict) -> np.ndarray:
        """ONNX: each tokenised pair is a forward pass of its own, unpadded, one pair per core (MATHSCOUT_DENSE_THREADS if
        set) at a time on a one-thread session (onnxruntime releases the GIL). Alone, a pair's logit never depends on
        the hits reranked beside it (dynamic int8 scales activations per pass), and on this machine it is faster than
        batches: the top 30 on int8 193 ms vs 231 ms for a batch of 30, fp32 330 vs 388 ms (20 dev questions, model
        time)."""
        ids, mask = np.asarray(features["input_ids"]), np.asarray(features["attention_mask"])
        types = np.asarray(features["token_type_ids"]) if "token_type_ids" in features else np.zeros_like(ids)

        def one(row: int) -> float:
            kept = mask[row].astype(bool)  # the pair's own word pieces, whichever side its tokenizer pads
            inputs = {"input_ids": ids[row, kept][None], "attention_mask": mask[row, kept][None]}
            inputs["token_type_ids"] = types[row, kept][None]
            return float(session.run(None, inputs)[0].reshape(-1)[0])

        # threads of this call's own: a deep rerank never queues another request's pairs behind its own
        with ThreadPoolExecutor(min(len(ids), onnx_threads()), thread_name_prefix="cross") as pool:
            return np.array(list(pool.map(one, range(len(ids)))), dtype=np.float32)


def open_cross_scorer(index_path: Path | str, backend: str | None = None, device: str | None = None) -> CrossScorer:
    """The cross-encoder stored with the index, on `backend` (default: the one its training chose, or torch where
    `device` resolves to CUDA: mathscout.dense.device)."""
    info = CrossEncoderInfo.require(index_path)
    resolved = resolve_device(device)
    backend = backend or ("torch" if resolved == "cuda" else info.backend)
    if backend not in BACKENDS:
        raise MathScoutError(f"unknown cross-encoder backend '{backend}' (available: {', '.join(BACKENDS)})")
    folder = Path(index_path) / FOLDER
    stored = ONNX_FILES.get(backend)
    graph = folder / stored if stored and stored in info.files else None
    scorer = CrossScorer(folder / MODEL_DIR, info.max_length, backend, graph, device=resolved)
    scorer.weight, scorer.info = info.weight, info
    return scorer


def has_cross_encoder(index_path: Path | str) -> bool:
    return CrossEncoderInfo.path(Path(index_path)).is_file()
