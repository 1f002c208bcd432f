"""The commands' own parsers (synlm.runtime.arguments.CommandParser): both spellings of every long
option, defaults in --help, one-line errors with the closest option."""

from __future__ import annotations

import pytest

from synlm.commands.evaluate_syntax import build_parser as evaluate_syntax_parser
from synlm.commands.generate import build_parser as generate_parser
from synlm.commands.parse import build_parser as parse_parser
from synlm.runtime.arguments import CommandParser


def test_both_spellings_parse_to_the_same_option() -> None:
    p = parse_parser()
    dashed = p.parse_args(["--baseline", "balanced", "--max-length", "10", "--batch-size", "4"])
    underscored = p.parse_args(["--baseline", "balanced", "--max_length", "10",
                                "--batch_size", "4"])
    assert dashed == underscored and dashed.max_length == 10
    g = generate_parser()
    assert g.parse_args(["--ckpt-path", "x", "--num_samples", "3"]).num_samples == 3
    assert g.parse_args(["--ckpt_path", "x", "--num-samples", "3"]).ckpt_path == "x"


@pytest.mark.parametrize("parser", [parse_parser, generate_parser, evaluate_syntax_parser])
def test_help_shows_defaults_and_the_declared_spelling_only(parser, capsys) -> None:
    with pytest.raises(SystemExit):
        parser().parse_args(["--help"])
    text = capsys.readouterr().out
    assert "(default: " in text and "(default: None)" not in text
    assert "--batch-size" in text and "--batch_size BATCH_SIZE" not in text


def test_a_mistyped_flag_is_one_line_with_the_closest(capsys) -> None:
    with pytest.raises(SystemExit) as exit_:
        generate_parser().parse_args(["--ckpt_path", "x", "--num_sample", "3"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err == ("synlm generate: error: unrecognized arguments: --num_sample 3; did you mean "
                   "--num_samples? (synlm generate --help lists the options)")


def test_an_option_declared_in_both_spellings_is_not_doubled() -> None:
    p = CommandParser("t")
    p.add_argument("--ckpt_path", "--ckpt-path")
    p.add_argument("--top-k", type=int, default=5)
    assert p.parse_args(["--ckpt-path", "a", "--top_k", "2"]).top_k == 2
