"""`mathscout search` as a user runs it: readable hits with highlights, JSON output, one-line errors."""

import json
import os
import subprocess
import sys
from pathlib import Path

MATHSCOUT = Path(sys.executable).with_name("mathscout")


def _search(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    return subprocess.run([str(MATHSCOUT), "search", *args], capture_output=True, text=True, timeout=180, env=env)


def test_search_prints_ranked_hits_with_one_score_legend_and_no_markup(small_index):
    out = _search("--index", str(small_index), "--k", "3", "improper Riemann integral of $\\frac{\\sin x}{x}$")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    # what the scores mean is said once, before the hits; each hit shows its own figures only
    legend = [line for line in lines if line.startswith("scores: ")]
    assert len(legend) == 1 and " = " in legend[0] and lines.index(legend[0]) < 2
    hits = [line for line in lines if line.lstrip()[:3] in ("1. ", "2. ", "3. ")]
    assert len(hits) == 3 and all(" = " not in line and "weighted sum" not in line for line in hits)
    assert "**" not in out.stdout  # not a terminal: no markdown marks (a terminal gets its own bold colour)
    assert "\033[" not in out.stdout  # and no colour codes
    assert "formulas: $" in out.stdout


def test_search_json_is_machine_readable(small_index):
    out = _search("--index", str(small_index), "--k", "4", "--json", "prove $a^2+b^2=c^2$")
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert (result["query"], result["mode"], result["k"]) == ("prove $a^2+b^2=c^2$", "auto", 4)  # the one default
    hits = result["hits"]
    assert [h["rank"] for h in hits] == [1, 2, 3, 4]
    assert {"doc_id", "score", "title", "snippet", "marks", "formulas", "components"} <= set(hits[0])
    assert "**" not in hits[0]["snippet"] and all(0 <= a < b <= len(hits[0]["snippet"]) for a, b in hits[0]["marks"])


def test_search_errors_are_one_line(small_index, tmp_path):
    empty = _search("--index", str(small_index), "  ")
    assert empty.returncode == 2
    assert "query is empty" in empty.stderr and "Traceback" not in empty.stderr
    missing = _search("--index", str(tmp_path / "none"), "x^2")
    assert missing.returncode == 2
    assert "mathscout index" in missing.stderr and "Traceback" not in missing.stderr


def test_the_demo_index_is_built_on_first_use_and_upgraded_for_wildcards(mathscout_home):
    import json

    from mathscout.retrievers import open_retriever
    from mathscout.retrievers.indexing import ensure_demo_index

    path = ensure_demo_index()
    assert path == mathscout_home / "indexes" / "demo"
    meta_file = path / "structure" / "meta.json"
    meta = json.loads(meta_file.read_text())
    meta.pop("wildcard_paths")  # as a demo index built by an earlier version
    meta_file.write_text(json.dumps(meta))
    ensure_demo_index()
    assert json.loads(meta_file.read_text())["wildcard_paths"] is True
    hits = open_retriever(path, "structure").search(r"$\qvar{a}^2+\qvar{b}^2=\qvar{c}^2$", k=5)
    assert r"x^2+y^2=z^2" in {f.latex for h in hits for f in h.formulas}


def test_a_key_in_the_config_file_turns_on_rerank_llm(tiny_index, tmp_path):
    """`--rerank llm` and `--rerank auto` read the LLM from config.toml as the agent does (issue 44: one reader, the
    settings): no OPENAI_ variable is set, the key, the endpoint (a real OpenAI-protocol server on 127.0.0.1) and the
    reranker's model come from the file."""
    from tests.support.fake_openai import FakeOpenAI, Text

    unset = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "MATHSCOUT_CONFIG", "MATHSCOUT_RERANK_MODEL", "MATHSCOUT_LLM_MODEL")
    env = {k: v for k, v in os.environ.items() if k not in unset} | {"MATHSCOUT_HOME": str(tmp_path)}
    query = "prove $a^2+b^2=c^2$"
    with FakeOpenAI(lambda request: Text("[PASSAGE3, PASSAGE2, PASSAGE1]")) as server:
        (tmp_path / "config.toml").write_text(
            f'[llm]\napi_key = "sk-from-config"\nbase_url = "{server.base_url}"\nrerank_model = "fake-from-config"\n',
            encoding="utf-8",
        )
        found = {}
        for rerank in ("none", "llm", "auto"):
            out = subprocess.run(
                [str(MATHSCOUT), "search", "--local", "--index", str(tiny_index), "--mode", "structure", "--k", "3"]
                + ["--rerank", rerank, "--rerank-depth", "3", "--json", query],
                capture_output=True,
                text=True,
                timeout=180,
                env=env,
            )
            assert out.returncode == 0, out.stderr
            found[rerank] = [h["doc_id"] for h in json.loads(out.stdout)["hits"]]
        requests = [r.model for r in server.requests]
    assert len(found["none"]) == 3 and requests == ["fake-from-config"] * 2
    assert found["llm"] == found["auto"] == found["none"][::-1]  # the model's order: PASSAGE3, 2, 1
