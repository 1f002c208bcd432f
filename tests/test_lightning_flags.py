"""A mistyped flag of ``synlm fit|validate|test|predict`` is one line before torch loads
(``synlm.runtime.lightning_flags``), and every flag the command line takes passes that
check: it refuses nothing the command line would run."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import pytest
from test_fast_checks import synlm

from synlm.runtime.lightning_flags import unknown_flag

#: (command, its arguments, the line it says after ``synlm COMMAND: error: ``)
MISTYPED = [
    ("fit", ["--config", "quickstart.yaml", "--trainer.max_epoch=3"],
     "--trainer.max_epoch=3: not an option; did you mean --trainer.max_epochs?"),
    ("fit", ["--config", "quickstart.yaml", "--data.batchsize", "3"],
     "--data.batchsize: not an option; did you mean --data.batch_size?"),
    ("fit", ["--config", "quickstart.yaml", "--model.embeding_dropout=0.1"],
     "--model.embeding_dropout=0.1: not an option; did you mean --model.embedding_dropout?"),
    ("fit", ["--config", "quickstart.yaml", "--trainr.max_epochs=3"],
     "--trainr.max_epochs=3: not an option; did you mean --trainer?"),
    ("fit", ["--config", "quickstart.yaml", "--verbose=false"],
     "--verbose=false: not an option"),  # validate's and test's, not fit's
    ("test", ["--ckpt_path", "runs/x", "--trainer.limit_test_batchs=1"],
     "--trainer.limit_test_batchs=1: not an option; did you mean "
     "--trainer.limit_test_batches?"),
    ("validate", ["--config", "rnng.yaml", "--model.init_args.beem_size=2"],
     "--model.init_args.beem_size=2: not an option; did you mean "
     "--model.init_args.beam_size?"),
]


@pytest.mark.parametrize(("command", "args", "said"), MISTYPED,
                         ids=[f"{c}-{a[-1].split('=')[0]}" for c, a, _ in MISTYPED])
def test_a_mistyped_flag_is_one_line_before_torch(command: str, args: list[str], said: str,
                                                   tmp_path: Path) -> None:
    code, torch, err, _ = synlm([command, *args], tmp_path)
    assert (code, torch) == (2, False)
    assert err == [f"synlm {command}: error: {said} (synlm {command} --help-all lists every "
                   "option)"]


@functools.cache
def _options(command: str) -> list[str]:
    """Every option string of ``synlm COMMAND``'s parser (the recipe's arguments, which
    subclass mode lists under ``--model.help``, aside)."""
    from jsonargparse import capture_parser

    from synlm.lightning_cli import SynLMCLI

    parser: Any = capture_parser(lambda: SynLMCLI(args=[command]))
    (subcommands,) = [a for a in parser._actions if a.dest == "subcommand"]
    sub = subcommands.choices[command]
    return sorted({o for action in sub._actions for o in action.option_strings
                   if o.startswith("--")})


@pytest.mark.parametrize("command", ["fit", "validate", "test", "predict"])
def test_every_flag_the_command_line_takes_passes(command: str) -> None:
    options = _options(command)
    assert "--trainer.max_epochs" in options and "--data.batch_size" in options
    assert [o for o in options if unknown_flag(command, [f"{o}=1"])] == []
    for flag in ("--model.backbone=ONLSTM", "--model.init_args.beam_size=2",
                 "--model.backbone.init_args.hiden_size=3", "--optimizer.lrr=1",
                 "--model.help", "--trainer.callbacks+=TreeSamples"):
        assert unknown_flag(command, [flag]) is None, flag  # deeper: the command line's


def test_a_recipe_of_ones_own_takes_its_own_arguments() -> None:
    """A recipe that is not synlm's (``--model my_recipes.MyLM``) has arguments only the
    command line knows."""
    assert unknown_flag("fit", ["--model.foo=1"]) is not None
    assert unknown_flag("fit", ["--model=my_recipes.MyLM", "--model.foo=1"]) is None
    assert unknown_flag("fit", ["--model=TransitionLM", "--model.foo=1"]) is not None


def test_the_recipes_read_by_their_class_statements_are_the_catalogs() -> None:
    from synlm.catalog import list_components
    from synlm.runtime.lightning_flags import _recipe_sources

    assert [name for name, _ in _recipe_sources()] == list_components()["recipes"]
