"""Heavy build steps run in processes of their own (mathscout.isolated): their errors come back whole, a killed
step is a clear error, a step dies with its caller, and one build never holds bm25's JVM beside structure."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mathscout.errors import MathScoutError
from mathscout.isolated import run_isolated
from tests.support.cli import REPO, env


def _full_disk(path: str) -> None:
    raise OSError(errno.ENOSPC, "No space left on device", path)


def _killed_by_the_kernel() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _square(x: int) -> int:
    return x * x


def test_a_step_returns_its_result():
    assert run_isolated(_square, 12) == 144


def test_a_steps_error_keeps_its_type_errno_and_the_steps_traceback():
    with pytest.raises(OSError) as caught:
        run_isolated(_full_disk, "/idx/postings.bin", name="'structure' build")
    assert caught.value.errno == errno.ENOSPC  # what the builder turns into its "disk is full" message
    assert caught.value.filename == "/idx/postings.bin"
    assert "raised in the 'structure' build process" in caught.value.__notes__[0]
    assert "_full_disk" in caught.value.__notes__[0]


def test_a_step_killed_by_the_kernel_is_a_clear_error():
    with pytest.raises(MathScoutError, match=r"the 'bm25' build process was killed by signal 9 .*\(out of memory\?\)"):
        run_isolated(_killed_by_the_kernel, name="'bm25' build")


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_bytes().rsplit(b")", 1)[1].split()
            except OSError:
                continue
            if int(stat[1]) == pid:
                found.append(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    try:
        return (Path("/proc") / str(pid) / "stat").read_bytes().rsplit(b")", 1)[1].split()[0] != b"Z"
    except OSError:
        return False


CALLER = """
import time
from mathscout.isolated import run_isolated
run_isolated(time.sleep, 120, name="sleeping step")
"""


def test_a_step_dies_with_its_caller(tmp_path):
    caller = subprocess.Popen([sys.executable, "-c", CALLER], env=env(tmp_path), cwd=REPO)
    try:
        deadline = time.time() + 60
        while not (
            steps := [
                p for p in _children(caller.pid) if b"mathscout.isolated" in Path(f"/proc/{p}/cmdline").read_bytes()
            ]
        ):
            assert time.time() < deadline and caller.poll() is None, "the step never started"
            time.sleep(0.05)
        caller.send_signal(signal.SIGKILL)
        caller.wait()
        deadline = time.time() + 10
        while _alive(steps[0]) and time.time() < deadline:
            time.sleep(0.05)
        assert not _alive(steps[0]), "the step outlived its killed caller"
    finally:
        caller.kill()


BUILD = """
import json, sys
from pathlib import Path
from mathscout.retrievers.indexing import build_index
from mathscout.notices import collecting
from mathscout.usage import process_usage
with collecting() as said:  # a library call prints no notices: they are data
    manifest = build_index([sys.argv[1]], sys.argv[2], ["bm25", "structure"])
maps = Path("/proc/self/maps").read_text()
print(json.dumps({"jvm_here": "libjvm" in maps, "peak_mib": process_usage().peak_mib, "said": said,
                  "steps": {n: manifest.components[n]["process_peak_mib"] for n in ("bm25", "structure")}}))
"""


def test_a_build_holds_no_jvm_itself_and_each_component_reports_its_process_peak(tiny_corpus, tmp_path):
    script = tmp_path / "build.py"  # a user's script, without an `if __name__ == "__main__"` guard
    script.write_text(BUILD, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script), str(tiny_corpus), str(tmp_path / "idx")],
        capture_output=True,
        text=True,
        env=env(tmp_path),
        cwd=REPO,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    figures = json.loads(done.stdout.splitlines()[-1])
    assert not figures["jvm_here"]  # bm25's JVM lived and died in its own process
    assert figures["steps"]["bm25"] > figures["peak_mib"]  # the JVM's process held more than the build's ever did
    assert figures["steps"]["structure"] > 0
    said = "\n".join(figures["said"])
    assert "component 'bm25':" in said and "its process's peak" in said and "component 'bm25':" not in done.stderr
