"""Tuned files stored with an index (mathscout.index.tuned.TunedFile): structure.json, fusion.json and ranker.json
are read, checked, versioned and written one way. Runs without ../shared."""

from __future__ import annotations

import json

import pytest

from mathscout.errors import DamagedIndexError, IndexMissingError
from mathscout.retrievers.fusion import FusionConfig
from mathscout.retrievers.ranked import Ranker, RankerConfig
from mathscout.retrievers.structure import StructureSettings

OLD_STRUCTURE = {"lambda_m": 0.3, "max_formulas": 1, "text": "full", "tuned_on": "a test setting"}  # no version


def test_a_file_written_before_versions_still_loads_and_is_written_with_one(tmp_path):
    (tmp_path / "structure.json").write_text(json.dumps(OLD_STRUCTURE), encoding="utf-8")
    settings = StructureSettings.read(tmp_path)
    assert (settings.lambda_m, settings.text, settings.tuned_on) == (0.3, "full", "a test setting")
    written = json.loads(settings.write(tmp_path).read_text(encoding="utf-8"))
    assert written["version"] == StructureSettings.VERSION and written["lambda_m"] == 0.3
    assert StructureSettings.read(tmp_path) == settings


def test_a_newer_version_is_refused_in_one_line_naming_the_file(tmp_path):
    (tmp_path / "structure.json").write_text(json.dumps({**OLD_STRUCTURE, "version": 2}), encoding="utf-8")
    with pytest.raises(DamagedIndexError, match=r"structure.json is unusable .version 2, written by a newer") as error:
        StructureSettings.read(tmp_path)
    assert "\n" not in str(error.value) and "mathscout train structure" in str(error.value)


def test_absent_files_are_none_and_copies_elsewhere_read_and_write(tmp_path):
    index = tmp_path / "index"
    index.mkdir()
    assert (
        StructureSettings.read(index) is None and FusionConfig.read(index) is None and RankerConfig.read(index) is None
    )
    with pytest.raises(IndexMissingError, match="has no learned ranker"):
        Ranker.load(index)
    saved = FusionConfig({"bm25": 0.6, "structure": 0.4}, tuning={"topics": 3}).write_file(tmp_path / "kept.json")
    assert FusionConfig.read_file(saved).weights == {"bm25": 0.6, "structure": 0.4}
    assert FusionConfig.path(index) == index / "fusion.json"
