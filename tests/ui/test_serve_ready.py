"""`mathscout serve` says "ready" only when it answers, with every mode of its indexes warmed (issue 35)."""

from __future__ import annotations

import subprocess
import time

from tests.support.cli import MATHSCOUT, REPO, env, stop
from tests.support.harness import free_port


def test_ready_means_listening_and_warmed(tiny_index, tmp_path):
    port = free_port()
    process = subprocess.Popen(
        MATHSCOUT + ["serve", "--port", str(port), "--no-llm", "--index", str(tiny_index)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=REPO,
        env={**env(tmp_path), "PYTHONUNBUFFERED": "1"},
    )
    try:
        lines = []
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            line = process.stdout.readline()
            assert line or process.poll() is None, "".join(lines)[-3000:]
            lines.append(line)
            if line.startswith("MathScout: ready in"):
                break
        assert "search modes warmed" in lines[-1] and "idx" in lines[-1], lines[-1]
        import json
        import urllib.request

        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/health", timeout=5) as response:  # at once: no retry
            health = json.loads(response.read())
        assert health["default_index"] == "idx" and set(health["indexes"][0]["modes"]) >= {"auto", "bm25", "structure"}
        assert not [line for line in lines if "warm" in line and "failed" in line], lines
    finally:
        stop(process)
