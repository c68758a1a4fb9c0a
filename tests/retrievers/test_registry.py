"""One table of retrievers (`mathscout/retrievers/registry.py`) feeds the command line, the page, the tools and the
index builder; the entry layer (`mathscout/ui/registry.py`) adds the agent's `auto` and the trainers. Runs without
../shared (nothing is searched)."""

from __future__ import annotations

import pytest

from mathscout.errors import MathScoutError
from mathscout.index.components import available_components, default_components
from mathscout.retrievers.registry import RETRIEVERS, available_modes, open_retriever, resolve
from mathscout.ui.registry import TRAINERS, all_modes, trainers


@pytest.mark.parametrize("entry", RETRIEVERS, ids=lambda e: e.name)
def test_every_target_of_the_table_exists(entry):
    if entry.component:
        assert callable(resolve(entry.component))
    for mode in entry.modes:
        assert callable(resolve(mode.opener)) and mode.label and mode.description


@pytest.mark.parametrize("trainer", TRAINERS, ids=lambda t: t.command)
def test_every_trainer_exists(trainer):
    assert callable(resolve(trainer.target)) and trainer.description


def test_the_index_builder_offers_exactly_the_registered_components():
    assert set(available_components()) >= {e.name for e in RETRIEVERS if e.component}
    assert default_components()[:2] == ["bm25", "structure"]


def test_the_command_line_trains_what_the_table_lists(capsys):
    from mathscout.cli import main

    assert list(trainers()) == ["structure", "types", "fusion", "dense", "ranker", "cross-encoder", "colbert"]
    assert main(["train", "nothing"]) == 2
    err = capsys.readouterr().err  # the names, and where each is described (`train --help`: tests/ui/test_cli.py)
    assert all(name in err for name in trainers()) and "'mathscout train --help' says what each trains" in err


def test_the_page_menu_lists_every_mode_auto_first():
    from mathscout.ui.app import mode_choices

    modes = list(available_modes())
    choices = mode_choices(["auto", *modes])
    assert choices[0][1] == "auto" and {value for _, value in choices} == {"auto", *modes}
    assert {"colbert", "dense-ft", "scm"} <= {value for _, value in choices}
    assert all(label != value for label, value in choices)  # every mode has its label from the table


def test_auto_is_a_mode_only_above_the_agent(tmp_path):
    """The registry lists retrievers/'s own modes; `auto` comes from the agent, added by the entry layer."""
    from mathscout.agent.planned import AUTO_SPEC, open_mode

    assert "auto" not in available_modes() and all_modes()["auto"] is AUTO_SPEC
    assert list(all_modes())[:-1] == list(available_modes())
    with pytest.raises(MathScoutError, match="unknown search mode 'auto'"):
        open_retriever(tmp_path, "auto")
    for opener in (open_retriever, open_mode):
        with pytest.raises(MathScoutError, match="unknown search mode 'nope'"):
            opener(tmp_path, "nope")
    with pytest.raises(TypeError, match="mode auto takes no options"):
        open_mode(tmp_path, "auto", alpha=1)
