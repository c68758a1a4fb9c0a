"""Damaged files an index holds (issue 32, items 7–9 and 11): every stored JSON file (manifest.json, shards.json,
fusion.json, structure.json, ranker.json) is refused with one line naming it, before any work (and before Ray
starts); nothing on disk changes; `--json` never prints invalid JSON. Also: index folders that are mount points
build, rebuild and survive kill -9 mid-swap; a read-only index refuses a new component in one line; sharded structure
hits are ranked; an ambiguous formula's rewrite notice is plain words.

Add a damaged file by adding one `Case` to CASES (single index) or SHARD_CASES (a 2-shard index): the file, how to
damage it, the command, a phrase the error line must hold.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.cli import MATHSCOUT, REPO, env, run_cli
from tests.support.corpora import TINY_DOCS
from tests.support.harness import Outcome, assert_clean_refusal, refused_unchanged, run_measured, snapshot

DEEP = "[" * 100_000 + "]" * 100_000  # nested far beyond Python's recursion limit


@dataclass(frozen=True)
class Case:
    """A damaged file: `damage(path)` writes it; `command` runs with {index} replaced; the error line holds `phrase`."""

    file: str
    damage: Callable[[Path], None]
    command: tuple[str, ...]
    phrase: str


def write(text: str) -> Callable[[Path], None]:
    return lambda path: path.write_text(text, encoding="utf-8")


def edit(change: Callable[[dict], None]) -> Callable[[Path], None]:
    """Change the file's JSON in place (json.dumps writes float('inf') as Infinity, as a hand edit may)."""

    def apply(path: Path) -> None:
        data = json.loads(path.read_text(encoding="utf-8"))
        change(data)
        path.write_text(json.dumps(data), encoding="utf-8")

    return apply


def search(mode: str, query: str = "triangle $x^2$") -> tuple[str, ...]:
    return ("search", "--index", "{index}", "--mode", mode, "--json", query)


def ranker(**fields) -> Callable[[Path], None]:
    """A ranker.json as `mathscout train ranker` writes it (without a model), with `fields` replaced."""
    from mathscout.retrievers.features import feature_names

    used = ["bm25", "structure"]
    data = {
        "retrievers": used,
        "used": used,
        "depth": 100,
        "features": feature_names(used),
        "vocabulary": {"kinds": [], "sources": []},
        "model": {},
        "training": {},
    }
    return write(json.dumps({**data, **fields}))


