"""Surprisals in the field's formats (synlm.tse.surprisal_tables): lm-zoo's per-token table
and SyntaxGym's region table, from hand-made scores in nats."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from synlm.data.vocab import atomic_write_text
from synlm.errors import InputError
from synlm.tse.scores import ScoredSentence
from synlm.tse.surprisal_tables import region_table, token_table, unit_name

LN2 = math.log(2)
#: The reference runner's fixture: lm-zoo's get-surprisals output for a real model (carried
#: in tests/fixtures/syntaxgym).
LM_ZOO = (Path(__file__).parent / "fixtures" / "syntaxgym" / "core-fixtures" / "test"
          / "test_surp_grnn.txt")


def sentence(tokens: tuple[str, ...], nats: tuple[float, ...],
             eos: float | None) -> ScoredSentence:
    """A sentence whose words are its tokens, each with log-probability -nats."""
    log_probs = tuple(-n for n in nats)
    return ScoredSentence(tokens, log_probs, tuple(t == "<unk>" for t in tokens), eos,
                          tokens, log_probs)


SCORED = [sentence(("the", "dog", "<unk>"), (3 * LN2, 1.5 * LN2, 2.0), eos=-0.25 * LN2),
          sentence(("dogs",), (0.0,), eos=-LN2)]


def test_the_token_table_is_lm_zoos_in_bits() -> None:
    """Ids from 1, a row a token, then the end of the sentence; bits = nats / ln 2 (2 nats:
    2.885390 bits); the first token's true surprisal (lm-zoo writes 0 there); a certain token
    0.000000, never -0.000000."""
    assert token_table(SCORED) == (
        "sentence_id\ttoken_id\ttoken\tsurprisal\n"
        "1\t1\tthe\t3.000000\n"
        "1\t2\tdog\t1.500000\n"
        "1\t3\t<unk>\t2.885390\n"
        "1\t4\t<eos>\t0.250000\n"
        "2\t1\tdogs\t0.000000\n"
        "2\t2\t<eos>\t1.000000\n")
    in_nats = token_table(SCORED, base=math.e).splitlines()[1:]
    in_bits = token_table(SCORED).splitlines()[1:]
    assert [float(row.split("\t")[3]) for row in in_bits] == pytest.approx(
        [float(row.split("\t")[3]) / LN2 for row in in_nats], abs=2e-6)  # both to 6 places


def test_the_token_table_in_nats_without_an_end_and_with_the_scorers_own() -> None:
    no_end = [sentence(("dogs", "bark"), (0.5, 1.25), eos=None)]
    assert token_table(no_end, base=math.e) == (
        "sentence_id\ttoken_id\ttoken\tsurprisal\n1\t1\tdogs\t0.500000\n1\t2\tbark\t1.250000\n")
    assert token_table(SCORED[1:], eos_token="<|endoftext|>").splitlines()[-1] == \
        "1\t2\t<|endoftext|>\t1.000000"


def test_the_token_table_has_lm_zoos_layout() -> None:
    """The header and every row read as the reference runner's fixture does."""
    row = re.compile(r"\d+\t\d+\t[^\t]+\t-?\d+\.\d{6}")
    theirs = LM_ZOO.read_text().splitlines()
    ours = token_table(SCORED).splitlines()
    assert ours[0] == theirs[0]
    assert all(row.fullmatch(line) for line in theirs[1:] + ours[1:])


def test_a_token_that_would_break_the_table_is_refused() -> None:
    with pytest.raises(InputError, match="tab or a line break"):
        token_table([sentence(("a\tb",), (1.0,), eos=None)])
    with pytest.raises(InputError, match="base"):
        token_table(SCORED, base=1)


ITEM = {"benchmark": "syntaxgym", "suite": "number_src", "item": 3, "correct": True,
        "unknown": False,
        "surprisals": {"match": {"1": 2 * LN2, "2": LN2, "10": 0.0},
                       "mismatch": {"1": 2 * LN2, "10": 0.5, "2": 3 * LN2}}}


def test_the_region_table_of_one_item() -> None:
    """A row a region, conditions in order, regions by number (10 after 2), the sum in bits
    with its unit named; in nats with base e."""
    assert region_table([ITEM]) == (
        "suite,item_number,condition_name,region_number,metric,value,unit\n"
        "number_src,3,match,1,sum,2.000000,bits\n"
        "number_src,3,match,2,sum,1.000000,bits\n"
        "number_src,3,match,10,sum,0.000000,bits\n"
        "number_src,3,mismatch,1,sum,2.000000,bits\n"
        "number_src,3,mismatch,2,sum,3.000000,bits\n"
        "number_src,3,mismatch,10,sum,0.721348,bits\n")
    assert region_table([ITEM], base=math.e).splitlines()[-1] == \
        "number_src,3,mismatch,10,sum,0.500000,nats"
    assert unit_name(2) == "bits" and unit_name(math.e) == "nats" and unit_name(10) == "log10"


def test_the_region_table_wants_syntaxgym_records() -> None:
    with pytest.raises(InputError, match="record 0 is not a SyntaxGym item record: no suite, "
                       "item, surprisals"):
        region_table([{"benchmark": "blimp", "UID": "x", "correct": True}])


def test_tables_are_written_whole(tmp_path: Path) -> None:
    path = tmp_path / "out" / "regions.csv"
    atomic_write_text(path, region_table([ITEM]))
    assert path.read_text() == region_table([ITEM])
    assert [p.name for p in path.parent.iterdir()] == ["regions.csv"]
