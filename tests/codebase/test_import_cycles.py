"""No import circle in the core (issue 44): the package's import graph, lazy imports inside functions included, has no
cycle through a core module (mathscout/types.py, schema.py, render.py, the tokenizer, the corpus readers, …). The
types are the lowest floor and import nothing of MathScout; serialisation lives above them (mathscout/schema.py).

Cycles elsewhere are listed in KNOWN with the reason they stay; a new cycle, or a known one that grew or went away,
fails with the imports that make it (file and line). Parsed with ast, nothing imported; runs without ../shared."""

from __future__ import annotations

import ast
import sys

from tests.codebase.test_layers import CORE, layer
from tests.support.paths import PACKAGE
from tests.support.source import package_modules

R = "mathscout.retrievers."
# cycles outside the core that remain, each with why; a fix removes its entry (the test then says it went away)
KNOWN = {
    frozenset(
        R + name
        for name in (
            "base",
            "bm25",
            "compose",
            "dense",
            "fusion",
            "registry",
            "rerank",
            "rewrite",
            "shards.retriever",
            "shards.scoring",
            "shards.worker",
            "structure",
        )
    ): "the composition operators: base.py's `>>`, `+`, `%` build compose.py's stages (imported on first use), "
    "which build fusion, reranking and rewriting, which open modes through the registry, which opens shards; "
    "breaking it means moving the operators' targets behind the registry (a retriever layer refactor)",
    frozenset({"mathscout.benchmarks.scale", "mathscout.benchmarks.scale_dense"}): "`bench scale` runs the dense "
    "part from scale_dense.py, which reuses scale.py's timing helpers: a benchmark's own two files",
}


def import_graph() -> tuple[dict[str, set[str]], dict[tuple[str, str], str]]:
    """module → the MathScout modules it imports (at any depth, relative imports resolved; `from p import m` of a
    submodule is an import of p.m), and (importer, imported) → 'file:line' of the first such import. A package's
    implicit import of its parent (Python runs mathscout/corpus/__init__.py before mathscout/corpus/jsonl.py) is not
    an edge: only what the source names is."""
    modules = package_modules()
    known = {name for name, _ in modules}

    def nearest(name: str) -> str | None:
        while name and name not in known:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    where: dict[tuple[str, str], str] = {}
    for name, path in modules:
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        graph[name] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                    base = f"{parent}.{base}" if base else parent
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
            else:
                continue
            for target in targets:
                found = nearest(target) if target.startswith("mathscout") else None
                if found and found != name:
                    graph[name].add(found)
                    where.setdefault((name, found), f"{path.relative_to(PACKAGE.parent)}:{node.lineno}")
    return graph, where


def cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(frozenset(component))
    return found


def _described(component: frozenset[str], graph, where) -> str:
    lines = [f"{a} -> {b} ({where[a, b]})" for a in sorted(component) for b in sorted(graph[a] & component)]
    return "\n  ".join([f"{len(component)} modules:", *lines])


def test_the_core_is_in_no_import_cycle():
    graph, where = import_graph()
    core = [c for c in cycles(graph) if any(layer(m) == CORE for m in c)]
    assert not core, "import cycles through the core:\n" + "\n".join(_described(c, graph, where) for c in core)


def test_the_types_import_nothing_of_mathscout():
    """The lowest floor: a Hit or a Document knows nothing of how it is written out (mathscout.schema does that)."""
    graph, where = import_graph()
    assert not graph["mathscout.types"], [where["mathscout.types", m] for m in sorted(graph["mathscout.types"])]


def test_no_cycle_but_the_known_ones():
    graph, where = import_graph()
    found = set(cycles(graph))
    new = [_described(c, graph, where) for c in found - KNOWN.keys()]
    gone = [sorted(c) for c in KNOWN.keys() - found]
    assert not new, "import cycles not in KNOWN (break them, or add them with the reason they stay):\n" + "\n".join(new)
    assert not gone, f"cycles in KNOWN that are no longer there (remove them from KNOWN): {gone}"


def test_the_check_sees_a_lazy_cycle(tmp_path, monkeypatch):
    """The checker itself: two modules importing each other, one inside a function, are one cycle."""
    a, b = tmp_path / "a.py", tmp_path / "b.py"
    a.write_text("from mathscout.b import g\n", encoding="utf-8")
    b.write_text("def g():\n    from mathscout import a\n", encoding="utf-8")
    here = sys.modules[__name__]
    monkeypatch.setattr(here, "package_modules", lambda: [("mathscout.a", a), ("mathscout.b", b)])
    monkeypatch.setattr(here, "PACKAGE", tmp_path / "mathscout")
    graph, where = import_graph()
    assert graph == {"mathscout.a": {"mathscout.b"}, "mathscout.b": {"mathscout.a"}}
    assert cycles(graph) == [frozenset({"mathscout.a", "mathscout.b"})]
    assert where["mathscout.b", "mathscout.a"] == "b.py:2"


def test_relative_imports_are_resolved(tmp_path, monkeypatch):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("from .x import f\n", encoding="utf-8")
    (pkg / "x.py").write_text("def f():\n    from . import y\n", encoding="utf-8")
    (pkg / "y.py").write_text("from ..pkg import x\n", encoding="utf-8")
    here = sys.modules[__name__]
    monkeypatch.setattr(
        here,
        "package_modules",
        lambda: [
            ("mathscout.pkg", pkg / "__init__.py"),
            ("mathscout.pkg.x", pkg / "x.py"),
            ("mathscout.pkg.y", pkg / "y.py"),
        ],
    )
    monkeypatch.setattr(here, "PACKAGE", tmp_path / "mathscout")
    graph, _ = import_graph()
    assert graph["mathscout.pkg"] == {"mathscout.pkg.x"}
    assert graph["mathscout.pkg.x"] == {"mathscout.pkg.y"}
    assert graph["mathscout.pkg.y"] == {"mathscout.pkg.x"}
