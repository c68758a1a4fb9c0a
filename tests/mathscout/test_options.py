"""One option table, one default per option, on every entry point (issue 35): the command line, the OpenAPI
document of the HTTP API and the Python signatures all take their defaults from `mathscout.options`."""

from __future__ import annotations

import inspect

import pytest

from mathscout import options
from mathscout.ui.cli import build_parser


def _subparser(name: str):
    parser = build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    return sub.choices[name]


@pytest.mark.parametrize("command", ["search", "ask"])
def test_the_command_line_takes_the_tables_defaults(command):
    defaults = {a.dest: a.default for a in _subparser(command)._actions}
    for option in options.SEARCH_OPTIONS:
        assert defaults[option.name] == option.default, (command, option.name)
    flags = {f for a in _subparser(command)._actions for f in a.option_strings}
    assert {o.flag for o in options.SEARCH_OPTIONS} <= flags


def test_the_run_command_uses_the_same_mode_and_reranking_defaults():
    defaults = {a.dest: a.default for a in _subparser("run")._actions}
    assert (defaults["mode"], defaults["rerank"], defaults["rerank_depth"]) == (
        options.MODE.default,
        options.RERANK.default,
        options.RERANK_DEPTH.default,
    )


def test_the_python_api_takes_the_tables_defaults():
    from mathscout.agent.api import MathScout
    from mathscout.agent.assistant import Assistant

    for function, table in (
        (MathScout.search, options.SEARCH_OPTIONS),
        (MathScout.ask, options.ASK_OPTIONS),
        (MathScout.stream, options.ASK_OPTIONS),
        (Assistant.search, options.SEARCH_OPTIONS),
        (Assistant.stream, options.ASK_OPTIONS),
    ):
        parameters = inspect.signature(function).parameters
        for option in table:
            if option is options.INDEX:  # the Python API is bound to one index
                continue
            assert parameters[option.name].default == option.default, (function.__qualname__, option.name)


def test_the_http_api_declares_the_tables_defaults(tiny_index):
    from mathscout.ui.chat import AssistantPool
    from mathscout.ui.http_api import create_api
    from mathscout.ui.indexes import discover_indexes

    spec = create_api(AssistantPool(discover_indexes([tiny_index]))).openapi()
    search = {p["name"]: p["schema"].get("default") for p in spec["paths"]["/api/search"]["get"]["parameters"]}
    body = spec["components"]["schemas"]["AskBody"]["properties"]
    for option in options.SEARCH_OPTIONS:
        expected = option.default if option.default is None or isinstance(option.default, str) else str(option.default)
        if option is options.RERANK:
            expected = "none"  # a query string has no null: 'none' is no reranking
        assert search[option.name] == expected, option.name
    for option in options.ASK_OPTIONS:
        assert body[option.name].get("default") == option.default, option.name


@pytest.mark.parametrize("bad", [{"k": 0}, {"k": "5000000000000000000000"}, {"rerank": "bogus"}, {"rerank_depth": 0}])
def test_a_bad_option_is_refused_alike_by_python_and_the_api(tiny_index, bad):
    from mathscout import MathScout
    from mathscout.errors import MathScoutError

    scout = MathScout(tiny_index, use_llm=False)
    with pytest.raises(MathScoutError):
        scout.search("x^2", **bad)
    with pytest.raises(MathScoutError):
        scout.ask("x^2", **bad)
