"""Running the real `mathscout` command in a subprocess, and what a clean failure looks like."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.support.paths import REPO

MATHSCOUT = [sys.executable, "-m", "mathscout.cli"]


def env(home: Path) -> dict:
    return {**os.environ, "MATHSCOUT_HOME": str(home), "PYTHONPATH": str(REPO)}


def run_cli(args: list[str], home: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(MATHSCOUT + args, capture_output=True, text=True, env=env(home), timeout=timeout, cwd=REPO)


def one_line_error(result: subprocess.CompletedProcess) -> str:
    """The command failed cleanly: exit 2, no traceback, one 'mathscout[ command]: error:' line on stderr."""
    assert result.returncode == 2, (result.returncode, result.stderr[-2000:])
    assert "Traceback" not in result.stderr, result.stderr[-2000:]
    errors = [line for line in result.stderr.splitlines() if re.match(r"mathscout( [a-z]+)?: error: ", line)]
    assert len(errors) == 1, result.stderr[-2000:]
    return errors[0]


def stop(process: subprocess.Popen, timeout: float = 20) -> None:
    """End a server subprocess a test started: terminate, then kill if it lingers."""
    process.terminate()
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
