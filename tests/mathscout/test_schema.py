"""One shape of a hit, an answer, a document and an error (issue 35): the command line's --json, the HTTP API (and its
OpenAPI document) and the Python API give the same records (`mathscout.schema`)."""

from __future__ import annotations

import json
import urllib.parse

import pytest

from mathscout.schema import (
    AnswerRecord,
    DocumentRecord,
    ErrorRecord,
    HitRecord,
    SearchRecord,
    document_record,
    hit_record,
)
from tests.support.cli import run_cli
from tests.support.harness import Server

QUERY = "prove $a^2+b^2=c^2$"


@pytest.fixture(scope="module")
def server(tiny_index, tmp_path_factory):
    with Server(tmp_path_factory.mktemp("schema-home"), "--index", str(tiny_index)) as running:
        yield running


def _keys(record: dict) -> set[str]:
    return set(record)


def test_a_hit_has_one_shape_everywhere(server, tiny_index, tmp_path):
    from mathscout import MathScout

    cli = json.loads(
        run_cli(
            ["search", "--local", "--index", str(tiny_index), "--mode", "structure", "--k", "3", "--json", QUERY],
            tmp_path,
        ).stdout
    )
    status, _, body = server.request(
        "GET", "/api/search?" + urllib.parse.urlencode({"q": QUERY, "mode": "structure", "k": 3})
    )
    http = json.loads(body)
    found = MathScout(tiny_index, use_llm=False).search(QUERY, mode="structure", k=3)
    python = [hit_record(h).to_dict() for h in found]
    assert status == 200
    for record in (cli, http):
        SearchRecord.model_validate(record)
    for hits in (cli["hits"], http["hits"], python):
        assert [HitRecord.model_validate(h).doc_id for h in hits] == [h["doc_id"] for h in cli["hits"]]
        assert all(h["title"] is not None and h["score_explained"] and "**" not in h["snippet"] for h in hits)
    assert _keys(cli["hits"][0]) == _keys(http["hits"][0]) == _keys(python[0]) == set(HitRecord.model_fields)
    assert [h["score"] for h in cli["hits"]] == [h["score"] for h in http["hits"]] == [h["score"] for h in python]


def test_an_answer_and_a_document_have_one_shape_everywhere(server, tiny_index, tmp_path):
    from mathscout import MathScout

    question = "Why is $a^2+b^2=c^2$?"
    cli = json.loads(
        run_cli(
            ["ask", "--local", "--index", str(tiny_index), "--no-llm", "--k", "3", "--json", question], tmp_path
        ).stdout
    )
    _, _, body = server.request("POST", "/api/ask", {"question": question, "k": 3, "use_llm": False})
    http = json.loads(body)
    scout = MathScout(tiny_index, use_llm=False)
    python = scout.ask(question, k=3).to_dict()
    for record in (cli, http, python):
        answer = AnswerRecord.model_validate(record)
        assert (answer.k, answer.rerank, answer.rerank_depth, answer.mode) == (3, None, 10, "auto")
        assert answer.hits and all(h.title is not None and h.score_explained for h in answer.hits)
    assert _keys(cli) == _keys(http) == _keys(python) == set(AnswerRecord.model_fields)
    doc_id = http["hits"][0]["doc_id"]
    _, _, body = server.request("GET", "/api/documents/" + urllib.parse.quote(doc_id, safe=""))
    document = json.loads(body)
    assert DocumentRecord.model_validate(document).doc_id == doc_id
    assert document == document_record(scout.index.store.get(doc_id)).to_dict()


def test_errors_and_the_openapi_document_use_the_schema(server):
    status, _, body = server.request("GET", "/api/search?q=x&k=0")
    assert status == 400 and ErrorRecord.model_validate_json(body).error.startswith("k must be a whole number")
    _, _, body = server.request("GET", "/openapi.json")
    spec = json.loads(body)
    schemas = spec["components"]["schemas"]
    assert {"SearchRecord", "AnswerRecord", "DocumentRecord", "HitRecord", "ErrorRecord"} <= set(schemas)
    answers = {path: operation["responses"] for path, item in spec["paths"].items() for operation in item.values()}
    assert answers["/api/search"]["200"]["content"]["application/json"]["schema"]["$ref"].endswith("SearchRecord")
    assert answers["/api/ask"]["200"]["content"]["application/json"]["schema"]["$ref"].endswith("AnswerRecord")
    assert answers["/api/documents/{doc_id}"]["200"]["content"]["application/json"]["schema"]["$ref"].endswith(
        "DocumentRecord"
    )
    assert set(schemas["SearchRecord"]["properties"]) >= {"missing_shards", "formulas", "notices"}
