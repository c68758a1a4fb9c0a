"""Bad command lines and bad inputs: exit 2, one line on stderr, no traceback (issue: reliability).

Every row runs the real `mathscout` entry point in a subprocess; numeric limits are the same on the
command line, the Python API and the agent's tools; eval refuses non-finite scores and conflicting
judgements; the login guard slows failing addresses and names, never the right login."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mathscout.errors import MathScoutError
from mathscout.limits import AGENT_K, K
from tests.support.cli import one_line_error, run_cli


@pytest.fixture(scope="module")
def files(tiny_index, tmp_path_factory, shared_data) -> dict[str, Path]:
    """Bad and good input files for the table."""
    folder = tmp_path_factory.mktemp("bad-inputs")
    made = {
        "index": tiny_index,
        "dev": shared_data / "collection" / "topics.dev.jsonl",
        "qrels": shared_data / "collection" / "qrels.dev.txt",
    }
    writes = {
        "run-nan": "1 Q0 a 1 nan run\n1 Q0 b 2 0.5 run\n",
        "run-inf": "1 Q0 a 1 inf run\n",
        "run-good": "1 Q0 a 1 2.0 run\n",
        "run-columns": "1 a 1\n",
        "qrels-conflict": "1 0 a 2\n1 0 a 2\n1 0 b 1\n1 0 b 3\n",
        "qrels-columns": "1 a 2\n",
        "topics-xml": '<Topics><Topic number="A.1"><Title>x',
        "topics-jsonl": '{"id": 1, "title": "x"\n',
        "a-file": "not an index",
    }
    for name, text in writes.items():
        made[name] = folder / name
        made[name].write_text(text, encoding="utf-8")
    made["out"] = folder / "out.run"
    return made


BAD = {  # name: (argv with {placeholders}, text the one line must contain)
    "k huge": ("search --index {index} --k 1000000000 x", "k must be a whole number from 1 to 10,000"),
    "k negative": ("search --index {index} --k -5 x", "k must be a whole number from 1 to 10,000"),
    "k not a number": ("search --index {index} --k abc x", "got 'abc'"),
    "k fractional": ("search --index {index} --k 2.5 x", "got '2.5'"),
    "run k zero": ("run --index {index} --topics {dev} --output {out} --k 0", "k must be"),
    "rerank depth": (
        "run --index {index} --topics {dev} --output {out} --rerank embedding --rerank-depth 5000",
        "rerank depth must be a whole number from 1 to 1,000",
    ),
    "ask k zero": ("ask --index {index} --no-llm --k 0 hi", "k must be"),
    "port too big": ("serve --port 99999", "port must be a whole number from 1 to 65,535"),
    "port zero": ("serve --port 0", "port must be"),
    "unknown command": ("nonsense", "invalid choice"),
    "mistyped command": (
        "serch x",
        "invalid choice: 'serch' (choose from 'index', 'search', 'run', 'eval', 'bench', "
        "'train', 'serve', 'ask') (did you mean 'search'?) (see 'mathscout --help')",
    ),
    "mistyped option": (
        "search --index {index} --mdoe bm25 x",
        "mathscout search: error: unrecognized arguments: --mdoe (did you mean '--mode'?) "
        "(see 'mathscout search --help')",
    ),
    "mistyped choice": ("eval --run {run-good} --qrels {qrels} --measures arqmat", "(did you mean 'arqmath'?)"),
    "no command": ("", "required"),
    "missing index": ("search --index {out}-nowhere x", "no index at"),
    "index is a file": ("search --index {a-file} x", "no index at"),
    "unknown mode": ("search --index {index} --mode nope x", "unknown search mode 'nope'"),
    "mistyped mode": (
        "search --index {index} --mode bm52 x",
        "unknown search mode 'bm52' for this index (did you mean 'bm25'?)",
    ),
    "mistyped reranker": ("search --index {index} --rerank embeding x", "(did you mean 'embedding'?)"),
    "missing component": ("search --index {index} --mode dense x", "--components dense"),
    "empty query": ("search --index {index} ''", "the query is empty"),
    "malformed formula": ("search --index {index} --mode structure '$\\frac{{$'", "could not read the formula"),
    "missing topics": ("run --index {index} --topics {out}-none --output {out}", "cannot read the topic file"),
    "malformed topics XML": ("run --index {index} --topics {topics-xml} --output {out}", "not well-formed XML"),
    "malformed topics JSONL": ("run --index {index} --topics {topics-jsonl} --output {out}", "not valid JSON"),
    "bad --set": ("run --index {index} --topics {dev} --output {out} --set lambda", "--set wants KEY=VALUE"),
    "NaN score": ("eval --run {run-nan} --qrels {qrels}", "not a finite number"),
    "infinite score": ("eval --run {run-inf} --qrels {qrels}", "not a finite number"),
    "run columns": ("eval --run {run-columns} --qrels {qrels}", "expected a TREC run line"),
    "conflicting qrels": ("eval --run {run-good} --qrels {qrels-conflict}", "judges 1 document(s) twice"),
    "qrels columns": ("eval --run {run-good} --qrels {qrels-columns}", "expected a qrels line"),
    "unknown trainer": ("train nope", "unknown trainer 'nope'"),
    "mistyped trainer": ("train fuson", "unknown trainer 'fuson' (did you mean 'fusion'?)"),
    "unknown benchmark": ("bench nope", "unknown benchmark 'nope'"),
    "mistyped benchmark": ("bench structur", "(did you mean 'structure'?)"),
    "fusion into a missing index": (  # said before any tuning (a few seconds, not the tuning's minutes)
        "train fusion --index {out}-nowhere --runs bm25={run-good} --qrels {qrels}",
        "no index at",
    ),
    "index without input": ("index --index {out}-idx", "give --input"),
    "missing input": ("index --input {out}-none.jsonl --index {out}-idx", "input not found"),
}


@pytest.mark.parametrize("name", list(BAD))
def test_bad_command_line_is_one_clear_line(name, files, tmp_path):
    import shlex

    argv, expected = BAD[name]
    args = [part.format_map({k: str(v) for k, v in files.items()}) for part in shlex.split(argv)]
    line = one_line_error(run_cli(args, tmp_path))
    assert expected in line, line


def test_the_same_limits_hold_in_the_api_and_the_tools(tiny_index):
    from mathscout.agent import MathScout
    from mathscout.tools.schemas import SearchArgs

    scout = MathScout(tiny_index, use_llm=False)
    for bad in (0, -1, 10_001, 10**9, 2.5, "many"):
        with pytest.raises(MathScoutError, match="k must be a whole number from 1 to 10,000"):
            scout.search("triangle", mode="bm25", k=bad)
    assert len(scout.search("triangle", mode="bm25", k=K.high)) <= K.high
    with pytest.raises(ValueError):
        SearchArgs(query="triangle", k=AGENT_K.high + 1)
    answer = scout.ask("what is a right triangle?", k=500, use_llm=False)
    assert any("k = 500 is outside 1–50" in notice for notice in answer.notices)
    assert len(answer.hits) <= AGENT_K.high


# --- the page: --public warning, slowed logins -------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_public_without_auth_warns_at_start(tiny_index, tmp_path):
    port = _free_port()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mathscout.cli",
            "serve",
            "--index",
            str(tiny_index),
            "--public",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--no-llm",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "MATHSCOUT_HOME": str(tmp_path)},
    )
    try:
        line = process.stderr.readline()
        while line and "warning" not in line:
            line = process.stderr.readline()
        assert "--public without --auth" in line and "--auth USER:PASSWORD" in line
    finally:
        process.kill()
        process.wait()


def test_failed_logins_slow_their_address_and_name_never_the_right_login():
    """The guard's rules (over real HTTP, through the page and the API: tests/robust/test_http_hostile.py)."""
    from starlette.exceptions import HTTPException

    from mathscout.ui.login import LoginGuard

    guard = LoginGuard("ada", "correct horse", free=2, base=0.4, ceiling=2.0)

    async def attempt(user, password, client):
        started = time.perf_counter()
        return await guard.check(user, password, client), time.perf_counter() - started

    async def scenario():
        failed = [await attempt("mallory", "guess", "10.0.0.66") for _ in range(4)]
        assert [ok for ok, _ in failed] == [False] * 4
        assert max(t for _, t in failed[:2]) < 0.3 and failed[2][1] >= 0.35 and failed[3][1] >= 0.75  # 0.4, 0.8 s
        assert await attempt("ada", "correct horse", "10.0.0.7") == (True, pytest.approx(0, abs=0.1))
        assert (await attempt("ada", "typo", "10.0.0.7"))[1] < 0.1  # another address, another name: not slowed
        slowed = asyncio.create_task(attempt("mallory", "again", "10.0.0.66"))
        await asyncio.sleep(0.1)
        with pytest.raises(HTTPException) as refused:  # the same address meanwhile: refused, not even checked
            await guard.check("ada", "correct horse", "10.0.0.66")
        assert refused.value.status_code == 429 and refused.value.headers["Retry-After"].isdigit()
        assert (await slowed)[1] >= 1.5
        spread = [await attempt("ada", "x", f"10.0.1.{n}") for n in range(3)]  # one name from many addresses
        assert spread[-1][1] >= 0.35

    asyncio.run(scenario())


def test_a_success_resets_its_address_not_the_name():
    from mathscout.ui.login import LoginGuard

    guard = LoginGuard("ada", "pw", free=5, base=0.0)
    assert asyncio.run(guard.check("ada", "x", "10.0.0.1")) is False and guard.failures["addr:10.0.0.1"][0] == 1
    assert asyncio.run(guard.check("ada", "pw", "10.0.0.1")) is True
    assert "addr:10.0.0.1" not in guard.failures and guard.failures["name:ada"][0] == 1  # others may guess it


def test_a_failed_json_command_prints_nothing_on_stdout(files, tmp_path):
    result = run_cli(["search", "--index", str(files["index"]), "--json", "--k", "0", "x"], tmp_path)
    assert result.stdout == "" and result.returncode == 2
