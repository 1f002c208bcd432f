"""benchmarks/rnng_script_speed.py's reading of the two codes' surprisal files and their
comparison: the released ``beam_search.py --lm_output_file`` (nats, a row a word, then a
rule and a perplexity line) and synlm's ``evaluate-syntax --surprisals`` table (bits to 6
places, a sentence's words then its end-of-sentence row; no rows for a sentence without a
parse). The timing itself runs the released code, which the tests do not have."""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from rnng_script_speed import (
    beam_setting,
    compare,
    released_surprisals,
    synlm_surprisals,
)

RELEASED = ("0\t0\tThe\tThe\t2.5\t2.5\n"
            "0\t1\tcat\t<unk>\t7.25\t7.25\n"
            "1\t0\tDogs\tDogs\t3.0\t3.0\n"
            "-----------------------------------\n"
            "perplexity: 100.0 Time: 1.0 Throughput: 2.0")


def test_the_released_file_gives_each_sentences_word_surprisals(tmp_path) -> None:
    path = tmp_path / "released.tsv"
    path.write_text(RELEASED)
    assert released_surprisals(path) == [[2.5, 7.25], [3.0]]


def test_synlms_table_in_bits_becomes_nats_without_the_end_row(tmp_path) -> None:
    path = tmp_path / "synlm.tsv"
    path.write_text("sentence_id\ttoken_id\ttoken\tsurprisal\n"
                    "1\t1\tThe\t3.606738\n1\t2\t<unk>\t10.459441\n1\t3\t<eos>\t0.000000\n"
                    "3\t1\tDogs\t4.328085\n3\t2\t<eos>\t0.000000\n")
    found = synlm_surprisals(path, [2, 1, 1])
    assert found[1] is None  # sentence 2: no parse, no rows
    assert found[0] == pytest.approx([3.606738 * math.log(2), 10.459441 * math.log(2)],
                                     abs=1e-12)
    assert found[0][0] == pytest.approx(2.5, abs=5e-7)  # 6 places of bits: 3.5e-7 nats
    assert found[2] == pytest.approx([3.0], abs=5e-7)


def test_the_comparison_takes_the_largest_word_and_sentence_differences() -> None:
    out = compare([[2.5, 7.25], [1.0], [3.0]], [[2.5 + 1e-5, 7.25 - 3e-5], None, [3.0]])
    assert out["sentences_compared"] == 2 and out["synlm_unparsed"] == 1
    assert out["max_abs_word_difference"] == pytest.approx(3e-5, abs=1e-12)
    assert out["max_abs_sentence_difference"] == pytest.approx(2e-5, abs=1e-12)


def test_a_beam_setting_is_three_positive_numbers() -> None:
    assert beam_setting("100/10/1") == (100, 10, 1)
    for bad in ("100/10", "100/0/1", "a/b/c"):
        with pytest.raises(argparse.ArgumentTypeError, match="--beam"):
            beam_setting(bad)
