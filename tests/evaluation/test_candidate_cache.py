"""The candidate cache (`python -m mathscout.evaluation.candidate_cache`, the ranker's `--cache`): a rerun reads the
candidates back; a cache of another build of the index is refused; cross-encoder logits of another model are
recomputed, never reused. The file is JSON lines: a pickle (the old format, or a stranger's file made to run code) is
refused unopened, a damaged line is one clear error, a line cut by an interrupted write is made again."""

from __future__ import annotations

import json
import os
import pickle
import shutil

import pytest

from mathscout.errors import MathScoutError


@pytest.fixture(scope="module")
def two_topics(shared_data):
    from mathscout.evaluation.topics import load_topics

    return load_topics(shared_data / "collection" / "topics.dev.jsonl")[:2]


def test_a_rerun_reads_the_cache_and_a_rebuilt_component_refuses_it(tiny_index, two_topics, tmp_path, capsys):
    from mathscout.evaluation.candidate_cache import cached_candidates
    from mathscout.index.builder import add_components
    from mathscout.index.layout import IndexDir

    index = tmp_path / "idx"
    shutil.copytree(tiny_index, index)
    cache = tmp_path / "candidates.jsonl"
    first = cached_candidates(IndexDir(index), two_topics, cache)
    assert "[candidates] 2/2 topics" in capsys.readouterr().out
    again = cached_candidates(IndexDir(index), two_topics, cache)
    assert "[candidates]" not in capsys.readouterr().out  # read back, nothing searched
    assert [c.docs for c in again] == [c.docs for c in first] and first[0].docs

    add_components(index, ["bm25"])  # a rebuilt component: its files (and perhaps its results) differ
    with pytest.raises(MathScoutError, match=r"candidate cache .* was made with .*give another --cache file"):
        cached_candidates(IndexDir(index), two_topics, cache)


@pytest.mark.model
@pytest.mark.slow
def test_logits_of_another_cross_encoder_are_recomputed(cross_index, two_topics, tmp_path, capsys):
    from mathscout.dense.cross import INFO_FILE
    from mathscout.evaluation.candidate_cache import cached_candidates
    from mathscout.index.layout import IndexDir

    index = tmp_path / "idx"
    shutil.copytree(cross_index, index)
    cache = tmp_path / "candidates.jsonl"
    cached_candidates(IndexDir(index), two_topics, cache, cross_depth=3)
    capsys.readouterr()
    cached_candidates(IndexDir(index), two_topics, cache, cross_depth=3)
    assert "[candidates]" not in capsys.readouterr().out  # the same model: its logits are read back

    info = index / "cross-encoder" / INFO_FILE  # what a retraining rewrites (here only its interpolation weight)
    data = json.loads(info.read_text(encoding="utf-8"))
    data["weight"] = 1.0 - data["weight"] if data["weight"] != 0.5 else 0.25
    info.write_text(json.dumps(data), encoding="utf-8")
    found = cached_candidates(IndexDir(index), two_topics, cache, cross_depth=3)
    assert "[candidates] 2/2 topics" in capsys.readouterr().out  # another model: logits computed again
    assert all(c.cross is not None and len(c.cross) == min(3, len(c.docs)) for c in found)


class _RunsCode:
    """What a hostile pickle holds: unpickling it runs a shell command."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_a_pickle_given_as_the_cache_is_refused_unopened(tiny_index, two_topics, tmp_path):
    from mathscout.evaluation.candidate_cache import cached_candidates
    from mathscout.evaluation.structure_tuning import main as structure_main
    from mathscout.index.layout import IndexDir

    marker = tmp_path / "the-pickle-ran"
    hostile = tmp_path / "shared-by-someone.pkl"
    hostile.write_bytes(pickle.dumps({"meta": {}, "topics": _RunsCode(marker)}))
    with pytest.raises(
        MathScoutError, match=r"candidate cache .*shared-by-someone.pkl is unusable \(it is a Python pickle"
    ):
        cached_candidates(IndexDir(tiny_index), two_topics, hostile)
    with pytest.raises(
        MathScoutError, match=r"structure dump .* is unusable \(it is a Python pickle.*it was not opened"
    ):
        structure_main(["runs", "--dump", str(hostile), "--out-dir", str(tmp_path)])
    assert not marker.exists()


def _comparable(value) -> object:
    """A JSON value with NaN made comparable (NaN is not equal to itself)."""
    return json.loads(json.dumps(value).replace("NaN", '"NaN"'))


def test_the_cache_is_data_damage_is_named_and_a_cut_line_is_made_again(tiny_index, two_topics, tmp_path, capsys):
    from mathscout.evaluation.candidate_cache import cached_candidates, candidates_from_json, candidates_to_json
    from mathscout.index.layout import IndexDir

    cache = tmp_path / "candidates.jsonl"
    first = cached_candidates(IndexDir(tiny_index), two_topics, cache)
    lines = cache.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 3 and json.loads(lines[0])["mathscout"] == "candidate cache"  # a header, a line a topic
    for candidates in first:  # every field comes back (0 may come back as 0.0), NaN features included
        stored = json.loads(lines[1 + first.index(candidates)])["candidates"]
        assert _comparable(candidates_to_json(candidates_from_json(stored))) == _comparable(
            candidates_to_json(candidates)
        )

    cut = lines[0] + "\n" + lines[1] + "\n" + lines[2][: len(lines[2]) // 2]  # an interrupted write
    cache.write_text(cut, encoding="utf-8")
    capsys.readouterr()
    again = cached_candidates(IndexDir(tiny_index), two_topics, cache)
    assert "[candidates] 1/1 topics" in capsys.readouterr().out  # only the cut topic is searched again
    assert [c.docs for c in again] == [c.docs for c in first]
    assert len(cache.read_text(encoding="utf-8").splitlines()) == 3  # the cut line gave way to the whole one
    assert [c.docs for c in cached_candidates(IndexDir(tiny_index), two_topics, cache)] == [c.docs for c in first]
    assert "[candidates]" not in capsys.readouterr().out  # both read back

    damaged = lines[0] + "\n" + lines[1].replace('"runs"', '"ruins"', 1) + "\n" + lines[2] + "\n"
    cache.write_text(damaged, encoding="utf-8")
    with pytest.raises(
        MathScoutError, match=r"candidates.jsonl is unusable \(line 2 is not a topic's candidates: KeyError"
    ):
        cached_candidates(IndexDir(tiny_index), two_topics, cache)
    cache.write_text('{"mathscout": "structure dump", "version": 2}\n', encoding="utf-8")
    with pytest.raises(MathScoutError, match=r"line 1 is not a candidate cache's header\): give another --cache file"):
        cached_candidates(IndexDir(tiny_index), two_topics, cache)