CASES = [
    pytest.param(Case("manifest.json", write("null"), search("bm25"), "the index manifest"), id="manifest-null"),
    pytest.param(Case("manifest.json", write("[]"), search("bm25"), "not an object"), id="manifest-list"),
    pytest.param(Case("manifest.json", write(DEEP), search("bm25"), "nested too deeply"), id="manifest-deep"),
    pytest.param(
        Case("manifest.json", edit(lambda d: d.update(documents="300")), search("bm25"), "documents is '300'"),
        id="manifest-count-text",
    ),
    pytest.param(
        Case(
            "manifest.json",
            edit(lambda d: d.update(components=list(d["components"]))),
            search("bm25"),
            "components is a list",
        ),
        id="manifest-components-list",
    ),
    pytest.param(
        Case(
            "manifest.json",
            edit(lambda d: d["components"].update({"../bm25": {}})),
            search("bm25"),
            "a component's name is '../bm25'",
        ),
        id="manifest-component-path",
    ),
    pytest.param(
        Case(
            "manifest.json",
            edit(lambda d: d["components"]["bm25"]["files"].update({"x": {"bytes": -1}})),
            search("bm25"),
            "the size of x is -1",
        ),
        id="manifest-file-record",
    ),
    pytest.param(
        Case("fusion.json", write('{"weights": {"hybrid": 1}}'), search("hybrid"), "a weighted mode is 'hybrid'"),
        id="fusion-weights-hybrid",
    ),
    pytest.param(
        Case("fusion.json", write('{"weights": {"bm25": Infinity}}'), search("hybrid"), "Infinity is not a number"),
        id="fusion-weight-infinity",
    ),
    pytest.param(
        Case(
            "fusion.json", write('{"weights": {"bm25": NaN, "structure": 1}}'), search("hybrid"), "NaN is not a number"
        ),
        id="fusion-weight-nan",
    ),
    pytest.param(
        Case("fusion.json", write('{"weights": {"bm25": 1e300}}'), search("hybrid"), "the weight of bm25"),
        id="fusion-weight-huge",
    ),
    pytest.param(
        Case(
            "fusion.json",
            write('{"weights": {"bm25": 1}, "depth": 1e400}'),
            search("hybrid"),
            "the number 1e400 is out of range",
        ),
        id="fusion-depth-overflow",
    ),
    pytest.param(
        Case(
            "fusion.json",
            write('{"weights": {"bm25": 1}, "depth": 0}'),
            search("hybrid"),
            "fusion.json is unusable (depth is 0",
        ),
        id="fusion-depth-zero",
    ),
    pytest.param(
        Case("fusion.json", write('{"weights": {"bm25": 1}, "method": "best"}'), search("hybrid"), "method is 'best'"),
        id="fusion-method",
    ),
    pytest.param(
        Case("fusion.json", write('{"weights": ' + DEEP + "}"), search("hybrid"), "nested too deeply"), id="fusion-deep"
    ),
    pytest.param(
        Case(
            "structure.json",
            write('{"lambda_m": 1e400, "max_formulas": 0, "text": "full"}'),
            search("structure"),
            "the number 1e400 is out of range",
        ),
        id="structure-lambda-overflow",
    ),
    pytest.param(
        Case(
            "structure.json",
            write('{"lambda_m": 1e300, "max_formulas": 0, "text": "full"}'),
            search("structure"),
            "lambda_m is 1e+300",
        ),
        id="structure-lambda-huge",
    ),
    pytest.param(
        Case(
            "structure.json",
            write(
                '{"lambda_m": 0.1, "max_formulas": 0, "text": "full", "kinds": '
                '{"formula": {"lambda_m": -Infinity, "text": "full"}}}'
            ),
            search("structure"),
            "-Infinity is not a number",
        ),
        id="structure-kind-infinity",
    ),
    pytest.param(
        Case("ranker.json", ranker(depth=float("inf")), search("ranked"), "Infinity is not a number"),
        id="ranker-depth-infinity",
    ),
    pytest.param(
        Case("ranker.json", ranker(used=["dense"]), search("ranked"), "a used retriever is 'dense'"),
        id="ranker-used-unknown",
    ),
    pytest.param(
        Case("ranker.json", write("null"), search("ranked"), "its content is missing or null"), id="ranker-null"
    ),
]


def check_refusal(index: Path, case: Case, home: Path) -> str:
    """Damage `case.file` of `index`, run the command: one clean error line holding the phrase, nothing changed on
    disk, memory under the bound. The error line."""
    case.damage(index / case.file)
    line = refused_unchanged(index, case.command, home)
    assert case.phrase in line and case.file in line, line
    return line


@pytest.mark.parametrize("case", CASES)
def test_a_damaged_file_is_one_clear_line_and_changes_nothing(tiny_index, tmp_path, case):
    check_refusal(shutil.copytree(tiny_index, tmp_path / "idx"), case, tmp_path)


def test_a_rebuild_replaces_an_index_whose_manifest_is_damaged(tiny_index, tiny_corpus, tmp_path):
    """The rebuild command the manifest's error names works over it, and keeps the index's tuned files."""
    index = shutil.copytree(tiny_index, tmp_path / "idx")
    (index / "fusion.json").write_text('{"weights": {"bm25": 1}}', encoding="utf-8")
    (index / "manifest.json").write_text("null", encoding="utf-8")
    outcome = run_measured(
        ["-v", "index", "--input", str(tiny_corpus), "--index", str(index), "--components", "bm25"], tmp_path
    )  # -v: the build's account of what it replaced is an info log
    assert outcome.returncode == 0, outcome.stderr[-2000:]
    assert "manifest" in outcome.stderr and "damaged" in outcome.stderr, outcome.stderr
    assert sorted(p.name for p in index.iterdir()) == ["bm25", "fusion.json", "manifest.json", "store.sqlite"]


def test_json_output_refuses_numbers_json_has_not():
    from mathscout.errors import MathScoutError
    from mathscout.ui.commands.common import strict_json

    assert json.loads(strict_json({"score": 1.5})) == {"score": 1.5}
    for value in (float("inf"), float("nan")):
        with pytest.raises(MathScoutError, match="JSON cannot represent"):
            strict_json({"hits": [{"score": value}]})


