"""One search service behind every entry point (issue 44): the same query with the same options through the real
command line (`--json`), a real server's HTTP API, the Python API and the page's search handler gives the same hits,
notices and option meanings; and the reranker table is the one source of the choices, their validation, the help
and the page's menu."""

from __future__ import annotations

import json
import urllib.parse

import pytest

from tests.support.cli import run_cli
from tests.support.harness import Server

QUERY = "sum of squares x^2+y^2=z^2"  # a bare formula: every door reads it as math, and says so
K = 5
SAME = ("query", "mode", "k", "rerank", "rerank_depth", "formulas", "notices", "missing_shards")


def _essence(record: dict) -> dict:
    """What must be equal whatever the door: the request as understood, the notices and the ranked hits."""
    return {
        **{name: record[name] for name in SAME},
        "hits": [(h["doc_id"], h["score"], h["score_explained"]) for h in record["hits"]],
    }


@pytest.fixture(scope="module")
def doors(tiny_index, tmp_path_factory):
    """(name → search(mode, rerank) → record) for the four entry points over the tiny index, no LLM anywhere."""
    from mathscout import MathScout
    from mathscout.ui.app import page_search
    from mathscout.ui.chat import AssistantPool
    from mathscout.ui.indexes import discover_indexes
    from mathscout.ui.llm_allowance import LlmAllowance

    home = tmp_path_factory.mktemp("one-door-home")
    scout = MathScout(tiny_index, use_llm=False)
    pool = AssistantPool(discover_indexes([tiny_index]), use_llm=False)

    def cli(mode: str, rerank: str) -> dict:
        args = ["search", "--local", "--index", str(tiny_index), "--mode", mode, "--k", str(K), "--rerank", rerank]
        with pytest.MonkeyPatch.context() as patch:  # no LLM for the command line either
            for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
                patch.delenv(name, raising=False)
            done = run_cli([*args, "--json", QUERY], home)
        assert done.returncode == 0, done.stderr[-2000:]
        return json.loads(done.stdout)

    def python(mode: str, rerank: str) -> dict:
        return scout.search(QUERY, mode=mode, k=K, rerank=rerank).to_dict()

    def page(mode: str, rerank: str) -> dict:
        out = page_search(
            pool, LlmAllowance(), "127.0.0.1", QUERY, [], None, index_key=None, mode=mode, k=K, rerank=rerank
        )
        assert out.record is not None, out.chat
        return out.record

    with Server(home, "--index", str(tiny_index)) as server:

        def http(mode: str, rerank: str) -> dict:
            query = urllib.parse.urlencode({"q": QUERY, "mode": mode, "k": K, "rerank": rerank})
            status, _, body = server.request("GET", f"/api/search?{query}")
            assert status == 200, body[:500]
            return json.loads(body)

        yield {"cli": cli, "http": http, "python": python, "page": page}


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["bm25", "structure", "auto"])
def test_every_door_gives_the_same_search(doors, mode):
    records = {name: search(mode, "none") for name, search in doors.items()}
    python = _essence(records["python"])
    assert python["hits"] and python["rerank"] is None and python["k"] == K and python["mode"] == mode
    assert any(n.startswith("read as math") for n in python["notices"])  # one reading of the query, everywhere
    for name, record in records.items():
        assert _essence(record) == python, name


@pytest.mark.slow
@pytest.mark.model
def test_rerank_auto_means_the_same_on_every_door(doors):
    """Without an LLM and without a cross-encoder in the index, `auto` is local embeddings on every door (before,
    the Python API and the command line could pick different rerankers for it)."""
    records = {name: search("bm25", "auto") for name, search in doors.items()}
    python = _essence(records["python"])
    assert python["rerank"] == "embedding"
    for name, record in records.items():
        assert _essence(record) == python, name


def test_the_reranker_table_is_the_one_source(monkeypatch, tiny_index):
    """The choices, their validation, the command line's help, the HTTP API's description and the page's menu
    are made from `RERANKERS`: an entry added to it is accepted, described and offered everywhere."""
    from mathscout import limits, options
    from mathscout.errors import MathScoutError
    from mathscout.retrievers import registry
    from mathscout.retrievers.registry import RerankerEntry, rerank_choices, rerank_help, rerank_kind, resolve
    from mathscout.ui.cli import build_parser

    assert not hasattr(limits, "RERANKERS") and not hasattr(limits, "rerank_kind")  # no second list
    assert "embedding" not in options.RERANK.help
    for entry in registry.RERANKERS:
        assert callable(resolve(entry.opener)), entry.name
        assert rerank_kind(entry.name) == entry.name and all(rerank_kind(a) == entry.name for a in entry.aliases)
        assert entry.needs and entry.score and entry.description

    from mathscout.ui.chat import AssistantPool
    from mathscout.ui.http_api import create_api
    from mathscout.ui.indexes import discover_indexes

    pool = AssistantPool(discover_indexes([tiny_index]), use_llm=False)
    spec = create_api(pool).openapi()
    assert spec["components"]["schemas"]["AskBody"]["properties"]["rerank"]["description"] == rerank_help()

    extra = RerankerEntry(
        "bogus-kind", "mathscout.retrievers.rerank:open_embedding", "a test entry", "nothing", "a test score"
    )
    with pytest.raises(MathScoutError, match="unknown reranker"):
        rerank_kind("bogus-kind")
    monkeypatch.setattr(registry, "RERANKERS", (*registry.RERANKERS, extra))
    assert rerank_kind("bogus-kind") == "bogus-kind"
    assert "bogus-kind (a test entry; needs nothing)" in rerank_help()
    assert ("bogus-kind", "bogus-kind") in rerank_choices()

    sub = next(a for a in build_parser()._actions if a.__class__.__name__ == "_SubParsersAction")
    for command in ("search", "ask", "run"):
        rerank = next(a for a in sub.choices[command]._actions if a.dest == "rerank")
        assert rerank.help.startswith(rerank_help()), command
        assert rerank.type("bogus-kind") == "bogus-kind"

    from mathscout.ui.app import build_app

    config = build_app(pool).get_config_file()
    menu = next(c["props"] for c in config["components"] if c.get("props", {}).get("elem_id") == "ms-rerank")
    assert [tuple(choice) for choice in menu["choices"]] == rerank_choices() and menu["value"] == "none"
