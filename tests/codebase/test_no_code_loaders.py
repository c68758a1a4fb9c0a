"""No loader runs code from a file (issue 42: an index folder is untrusted input). Every module of the package is
parsed (ast, nothing imported) and each call that can execute what a file holds fails with its file and line: an
unpickler, joblib, gensim's `.load`, `torch.load` without `weights_only=True`, `np.load` without `allow_pickle=False`
and `trust_remote_code=True`. The one pickle that stays is listed with the reason it is not input from a file.
Runs without ../shared."""

from __future__ import annotations

import ast

from tests.support.source import package_modules

# module → why its pickles are not input from an index or a stranger
PICKLES_ALLOWED = {
    "mathscout.isolated": "arguments and results passed over a pipe between MathScout's own processes",
}  # the caches and dumps a user names (--cache, --dump, a benchmark's caches) are JSON lines: evaluation/work_files.py
NEVER = {"joblib.load", "KeyedVectors.load", "Word2Vec.load", "FastText.load", "Doc2Vec.load", "dill.load"}


def dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Attribute):
        return f"{dotted(node.value)}.{node.attr}"
    return node.id if isinstance(node, ast.Name) else ""


def keyword(call: ast.Call, name: str) -> object:
    found = [k.value for k in call.keywords if k.arg == name]
    return found[0].value if found and isinstance(found[0], ast.Constant) else None if not found else "?"


def findings(module: str, tree: ast.AST) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = dotted(node.func)
        short = ".".join(name.split(".")[-2:])
        problem = None
        if short in ("pickle.load", "pickle.loads", "pickle.Unpickler") and module not in PICKLES_ALLOWED:
            problem = f"{name}: unpickling runs code"
        elif short in NEVER or name.startswith("joblib."):
            problem = f"{name}: it unpickles"
        elif short == "torch.load" and keyword(node, "weights_only") is not True:
            problem = "torch.load without weights_only=True"
        elif short in ("np.load", "numpy.load") and keyword(node, "allow_pickle") is not False:
            problem = f"{name} without allow_pickle=False"
        elif keyword(node, "trust_remote_code") not in (None, False):
            problem = f"{name}(trust_remote_code=…): runs a model folder's code"
        if problem:
            found.append(f"{module}:{node.lineno}: {problem}")
    return found


def test_no_loader_executes_what_a_file_holds():
    found = []
    for module, path in package_modules():
        found += findings(module, ast.parse(path.read_text(encoding="utf-8"), filename=str(path)))
    assert not found, "\n".join(found)


def test_the_check_sees_each_kind_of_loader():
    source = (
        "import pickle, torch, numpy as np\n"
        "pickle.loads(b'')\ntorch.load('x')\ntorch.load('x', weights_only=False)\nnp.load('x')\n"
        "KeyedVectors.load('x')\nAutoModel.from_pretrained('x', trust_remote_code=True)\n"
        "torch.load('x', weights_only=True)\nnp.load('x', allow_pickle=False)\n"
    )
    assert [line.split(":")[1] for line in findings("mathscout.example", ast.parse(source))] == [
        "2",
        "3",
        "4",
        "5",
        "6",
        "7",
    ]