def test_a_tuned_file_is_written_as_strict_json(tmp_path):
    """A NaN a trainer computes (a mean over no topics) is stored as null, which readers take as missing."""
    from mathscout.index.layout import write_json_atomic

    write_json_atomic(tmp_path / "t.json", {"cv": {"bm25": float("nan")}, "weights": [1.0, float("inf")]})
    assert json.loads((tmp_path / "t.json").read_text(), parse_constant=pytest.fail) == {
        "cv": {"bm25": None},
        "weights": [1.0, None],
    }


# --- sharded indexes (item 8): shards.json checked whole before Ray starts ---------------------------------------


def first_shard_twice(data: dict) -> None:
    data["shards"].append(data["shards"][0])


SHARD_CASES = [
    pytest.param(
        Case("shards.json", edit(first_shard_twice), search("bm25"), "shard 3 starts at document 0"),
        id="shard-listed-twice",
    ),
    pytest.param(
        Case(
            "shards.json",
            edit(lambda d: d["shards"][0].update(first_document=-1)),
            search("bm25"),
            "shard 1's first_document is -1",
        ),
        id="shard-negative-first",
    ),
    pytest.param(
        Case(
            "shards.json",
            edit(lambda d: d["shards"][1].update(first_document=100)),
            search("bm25"),
            "shard 2 starts at document 100",
        ),
        id="shard-overlap",
    ),
    pytest.param(
        Case(
            "shards.json",
            edit(lambda d: d["shards"].pop()),
            search("bm25"),
            f"the shards hold {TINY_DOCS // 2} documents",
        ),  # one of the tiny corpus's two halves
        id="shard-dropped",
    ),
    pytest.param(
        Case("shards.json", edit(lambda d: d.update(shards=[])), search("bm25"), "it lists no shard"),
        id="shard-list-empty",
    ),
    pytest.param(
        Case(
            "shards.json", edit(lambda d: d["shards"][1].update(path="shards/gone")), search("bm25"), "shard 2's folder"
        ),
        id="shard-folder-missing",
    ),
    pytest.param(
        Case(
            "shards.json",
            edit(lambda d: d["shards"][1].update(path="shards/shard-000")),
            search("bm25"),
            "shard 2's folder",
        ),
        id="shard-folder-twice",
    ),
    pytest.param(
        Case(
            "shards.json",
            edit(lambda d: d.update(components=["bm25", "nope"])),
            search("bm25"),
            "a component is 'nope'",
        ),
        id="shard-component-unknown",
    ),
    pytest.param(
        Case(
            "shards.json",
            edit(lambda d: d.update(components=["bm25", "dense"])),
            search("bm25"),
            "the index has no dense component",
        ),
        id="shard-component-unbuilt",
    ),
    pytest.param(
        Case("shards.json", write('{"shards": ' + DEEP + "}"), search("bm25"), "nested too deeply"), id="shard-deep"
    ),
    pytest.param(
        Case("shards.json", write("null"), search("structure"), "its content is missing or null"), id="shard-null"
    ),
]


