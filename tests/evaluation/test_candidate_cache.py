"""The candidate cache (`python -m mathscout.evaluation.candidate_cache`, the ranker's `--cache`): a rerun reads the
candidates back; a cache of another build of the index is refused; cross-encoder logits of another model are
recomputed, never reused."""

from __future__ import annotations

import json
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
    cache = tmp_path / "candidates.pkl"
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
    cache = tmp_path / "candidates.pkl"
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
