"""synlm's SyntaxGym regions equal syntaxgym-core's: the reference's own mapping
(``compute_mapping_heuristic``, run by ``fixtures/syntaxgym/make_reference_regions.py``) of
a word-level model's tokens onto the regions of real suites, for both text normalisations
(PTB without punctuation, Treebank tokens), with runs of unknown words and ``<eos>``."""

from __future__ import annotations

import json
from itertools import pairwise
from pathlib import Path

import pytest

from synlm.data.normalization import TEXT_COVERS_END, TEXT_NORMALIZATIONS
from synlm.tse.syntaxgym import map_regions

FIXTURE = Path(__file__).parent / "fixtures" / "syntaxgym" / "reference_regions.json"
REFERENCE = json.loads(FIXTURE.read_text())
RECORDS = REFERENCE["records"]


def test_the_fixture_names_its_generator_and_covers_the_hard_cases() -> None:
    assert (Path(__file__).parents[1] / REFERENCE["generator"]).is_file()
    tokens = [r["tokens"] for r in RECORDS]
    assert {r["normalization"] for r in RECORDS} == {"ptb", "none"}
    assert len({r["suite"] for r in RECORDS}) >= 8
    assert any(a == b == "<unk>" for t in tokens for a, b in pairwise(t))  # unknown runs
    assert any(t[-2] == "<unk>" for t in tokens)  # a run that ends the sentence
    # the end of the sentence in a region after the last word's (a dropped "." region)
    assert any(r["regions"][-1] != r["regions"][-2] for r in RECORDS)


@pytest.mark.parametrize("record", RECORDS, ids=lambda r: "{normalization}-{suite}-{item}-"
                         "{condition}".format(**r))
def test_synlm_maps_words_to_regions_as_syntaxgym_core_does(record: dict) -> None:
    """The words ``ModelScorer`` reads under the normalisation (``Scorer.words``,
    ``Scorer.covers_end``), unknown where the fixture's model reads ``<unk>``, go to the
    regions, and ``<eos>`` to the region, that the reference gave its tokens."""
    contents, normalization = record["contents"], record["normalization"]
    words = [tuple(TEXT_NORMALIZATIONS[normalization](c)) for c in contents]
    flat = [w for region in words for w in region]
    unknown = [len(w) >= REFERENCE["unknown_from"] for w in flat]
    assert [("<unk>" if u else w) for w, u in zip(flat, unknown)] + ["<eos>"] == \
        record["tokens"]  # the same sentence, as the reference's model read it
    mapped = map_regions(words, unknown, [TEXT_COVERS_END[normalization](c) for c in contents])
    assert [*mapped.owners, mapped.eos] == record["regions"]
