"""Imports point one way: entry points → training/evaluation/benchmarks → agent → tools → retrievers → engines
→ core. Every module of the package is parsed (ast, nothing imported) and each `import` of another MathScout
module, and each `"module:attribute"` string target (the registries name code they import on first use that way),
is checked against the layer table below; a lower layer naming a higher one fails with its file and line. Runs
without ../shared."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tests.support.paths import PACKAGE
from tests.support.source import ROOTS, package_modules

# (module prefix, layer): the longest matching prefix decides ("mathscout" itself matches only the package's
# __init__); higher numbers may import lower ones only.
CORE, ENGINES, RETRIEVERS, TOOLS, AGENT, TRAINING, ENTRY = range(7)
LAYERS = {
    "mathscout": ENTRY,  # the package itself: `from mathscout import MathScout` is the Python API (lazy)
    "mathscout.__main__": ENTRY,
    "mathscout.cli": ENTRY,
    "mathscout.ui": ENTRY,
    "mathscout.benchmarks": ENTRY,  # `mathscout bench`: they drive the page, the command line and every layer
    "mathscout.evaluation": TRAINING,
    "mathscout.agent": AGENT,
    "mathscout.tools": TOOLS,
    "mathscout.retrievers": RETRIEVERS,
    "mathscout.structure": ENGINES,
    "mathscout.dense": ENGINES,
    "mathscout.rewrite": ENGINES,
    "mathscout.types_expansion": ENGINES,
    "mathscout.scale": ENGINES,
    "mathscout.question": ENGINES,  # the planner's question kinds: it parses formulas (mathscout.structure)
    # the core: corpus, store, index directory, LaTeX, config, typed records, errors, limits, rendering, process usage and isolation
    **{
        f"mathscout.{name}": CORE
        for name in (
            "clients",
            "config",
            "corpus",
            "errors",
            "events",
            "extras",
            "index",
            "isolated",
            "java",
            "latex",
            "limits",
            "logs",
            "markup",
            "notices",
            "progress",
            "jvm_archive",
            "options",
            "render",
            "schema",
            "settings",
            "stemmer",
            "store",
            "terminal",
            "types",
            "usage",
        )
    },
}
NAMES = {
    CORE: "core",
    ENGINES: "engines",
    RETRIEVERS: "retrievers",
    TOOLS: "tools",
    AGENT: "agent",
    TRAINING: "training/evaluation",
    ENTRY: "entry points",
}


def layer(module: str) -> int:
    prefixes = [p for p in LAYERS if module == p or (p != "mathscout" and module.startswith(p + "."))]
    if not prefixes:
        raise AssertionError(f"{module} is in no layer: add it to LAYERS in tests/codebase/test_layers.py")
    return LAYERS[max(prefixes, key=len)]


def imported_modules(path: Path, known: set[str]) -> list[tuple[str, int]]:
    """(module, line) of every MathScout module `path` imports, at any depth (lazy imports count too)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            # `from mathscout import events` imports the module mathscout.events
            found += [
                (f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in known else node.module, node.lineno)
                for a in node.names
            ]
    return [(name, line) for name, line in found if name == "mathscout" or name.startswith("mathscout.")]


TARGET = re.compile(r"(mathscout(?:\.\w+)+):\w+")


def named_targets(path: Path) -> list[tuple[str, int]]:
    """(module, line) of every `"module:attribute"` string target in `path`, a module-level prefix constant joined
    on (`R + "bm25:open_bm25"` with `R = "mathscout.retrievers."`)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    prefixes = {
        target.id: node.value.value
        for node in tree.body
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
        for target in node.targets
        if isinstance(target, ast.Name)
    }
    found = []
    for node in ast.walk(tree):
        text = node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None
        if (
            isinstance(node, ast.BinOp)
            and isinstance(node.op, ast.Add)
            and isinstance(node.left, ast.Name)
            and isinstance(node.right, ast.Constant)
            and isinstance(node.right.value, str)
        ):
            text = prefixes.get(node.left.id, "") + node.right.value
        match = TARGET.fullmatch(text or "")
        if match:
            found.append((match.group(1), node.lineno))
    return found


def test_every_module_is_in_a_layer():
    for name, _ in package_modules():
        layer(name)


def test_no_lower_layer_imports_a_higher_one():
    modules = package_modules()
    known = {name for name, _ in modules}
    upward = []
    for name, path in modules:
        for target, line in imported_modules(path, known):
            if layer(target) > layer(name):
                upward.append(
                    f"{path.relative_to(PACKAGE.parent)}:{line}: {name} ({NAMES[layer(name)]}) imports "
                    f"{target} ({NAMES[layer(target)]})"
                )
    assert not upward, "imports pointing up a layer:\n" + "\n".join(upward)


def test_no_string_target_names_a_higher_layer():
    """The registries' targets obey the layers too: retrievers/'s registry names retrievers/ and below; `auto` and
    the trainers are named by the entry layer (mathscout.ui.registry)."""
    upward, seen = [], set()
    for name, path in package_modules():
        for target, line in named_targets(path):
            seen.add(target)
            if layer(target) > layer(name):
                upward.append(
                    f"{path.relative_to(PACKAGE.parent)}:{line}: {name} ({NAMES[layer(name)]}) names "
                    f"{target} ({NAMES[layer(target)]})"
                )
    assert not upward, "string targets pointing up a layer:\n" + "\n".join(upward)
    assert {"mathscout.retrievers.bm25", "mathscout.evaluation.tuning"} <= seen  # the registry's and a trainer


def test_the_check_sees_an_upward_string_target(tmp_path):
    source = tmp_path / "registry.py"
    source.write_text(
        'A = "mathscout.agent."\nopen = A + "planned:open_mode"\ntrain = "mathscout.evaluation.tuning:main"\n',
        encoding="utf-8",
    )
    assert named_targets(source) == [("mathscout.agent.planned", 2), ("mathscout.evaluation.tuning", 3)]


def test_the_check_sees_an_upward_import(tmp_path):
    """The checker itself: a core module importing the agent is reported with its line."""
    source = tmp_path / "bad.py"
    source.write_text("import json\n\ndef f():\n    from mathscout.agent import MathScout\n", encoding="utf-8")
    assert imported_modules(source, set()) == [("mathscout.agent", 4)]
    assert layer("mathscout.agent") > layer("mathscout.store")


@pytest.mark.parametrize("name", ["agent", "retrievers", "tools", "ui", "evaluation", "benchmarks", "prompts"])
def test_project_folders_are_subpackages_of_mathscout(name):
    """The top-level folder is the package itself (mapped by the build, no link in the repository), and it imports
    as mathscout.<name> from the folder."""
    import importlib

    assert not (PACKAGE / name).exists() and (PACKAGE.parent / name).is_dir()
    assert ROOTS[PACKAGE.parent / name] == f"mathscout.{name}"
    if not (PACKAGE.parent / name / "__init__.py").exists():  # prompts/: package data, read by mathscout.agent.prompts
        from mathscout.agent.prompts import PROMPTS

        assert PROMPTS.resolve() == (PACKAGE.parent / name).resolve()
        return
    module = importlib.import_module(f"mathscout.{name}")
    assert Path(next(iter(module.__path__))).resolve() == (PACKAGE.parent / name).resolve()