@pytest.fixture(scope="module")
def two_shards(tiny_corpus, tmp_path_factory) -> Path:
    """The tiny corpus as a 2-shard index (bm25, structure), built by the command a user runs."""
    pytest.importorskip("ray", reason="the optional 'distributed' part (ray) is not installed")
    folder = tmp_path_factory.mktemp("two-shards")
    result = run_cli(
        [
            "index",
            "--input",
            str(tiny_corpus),
            "--index",
            str(folder / "idx"),
            "--shards",
            "2",
            "--ray",
            "local",
            "--components",
            "bm25,structure",
        ],
        folder,
        timeout=900,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return folder / "idx"


@pytest.mark.parametrize("case", SHARD_CASES)
@pytest.mark.ray
@pytest.mark.slow
def test_a_damaged_shards_manifest_is_one_clear_line_before_ray_starts(two_shards, tmp_path, case):
    check_refusal(shutil.copytree(two_shards, tmp_path / "idx"), case, tmp_path)


@pytest.mark.ray
@pytest.mark.slow
def test_sharded_structure_hits_are_ranked_from_one(two_shards, tmp_path):
    """Item 11(c): every structure plan (a formula and words, a lone formula, words only) numbers its hits; the
    queries go to one search prompt (one Ray start)."""
    queries = ["triangle $x^2+y^2$", "$x^2+y^2$", "triangle inequality"]
    outcome = run_measured(
        ["search", "--index", str(two_shards), "--mode", "structure", "--k", "5", "--json"],
        tmp_path,
        stdin="\n".join(queries) + "\n",
    )
    assert outcome.returncode == 0, outcome.stderr[-2000:]
    text, decoder, answers = outcome.stdout.split("\n", 1)[1], json.JSONDecoder(), []  # after the prompt's banner
    while text.strip():
        answer, end = decoder.raw_decode(text.strip())
        answers.append(answer)
        text = text.strip()[end:]
    assert [a["query"] for a in answers] == queries
    for answer in answers:
        assert answer["hits"] and [h["rank"] for h in answer["hits"]] == list(range(1, len(answer["hits"]) + 1)), answer


# --- rewriting (item 11(d)) ---------------------------------------------------------------------------------------


def test_a_formula_sympy_reads_two_ways_gets_a_notice_in_words():
    """SymPy's LaTeX parser hands back an unresolved lark `_ambig` tree for `f(x)` (f of x, or f times x): the rewrite
    worker's reply (shown as 'not rewritten: …') says so in words. Run here, not in the worker: its 2 s budget
    includes compiling lark's grammar, which a loaded machine may not finish."""
    from mathscout.rewrite.forms import rewrite_in_worker

    for latex in ("\\int_0^1 f(x) dx", "\\lim_{n\\to\\infty} (1+1/n)^n"):
        replies: list[dict] = []
        rewrite_in_worker(latex, None, replies.append)
        assert replies == [{"done": True, "error": replies[0]["error"], "skipped": {}}], replies
        assert "more than one way" in replies[0]["error"] and "Tree" not in replies[0]["error"], replies


# --- index folders that are mount points (item 7) and read-only indexes (item 9) ---------------------------------


def _can_mount() -> bool:
    return (
        shutil.which("unshare") is not None
        and subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode == 0
    )


needs_mount = pytest.mark.skipif(not _can_mount(), reason="needs unshare -m (root, a private mount namespace) to mount")


def in_mount_namespace(script: str, home: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    """Run a shell script in a private mount namespace (its mounts vanish with it; bind-mounted folders keep what
    was written into them)."""
    return subprocess.run(
        ["unshare", "-m", "sh", "-e", "-c", script],
        capture_output=True,
        text=True,
        env=env(home),
        cwd=REPO,
        timeout=timeout,
    )


@needs_mount
@pytest.mark.slow
def test_an_index_folder_that_is_a_mount_point_builds_rebuilds_and_searches(tiny_index, tiny_corpus, tmp_path):
    """A tmpfs mounted on the index folder (renaming it fails with EBUSY): built inside, rebuilt, searched."""
    mount, out = tmp_path / "mnt", tmp_path / "out"
    mount.mkdir()
    out.mkdir()
    cli = " ".join(MATHSCOUT)
    build = f"{cli} index --input '{tiny_corpus}' --index '{mount}'"
    find = f"{cli} search --index '{mount}' --mode bm25 --json triangle"
    result = in_mount_namespace(
        f"mount -t tmpfs tmpfs '{mount}'; mkdir '{mount}/lost+found'; {build} --components bm25,structure; "
        f"{find} > '{out}/first.json'; {cli} -v index --input '{tiny_corpus}' --index '{mount}' 2> '{out}/rebuild.log'; {find} > '{out}/second.json'; "
        f"ls -A '{mount}' > '{out}/listing'",
        tmp_path,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    expected = [
        h["doc_id"]
        for h in json.loads(
            run_cli(["search", "--index", str(tiny_index), "--mode", "bm25", "--json", "triangle"], tmp_path).stdout
        )["hits"]
    ]
    for name in ("first.json", "second.json"):
        assert [h["doc_id"] for h in json.loads((out / name).read_text())["hits"]] == expected
    assert "keeping its components bm25, structure" in (out / "rebuild.log").read_text()
    assert (out / "listing").read_text().split() == ["bm25", "lost+found", "manifest.json", "store.sqlite", "structure"]


KILL_AT_MOVE = """
import os, signal, sys
import mathscout.index.safety as safety
from mathscout.retrievers.indexing import build_index

swap, replace, moves = safety._swap_entries, os.replace, [0]

def move(source, target):
    moves[0] += 1
    if moves[0] == int(sys.argv[3]):
        os.kill(os.getpid(), signal.SIGKILL)
    replace(source, target)

def swap_and_die(built, target):
    os.replace = move
    swap(built, target)

safety._swap_entries = swap_and_die
build_index([sys.argv[1]], sys.argv[2], ["structure"])
"""
OLD_ENTRIES, NEW_ENTRIES = (
    5,
    4,
)  # the old index's entries (with fusion.json) and the new one's (store, structure, kept fusion.json, manifest)


@needs_mount
@pytest.mark.slow
def test_kill_9_mid_swap_in_a_mount_point_leaves_the_old_index_or_none_and_the_next_build_restores_it(
    tiny_index, tiny_corpus, tmp_path
):
    """A rebuild killed (SIGKILL) before each move of the swap inside a bind-mounted index folder: the folder is the old
    index or no index (a clear error); settling the leftovers gives back the old index byte for byte, and the next
    build does so first, so the old index's tuned files are kept."""
    kills = range(1, OLD_ENTRIES + NEW_ENTRIES + 1)
    folders = {n: shutil.copytree(tiny_index, tmp_path / f"idx-{n}") for n in kills}
    for folder in folders.values():
        (folder / "fusion.json").write_text('{"weights": {"bm25": 1}}', encoding="utf-8")
    before = snapshot(folders[1])
    (tmp_path / "kill.py").write_text(KILL_AT_MOVE, encoding="utf-8")
    script = "; ".join(
        f"mount --bind '{f}' '{f}'; {sys.executable} '{tmp_path / 'kill.py'}' '{tiny_corpus}' '{f}' {n} "
        f"|| echo killed {n} $? >> '{tmp_path / 'kills'}'"
        for n, f in folders.items()
    )
    result = in_mount_namespace(script, tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert (tmp_path / "kills").read_text().splitlines() == [f"killed {n} {128 + signal.SIGKILL}" for n in kills]
    for n, folder in folders.items():
        assert any(p.name.startswith(".mathscout-") for p in folder.iterdir()), n  # killed mid-swap
        found = run_cli(["search", "--index", str(folder), "--mode", "structure", "--json", "$x^2$"], tmp_path)
        assert found.returncode == 0 if n == 1 else "no index at" in found.stderr, (n, found.stderr[-2000:])

    from mathscout.index.safety import remove_leftovers

    last = folders.pop(max(kills))  # every entry of the new index in but its manifest: rebuilt by the command
    for n, folder in folders.items():
        assert remove_leftovers(folder.parent, folder.name), n
        (folder / ".mathscout-lock").unlink()  # the killed build's lock file (its lock died with it)
        assert snapshot(folder) == before, n  # the old index, byte for byte
    rebuilt = in_mount_namespace(
        f"mount --bind '{last}' '{last}'; {' '.join(MATHSCOUT)} -v index --input '{tiny_corpus}' "
        f"--index '{last}' --components structure",
        tmp_path,
    )
    assert rebuilt.returncode == 0, rebuilt.stderr[-3000:]
    assert (
        "removed leftovers of interrupted builds" in rebuilt.stderr
        and "keeping tuned files fusion.json" in rebuilt.stderr
    )
    assert sorted(p.name for p in last.iterdir()) == ["fusion.json", "manifest.json", "store.sqlite", "structure"]


@needs_mount
def test_a_read_only_index_asked_for_a_component_is_one_line(tiny_index, tmp_path):
    index = shutil.copytree(tiny_index, tmp_path / "ro")
    before = snapshot(index)
    result = in_mount_namespace(
        f"mount --bind '{index}' '{index}'; mount -o remount,ro,bind '{index}'; "
        f"exec {' '.join(MATHSCOUT)} index --index '{index}' --components dense",
        tmp_path,
    )
    line = assert_clean_refusal(Outcome(result.returncode, result.stdout, result.stderr, 0.0, 0.0))
    assert "read-only file system" in line and str(index) in line, line
    assert snapshot(index) == before
