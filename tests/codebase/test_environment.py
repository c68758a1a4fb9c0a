"""One reader of the environment (issue 44): no module of the package but mathscout/settings.py reads `os.environ`
(or `os.getenv`); every variable is a field of `mathscout.settings.Settings`, read with the config file beside it
(`settings().<field>`), so a key in config.toml reaches every reader of the variable.

What may stay elsewhere is handing variables down, each file in HANDED_DOWN with why: setting one for a library or
for the processes a module starts (`os.environ[...] = …`, `.update`, `.setdefault`), or copying the environment for
a child (`{**os.environ, …}`, `dict(os.environ, …)`, `os.environ.items()` filtered). Parsed with ast, nothing
imported; runs without ../shared."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.support.paths import PACKAGE
from tests.support.source import package_modules

SETTINGS = PACKAGE / "settings.py"
# module → why it hands variables down (it reads none)
HANDED_DOWN = {
    "mathscout.notices": "--quiet and the notices' stream, set for the libraries (tqdm, transformers) and the "
    "processes a command starts (settings.md: set by MathScout for the processes it starts)",
    "mathscout.logs": "MATHSCOUT_LOG and MATHSCOUT_COMMAND_LINE, the command line's level and mark, set for the "
    "processes it starts (settings.md: set by MathScout for the processes it starts)",
    "mathscout.java": "JAVA_HOME, set to the Java chosen for pyjnius, which starts the JVM from it",
    "mathscout.dense.model": "HF_HUB_OFFLINE and TRANSFORMERS_OFFLINE defaulted for huggingface: no downloads",
    "mathscout.rewrite.pool": "the SymPy workers' environment: this process's, unbuffered",
    "mathscout.retrievers.shards.cluster": "the shard actors' environment: the MATHSCOUT_ and forwarded variables",
    "mathscout.ui.services": "the background service's environment, with its login (MATHSCOUT_AUTH)",
    "mathscout.ui.app": "Gradio's cache folders (GRADIO_TEMP_DIR, GRADIO_EXAMPLES_CACHE), set for Gradio",
    "mathscout.benchmarks.startup": "the environment of the processes it times",
    "mathscout.benchmarks.ui_load": "the environment of the server it loads",
    "mathscout.benchmarks.scale": "the environment of the processes it measures",
}
# (module, variable) → why it is read outside the settings: only to be handed down, extended
READ_TO_HAND_DOWN = {
    ("mathscout.benchmarks.scale", "PYTHONPATH"): "the measured processes' import path: the checkout before it",
}
_WRITES = {"update", "setdefault", "pop", "clear", "__setitem__"}
_COPIES = {"items", "copy", "keys"}


def _is_environ(node: ast.AST, aliases: set[str]) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and node.attr in ("environ", "environb")
        and isinstance(node.value, ast.Name)
        and node.value.id == "os"
    ) or (isinstance(node, ast.Name) and node.id in aliases)


def environment_uses(path: Path) -> list[tuple[int, str, str | None]]:
    """(line, "read" / "write" / "copy", the variable when named) of every use of the environment in `path`."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    parents = {child: parent for parent in ast.walk(tree) for child in ast.iter_child_nodes(parent)}
    aliases = {
        a.asname or a.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == "os"
        for a in node.names
        if a.name in ("environ", "environb")
    }
    getenv = {
        a.asname or a.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == "os"
        for a in node.names
        if a.name == "getenv"
    }
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and (
            (isinstance(node.func, ast.Attribute) and node.func.attr == "getenv" and _is(node.func.value, "os"))
            or (isinstance(node.func, ast.Name) and node.func.id in getenv)
        ):
            found.append((node.lineno, "read", _constant(node.args[0] if node.args else None)))
            continue
        if not _is_environ(node, aliases):
            continue
        parent = parents.get(node)
        if isinstance(parent, ast.Attribute):  # os.environ.<method>
            call = parents.get(parent)
            argument = call.args[0] if isinstance(call, ast.Call) and call.args else None
            kind = "write" if parent.attr in _WRITES else "copy" if parent.attr in _COPIES else "read"
            found.append((node.lineno, kind, _constant(argument)))
        elif isinstance(parent, ast.Subscript):
            kind = "read" if isinstance(parent.ctx, ast.Load) else "write"
            found.append((node.lineno, kind, _constant(parent.slice)))
        elif isinstance(parent, ast.Dict) or (
            isinstance(parent, ast.Call) and isinstance(parent.func, ast.Name) and parent.func.id == "dict"
        ):
            found.append((node.lineno, "copy", None))  # {**os.environ, …} or dict(os.environ, …): for a child
        else:
            found.append((node.lineno, "read", None))  # `in os.environ`, passed on, iterated: a read
    return found


def _is(node: ast.AST, name: str) -> bool:
    return isinstance(node, ast.Name) and node.id == name


def _constant(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def test_only_the_settings_read_the_environment():
    reads, unexplained, seen = [], [], set()
    for name, path in package_modules():
        if path == SETTINGS:
            continue
        for line, kind, variable in environment_uses(path):
            where = f"{path.relative_to(PACKAGE.parent)}:{line}"
            if kind == "read":
                if (name, variable) in READ_TO_HAND_DOWN:
                    seen.add(name)
                    continue
                reads.append(f"{where}: reads {variable or 'the environment'}")
            elif name in HANDED_DOWN:
                seen.add(name)
            else:
                unexplained.append(f"{where}: {kind}s {variable or 'the environment'}")
    assert not reads, (
        "the environment read outside mathscout/settings.py (make it a Settings field, read settings().<field>):\n"
        + "\n".join(reads)
    )
    assert not unexplained, "variables handed down by a module not in HANDED_DOWN (add it with why):\n" + "\n".join(
        unexplained
    )
    assert not set(HANDED_DOWN) - seen, f"HANDED_DOWN names modules that hand none down: {set(HANDED_DOWN) - seen}"


def test_the_settings_are_the_reader():
    assert [kind for _, kind, _ in environment_uses(SETTINGS)].count("read") >= 1


def test_the_check_tells_reads_from_writes(tmp_path):
    source = tmp_path / "m.py"
    source.write_text(
        "import os\nfrom os import environ as env\n"
        "a = os.environ.get('A')\n"  # 3 read
        "b = os.environ['B']\n"  # 4 read
        "c = 'C' in os.environ\n"  # 5 read
        "d = os.getenv('D')\n"  # 6 read
        "e = env.get('E')\n"  # 7 read
        "os.environ['F'] = '1'\n"  # 8 write
        "os.environ.setdefault('G', '1')\n"  # 9 write
        "h = {**os.environ, 'H': '1'}\n"  # 10 copy
        "i = dict(os.environ, I='1')\n"  # 11 copy
        "j = {k: v for k, v in os.environ.items() if k.startswith('J')}\n",  # 12 copy
        encoding="utf-8",
    )
    assert sorted(environment_uses(source)) == [
        (3, "read", "A"),
        (4, "read", "B"),
        (5, "read", None),
        (6, "read", "D"),
        (7, "read", "E"),
        (8, "write", "F"),
        (9, "write", "G"),
        (10, "copy", None),
        (11, "copy", None),
        (12, "copy", None),
    ]
