"""SyntaxGym (Hu et al. 2020): the prediction-formula parser and its evaluation, suite reading,
region surprisals from a scorer, the reference implementation's token alignment (checked on
its own fixtures), and the paper's aggregation (checked on its staged item-level results)."""

from __future__ import annotations

import hashlib
import inspect
import json
import re
import shutil
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from staged import staged
from synlm.tse.formula import (
    Arith,
    Compare,
    FormulaError,
    Logic,
    Number,
    Term,
    evaluate,
    isclose,
    parse,
    parse_prediction,
    referenced,
    to_text,
)
from synlm.tse.scores import ScoredSentence
from synlm.tse.syntaxgym import (
    CIRCUITS,
    SUITE_COMMIT,
    SUITE_SHA256,
    SUITES,
    Suite,
    SuiteError,
    evaluate_suite,
    evaluate_suites,
    is_excluded,
    load_suites,
    map_regions,
    maps_by_heuristic,
    parse_suite,
    read_results_csv,
    read_suite,
    region_words,
    sg_score,
    suite_circuit,
    suite_path,
    suite_tag,
)
from syntaxgym_alignment import align_tokens

#: syntaxgym-core's own fixtures and one suite, carried in tests/ (fixtures/syntaxgym/SOURCE.md)
FIXTURES = Path(__file__).parent / "fixtures" / "syntaxgym" / "core-fixtures"
SUBORDINATION = FIXTURES.parent / "subordination.json"


def gym(*parts: str) -> Path:
    """A staged SyntaxGym file (``$SYNLM_DATA_DIR/syntaxgym/...``); skips when absent."""
    return staged("syntaxgym", *parts)


def suite_files() -> list[Path]:
    """The 34 staged suite files; skips when they are absent."""
    return sorted(gym("test_suites").glob("*.json"))


# ------------------------------------------------------------------------------- parsing


def test_every_staged_formula_parses_and_reads_back() -> None:
    """All 34 suites of the paper: 36 predictions parse, and writing one back and parsing it
    again gives the same AST."""
    assert len(suite_files()) == 34
    count = 0
    for path in suite_files():
        data = json.loads(path.read_text())
        for index, spec in enumerate(data["predictions"]):
            ast = parse_prediction(spec, data["meta"]["name"], index)
            assert parse(to_text(ast)) == ast
            count += 1
    assert count == 36


def test_staged_formulas_have_the_expected_shape() -> None:
    """cleft's difference-of-differences and fgd_hierarchy's ``=`` parse as written."""
    cleft = json.loads((gym("test_suites", "cleft.json")).read_text())["predictions"][0]
    np_diff = Arith("-", Term(6, "np_mismatch"), Term(6, "np_match"))
    vp_diff = Arith("-", Arith("+", Term(5, "vp_mismatch"), Term(6, "vp_mismatch")),
                    Arith("+", Term(5, "vp_match"), Term(6, "vp_match")))
    assert parse_prediction(cleft) == Compare(">", Arith("+", np_diff, vp_diff), Number(0.0))
    hierarchy = json.loads((gym("test_suites", "fgd_hierarchy.json")).read_text())
    second = parse_prediction(hierarchy["predictions"][1])
    assert second == Logic("&", Compare("=", Term(9, "what_nogap"), Term(9, "that_nogap")),
                           Compare("=", Term(6, "what_subjgap"), Term(6, "that_subjgap")))
    assert referenced(second) == {(9, "what_nogap"), (9, "that_nogap"), (6, "what_subjgap"),
                                  (6, "that_subjgap")}


@pytest.mark.parametrize("path", ["test/test_in.json", "test-unk/in.json"])
def test_relation_predictions_convert(path: str) -> None:
    spec = json.loads((FIXTURES / path).read_text())["predictions"][0]
    assert parse_prediction(spec, "test", 0) == Compare(">", Term(3, "that"), Term(3, "what"))
    assert read_suite(FIXTURES / path).formulas == ("[(3;%that%) > (3;%what%)]",)
    lessthan = dict(spec, relation="lessthan")
    assert parse_prediction(lessthan).op == "<"
    with pytest.raises(FormulaError, match=r"expected a relation among"):
        parse_prediction(dict(spec, relation="bigger"), "test", 0)


# ---------------------------------------------------------------------------- evaluation

#: Hand-set region surprisals: condition -> region -> value (region 4 of ``a`` is empty).
TABLE = {"a": {1: 10.0, 2: 4.0, 3: 3.0, 4: 0.0}, "c": {1: 5.0, 2: 5.0},
         "b": {1: 1000.0109, 2: 1000.0, 3: 1000.0111, 4: 0.0009, 5: 0.0011, 6: 0.0}}


def table_surprisal(region: int | str, condition: str) -> float:
    values = TABLE[condition]
    return sum(values.values()) if region == "*" else values[region]


@pytest.mark.parametrize(("formula", "expected"), [
    # "-" chains associate to the left: (10 - 4) - 3 = 3, not 10 - (4 - 3) = 9
    ("(1;%a%) - (2;%a%) - (3;%a%) = 3", True),
    ("(1;%a%) - (2;%a%) - (3;%a%) = 9", False),
    # "+" and "-" share one left-associative level, as in the reference's grammar
    # (oneOf("- +")): (10 - 4) + 3 = 9, not 10 - (4 + 3) = 3
    ("(1;%a%) - (2;%a%) + (3;%a%) = 9", True),
    # arithmetic binds tighter than comparison: 10 < 4 + 7
    ("(1;%a%) < (2;%a%) + 7", True),
    ("(1;%a%) < (2;%a%) + 5", False),
    # "*": every region of the condition, the empty one's 0 included
    ("(*;%a%) = 17", True),
    ("(*;%a%) - (1;%a%) = 7", True),
    ("(4;%a%) = 0", True),
    # literals, negative and exponent forms
    ("(2;%a%) > 3.5", True),
    ("(2;%a%) < -1", False),
    ("1e1 = (1;%a%)", True),
    ("0 - (1;%a%) = -10.0", True),
    # & and |, one level, left to right: (T | F) & F is False (T | (F & F) would be True)
    ("(1;%a%) < 0 | (2;%a%) < 5", True),
    ("(1;%a%) < 0 & (2;%a%) < 5", False),
    ("(1;%a%) > 0 | (1;%a%) < 0 & (1;%a%) < 0", False),
    ("(1;%a%) < 0 & (1;%a%) < 0 | (1;%a%) > 0", True),
    # "=" is numpy.isclose(a, b, rtol=1e-5, atol=1e-3): tolerance 1e-3 + 1e-5 * |b|
    ("(1;%b%) = (2;%b%)", True),   # |diff| 0.0109 <= 0.011
    ("(3;%b%) = (2;%b%)", False),  # |diff| 0.0111 > 0.011
    ("(4;%b%) = (6;%b%)", True),   # 0.0009 <= 0.001
    ("(5;%b%) = (6;%b%)", False),  # 0.0011 > 0.001
    # ties satisfy neither strict comparison
    ("(1;%c%) < (2;%c%)", False),
    ("(1;%c%) > (2;%c%)", False),
    ("(1;%c%) = (2;%c%)", True),
    # nested brackets of both kinds group
    ("[[(1;%a%) - [(2;%a%) - (3;%a%)]] = 9] & ([(1;%a%) > 0])", True),
    ("([(1;%a%) - ((2;%a%))] = 6)", True),
])
def test_formulas_evaluate_on_hand_set_surprisals(formula: str, expected: bool) -> None:
    assert evaluate(parse(formula), table_surprisal) is expected


def test_equality_is_numpys_isclose() -> None:
    """On both sides of the tolerance, around 0 and around large values, asymmetric in b."""
    b_values = [0.0, 1.0, 50.0, 1000.0, -300.0]
    offsets = [0.0, 5e-4, 9.9e-4, 1.01e-3, 0.0019, 0.0021, 0.0105, 0.0115, 0.1]
    for b in b_values:
        for offset in offsets:
            for a in (b + offset, b - offset):
                assert isclose(a, b) == bool(np.isclose(a, b, rtol=1e-5, atol=1e-3)), (a, b)


@pytest.mark.parametrize(("formula", "column", "expected"), [
    ("(1;%a%) <", 10, "expected a term"),
    ("[(1;%a%) < (2;%b%)", 19, "expected ']' closing the '[' of column 1"),
    ("[(1;%a%) < 2)", 13, "expected ']' closing the '[' of column 1, found ')'"),
    ("(1;%a%) < (2;%b%) ]", 19, "expected an operator or the end"),
    ("(1;%a%) + (2;%b%)", 1, "expected a comparison"),
    ("(1;a%) < 2", 4, "expected '%' before the condition name"),
    ("(1;%a) < 2", 6, "expected '%' after the condition name"),
    ("(1;%%) < 2", 5, "expected a condition name"),
    ("(1;%a%) < 2 < 3", 1, "expected a value as an operand of '<' (column 13)"),
    ("(1;%a%) < 2 & 3", 15, "expected a comparison as an operand of '&'"),
    ("(1;%a%) # 2", 9, "found '#'"),
    ("1.2.3 < (1;%a%)", 1, "expected a number"),
    ("", 1, "found the end"),
])
def test_malformed_formulas_name_suite_prediction_and_column(formula: str, column: int,
                                                              expected: str) -> None:
    with pytest.raises(FormulaError) as info:
        parse(formula, "my_suite", 2)
    message = str(info.value)
    assert info.value.column == column
    assert message.startswith(f"my_suite: predictions[2], column {column}: ")
    assert expected in message and "\n" not in message


# ------------------------------------------------- region surprisals (the reference runner)


def read_surprisals(path: Path) -> list[list[tuple[str, float]]]:
    """``sentence_id token_id token surprisal`` rows as each sentence's (token, surprisal)."""
    sentences: dict[int, list[tuple[str, float]]] = {}
    for line in path.read_text().splitlines()[1:]:
        sentence, _, token, surprisal = line.split("\t")
        sentences.setdefault(int(sentence), []).append((token, float(surprisal)))
    return [sentences[k] for k in sorted(sentences)]


class FixtureScorer:
    """One of syntaxgym-core's fixture models as a ``Scorer``: its tokens of each region are
    the words (found by walking its token stream along the regions' text), minus its token
    surprisals their log-probabilities, its ``<eos>`` row the end of the sentence."""

    def __init__(self, suite: Suite, sentences: list[list[tuple[str, float]]]) -> None:
        conditions = [c for item in suite.items for c in item.conditions]
        assert len(conditions) == len(sentences)
        self.regions: dict[str, tuple[str, ...]] = {}
        self.sentences: dict[tuple[str, ...], list[tuple[str, float]]] = {}
        for condition, sentence in zip(conditions, sentences):
            tokens = [t for t, _ in sentence]
            owners = align_tokens(condition.contents, tokens)
            for index, content in enumerate(condition.contents):
                self.regions[content] = tuple(t for t, o in zip(tokens, owners)
                                              if o == index and t != "<eos>")
            self.sentences[tuple(t for t in tokens if t != "<eos>")] = sentence

    def words(self, text: str) -> list[str]:
        return list(self.regions[text])

    def score(self, sentences: Sequence[Sequence[str]]) -> list[ScoredSentence]:
        out = []
        for words in sentences:
            rows = self.sentences[tuple(words)]
            (eos,) = [-value for token, value in rows if token == "<eos>"]
            log_probs = tuple(-value for token, value in rows if token != "<eos>")
            out.append(ScoredSentence(tuple(words), log_probs, tuple(w == "<unk>" for w in words),
                                      eos, tuple(words), log_probs))
        return out


@pytest.mark.parametrize(("folder", "suite", "surprisals", "out"), [
    ("test", "test_in.json", "test_surp_grnn.txt", "test_out_grnn.json"),
    ("test", "test_in.json", "test_surp_transformer-xl.txt", "test_out_transformer-xl.json"),
    ("test-unk", "in.json", "surp_grnn.txt", "out_grnn.json"),
    ("test-unk", "in.json", "surp_transformer-xl.txt", "out_transformer-xl.json"),
])
def test_the_scoring_path_gives_the_reference_region_sums(
        folder: str, suite: str, surprisals: str, out: str) -> None:
    """Two real models' token surprisals (GRNN: ``.`` split off, ``<unk>``; Transformer-XL:
    ``party.`` one token) through ``evaluate_suite``, the path ``evaluate-syntax`` runs,
    give syntaxgym-core's region sums, ``<eos>`` included where its runner puts it."""
    base = FIXTURES / folder
    parsed = read_suite(base / suite)
    result = evaluate_suite(parsed, FixtureScorer(parsed, read_surprisals(base / surprisals)))
    expected = json.loads((base / out).read_text())["items"]
    checked = 0
    for record, reference in zip(result.records(), expected):
        for condition in reference["conditions"]:
            ours = record["surprisals"][condition["condition_name"]]
            for region in condition["regions"]:
                assert ours[str(region["region_number"])] == pytest.approx(
                    region["metric_value"]["sum"], abs=1e-6)
                checked += 1
    assert checked == 24


def test_an_unknown_token_takes_the_stretch_up_to_the_next_match() -> None:
    """GRNN reads WEIRDSCARYWORD as ``<unk>``: it goes to region 6 with ``party``."""
    sentence = read_surprisals(FIXTURES / "test-unk" / "surp_grnn.txt")[1]
    condition = read_suite(FIXTURES / "test-unk" / "in.json").items[0].conditions[1]
    regions = align_tokens(condition.contents, [t for t, _ in sentence])
    assert [t for t, _ in sentence][13] == "<unk>"
    assert regions == [0, 0, 0, 1, 1, 2, 3, 3, 3, 4, 4, 5, 5, 5, 5, 5, 5]


@pytest.mark.parametrize(("words", "covers_end", "expected"), [
    ([("as", "the"), ("studied",), ()], [True, True, True], 2),      # "." region after the last
    ([("as",), ("the", "nurse")], [True, False], 1),                # the last region keeps it
    ([("a",), ("b",), ()], [False, True, False], 2),                # "b" ends its region
    ([("a",), ("b",), ()], [True, False, True], 1),                 # a "." trails "b"
    ([("a", "b"), (), ()], [True, True, True], 1),                  # one region on, no further
    ([("a", "b"), ()], [False, True], 0),                          # a "." trails "b": stays
    ([(), ()], [True, True], 0),                                    # no words: the first region
])
def test_the_end_of_the_sentence_goes_where_the_reference_walk_is(
        words: list[tuple[str, ...]], covers_end: list[bool], expected: int) -> None:
    known = [False] * sum(map(len, words))
    regions = map_regions(words, known, covers_end)
    assert regions.eos == expected
    assert regions.owners == tuple(i for i, region in enumerate(words) for _ in region)


def test_a_run_of_unknown_words_counts_where_it_starts() -> None:
    """The reference resolves a run of unknown tokens against the next known one and puts
    it, whole, in the region where it starts; a run that ends the sentence takes the end of
    the sentence too. Its Hugging Face path (offsets) keeps every word in its region."""
    words = [("the", "zorb"), ("quux",), ("ran",), ("glorp",), ()]
    unknown = [False, True, True, False, True]
    covers = [True] * 5
    heuristic = map_regions(words, unknown, covers)
    assert heuristic.owners == (0, 0, 0, 2, 3) and heuristic.eos == 3
    offsets = map_regions(words, unknown, covers, heuristic=False)
    assert offsets.owners == (0, 0, 1, 2, 3) and offsets.eos == 4


class EndingScorer:
    """Every word -1; the end of the sentence likely (-0.5) after a subordinate clause with its
    matrix clause, or after a plain clause alone, and unlikely (-4) otherwise: a model that
    knows that a sentence opened by *As* (*Because*, ...) needs a matrix clause. It drops
    punctuation, as a PTB model does, and remembers the matrix clauses (the text after a
    comma)."""

    SUBORDINATORS = frozenset({"after", "although", "as", "because", "before", "since", "when",
                               "while"})

    def __init__(self) -> None:
        self.matrix_clauses: set[tuple[str, ...]] = set()

    def words(self, text: str) -> list[str]:
        words = re.sub(r"[^\w\s]", "", text).lower().split()
        if text.lstrip().startswith(",") and words:
            self.matrix_clauses.add(tuple(words))
        return words

    def covers_end(self, text: str) -> bool:
        return not text.rstrip().endswith((".", ","))

    def score(self, sentences: Sequence[Sequence[str]]) -> list[ScoredSentence]:
        out = []
        for words in sentences:
            subordinate = words[0] in self.SUBORDINATORS
            matrix = any(tuple(words[-len(c):]) == c for c in self.matrix_clauses)
            log_probs = tuple(-1.0 for _ in words)
            out.append(ScoredSentence(tuple(words), log_probs, tuple(False for _ in words),
                                      -0.5 if subordinate == matrix else -4.0, tuple(words),
                                      log_probs))
        return out


def test_a_model_that_expects_a_matrix_clause_passes_subordination() -> None:
    """``subordination``'s region 3 is ``"."`` without a matrix clause: a PTB model reads it as
    no words, and only the end of the sentence, which the reference's mapping puts there,
    tells the conditions apart. Left out, every item compares 0 > 0 and fails."""
    suite = read_suite(SUBORDINATION)
    scorer = EndingScorer()
    assert evaluate_suite(suite, scorer).accuracy == 1.0
    without = evaluate_suite(suite, scorer, eos=False)
    assert without.accuracy == 0.0
    assert without.items[0].surprisals["sub_no-matrix"][3] == 0.0
    assert without.items[0].empty_regions == {"sub_no-matrix": (3,), "no-sub_no-matrix": (3,)}
    first = evaluate_suite(suite, scorer).items[0]
    assert first.surprisals["sub_no-matrix"][3] == 4.0  # <eos> alone, in the "." region
    assert first.surprisals["no-sub_no-matrix"][3] == 0.5
    assert first.empty_regions == {}


def test_a_scorer_says_how_its_tokens_map_onto_regions() -> None:
    """A scorer that does not say is mapped by the heuristic walk, the end of the sentence
    in; one whose ``syntaxgym_mapping`` is ``offsets`` (``MapsRegions``) by offsets, the end
    of the sentence out, so that ``"."`` alone is an empty region."""

    from synlm.tse.progress import ProgressScorer

    class OffsetScorer(EndingScorer):
        syntaxgym_mapping = "offsets"

    assert maps_by_heuristic(EndingScorer()) and not maps_by_heuristic(OffsetScorer())
    assert not maps_by_heuristic(ProgressScorer(OffsetScorer()))  # what evaluate-syntax runs
    # as Python 3.12's isinstance against a protocol looks it up: statically
    assert inspect.getattr_static(ProgressScorer(OffsetScorer()), "syntaxgym_mapping") == \
        "offsets"
    first = evaluate_suite(read_suite(SUBORDINATION), OffsetScorer()).items[0]
    assert first.surprisals["sub_no-matrix"][3] == 0.0
    assert first.empty_regions == {"sub_no-matrix": (3,), "no-sub_no-matrix": (3,)}


# ---------------------------------------------------------------------------- aggregation


@pytest.mark.parametrize(("name", "score", "seeds"), [
    ("ordered-neurons_bllip-lg", 0.486, 1),
    ("ordered-neurons_bllip-xs", 0.438, 3),
    ("vanilla_bllip-lg", 0.375, 3),
    ("gpt-2-pretrained_", 0.784, 1),
])
def test_the_staged_results_give_the_papers_sg_scores(name: str, score: float,
                                                      seeds: int) -> None:
    results = read_results_csv(gym("results", f"syntaxgym_results_{name}.csv"))
    assert list(results) == [name]
    accuracies = results[name]
    assert len(accuracies) == 34 and {len(v) for v in accuracies.values()} == {seeds}
    aggregate = sg_score(accuracies)
    assert len(aggregate.suites) == 31
    assert round(aggregate.score, 3) == score
    assert list(aggregate.circuits) == list(CIRCUITS)
    number = [aggregate.suites[s] for s in ("number_orc", "number_prep", "number_src")]
    assert aggregate.circuits["Agreement"] == pytest.approx(sum(number) / 3)
    # averaging seeds per suite first equals averaging the per-seed SG scores
    per_seed = [sg_score({s: v[k] for s, v in accuracies.items()}).score for k in range(seeds)]
    assert aggregate.score == pytest.approx(sum(per_seed) / seeds)


def test_tags_circuits_and_exclusions() -> None:
    assert suite_tag("subordination_orc-orc") == "subordination"
    assert suite_tag("center_embed_mod") == "center" and suite_tag("fgd-embed3") == "fgd"
    assert suite_circuit("reflexive_src_fem") == "Licensing"
    assert suite_circuit("mvrr_mod") == "Garden-Path Effects"
    assert suite_circuit("nn-nv-rpl") is None
    assert [s for s in SUITES if is_excluded(s)] == ["fgd-embed3", "fgd-embed4", "nn-nv-rpl"]
    aggregate = sg_score({"npi_orc_any": 1.0, "cleft": [0.2, 0.4], "fgd-embed3": 0.0})
    assert aggregate.score == pytest.approx(0.65)
    assert aggregate.circuits == pytest.approx({"Licensing": 1.0,
                                                "Long-Distance Dependencies": 0.3})


def test_a_malformed_results_file_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "r.csv"
    path.write_text("model,suite,item,correct\nlstm_xs_1,cleft,0,True\nlstm_xs_1,cleft,1,maybe\n")
    with pytest.raises(SuiteError, match=rf"^{re.escape(str(path))}:3: expected"):
        read_results_csv(path)


# ------------------------------------------------------------------- suites and scoring


class UnigramScorer:
    """A word-level scorer with a fixed log-probability a word: ``words`` lowercases, drops
    punctuation and splits on whitespace; a word outside the table is read as ``<unk>``."""

    def __init__(self, table: dict[str, float], unk: float = -10.0, eos: float = -0.7) -> None:
        self.table, self.unk, self.eos = table, unk, eos
        self.calls: list[int] = []

    def words(self, text: str) -> list[str]:
        return re.sub(r"[^\w\s]", "", text).lower().split()

    def score(self, sentences: Sequence[Sequence[str]]) -> list[ScoredSentence]:
        self.calls.append(len(sentences))
        out = []
        for words in sentences:
            known = [w in self.table for w in words]
            log_probs = tuple(self.table.get(w, self.unk) for w in words)
            tokens = tuple(w if k else "<unk>" for w, k in zip(words, known))
            out.append(ScoredSentence(tuple(words), log_probs, tuple(not k for k in known),
                                      self.eos, tokens, log_probs))
        return out


TABLE_LOG_PROBS = {"the": -1.0, "a": -1.2, "cat": -2.0, "dog": -3.0, "slept": -1.5, "ran": -0.5}


def handmade_suite() -> dict:
    """Regions: 1 start, 2 critical noun, 3 punctuation or nothing, 4 end. Prediction 0: the
    noun of ``a`` is less surprising than that of ``b``; prediction 1: region 3 (no words in
    any condition) is equally surprising (0) in both."""

    def condition(name: str, contents: list[str]) -> dict:
        return {"condition_name": name, "regions": [
            {"region_number": n, "content": c} for n, c in enumerate(contents, start=1)]}

    items = [  # (a's regions, b's regions): by hand, surprisal of region 2 in a vs b
        (["The", "cat", ",", "slept."], ["The", "dog", "!", "slept."]),    # 2 < 3: correct
        (["A", "dog", ",", "ran"], ["A", "cat", ",", "ran"]),              # 3 < 2: wrong
        (["The", "zebra", ",", "ran"], ["The", "dog dog dog dog", "", "ran"]),  # 10 < 12: correct,
        (["The", "cat", "", "gnu"], ["The", "dog", "...", "gnu"]),         # 2 < 3: correct, gnu
    ]                                                                      # in region 4 only
    return {"meta": {"name": "handmade", "metric": "sum"},
            "region_meta": {"1": "start", "2": "noun", "3": "punct", "4": "end"},
            "predictions": [{"type": "formula", "formula": "(2;%a%) < (2;%b%)"},
                            {"type": "formula", "formula": "[(3;%a%) = (3;%b%)]"}],
            "items": [{"item_number": i, "conditions": [condition("a", a), condition("b", b)]}
                      for i, (a, b) in enumerate(items, start=1)]}


def test_evaluate_suite_with_a_unigram_scorer() -> None:
    """Accuracy 3/4; item 3's critical noun ``zebra`` is unknown (unknown share 1/4), so the
    in-vocabulary accuracy is 2/3; item 4's ``gnu`` is outside the critical regions."""
    suite = parse_suite(handmade_suite(), "handmade.json")
    assert suite.critical_regions == (2, 3)
    assert suite.region_names == {1: "start", 2: "noun", 3: "punct", 4: "end"}
    assert suite.formulas == ("(2;%a%) < (2;%b%)", "[(3;%a%) = (3;%b%)]")
    assert suite.items[2].condition("b").contents == ("The", "dog dog dog dog", "", "ran")
    scorer = UnigramScorer(TABLE_LOG_PROBS)
    assert region_words(scorer, suite.items[0].conditions[0]) == (
        ("the",), ("cat",), (), ("slept",))
    result = evaluate_suite(suite, scorer)
    assert scorer.calls == [8]  # every condition of every item, in one call
    assert [item.predictions for item in result.items] == [(True, True), (False, True),
                                                           (True, True), (True, True)]
    assert [item.correct for item in result.items] == [True, False, True, True]
    assert [item.unknown_words for item in result.items] == [(), (), ("zebra",), ()]
    assert result.accuracy == pytest.approx(0.75)
    assert result.in_vocabulary_accuracy == pytest.approx(2 / 3)
    assert result.unknown_share == pytest.approx(0.25)
    # region surprisals: minus the words' log-probabilities, 0 for no words; the end of the
    # sentence (0.7) with the last word, which ends the last region
    first = result.records()[0]
    assert first["surprisals"] == {"a": {"1": 1.0, "2": 2.0, "3": 0.0, "4": 2.2},
                                   "b": {"1": 1.0, "2": 3.0, "3": 0.0, "4": 2.2}}
    assert result.records()[2]["surprisals"]["b"]["2"] == pytest.approx(12.0)
    assert result.records()[2]["surprisals"]["a"]["2"] == pytest.approx(10.0)
    assert first | {"surprisals": None} == {
        "suite": "handmade", "item": 1, "surprisals": None, "predictions": [True, True],
        "correct": True, "unknown": False, "unknown_words": [],
        "empty_regions": {"a": [3], "b": [3]}}  # "," and "!": critical, read as nothing
    json.dumps(result.records())
    assert result.summary() == {"suite": "handmade", "items": 4, "accuracy": 0.75,
                                "in_vocabulary_accuracy": pytest.approx(2 / 3),
                                "in_vocabulary_items": 3, "unknown_share": 0.25,
                                "empty_region_items": 4, "no_parse_items": 0}


def test_in_vocabulary_accuracy_is_none_when_every_item_has_an_unknown() -> None:
    suite = parse_suite(handmade_suite(), "handmade.json")
    result = evaluate_suite(suite, UnigramScorer({"the": -1.0}))
    assert all(item.unknown for item in result.items)
    assert result.in_vocabulary_accuracy is None and result.unknown_share == 1.0


def test_all_staged_suites_evaluate_in_one_scoring_call() -> None:
    """Every staged suite reads and evaluates (a length-based scorer, no unknowns), with item
    counts matching the paper's results."""
    suites = [read_suite(path) for path in suite_files()]

    class LengthScorer(UnigramScorer):
        def score(self, sentences: Sequence[Sequence[str]]) -> list[ScoredSentence]:
            self.table = {w: -float(len(w)) for s in sentences for w in s}
            return super().score(sentences)

    scorer = LengthScorer({})
    results = evaluate_suites(suites, scorer)
    assert scorer.calls == [sum(len(s.items) * len(s.items[0].conditions) for s in suites)]
    paper = read_results_csv(gym("results", "syntaxgym_results_gpt-2-pretrained_.csv"))
    counts = {r.suite: len(r.items) for r in results}
    assert sum(counts.values()) == 842
    assert set(counts) == set(paper["gpt-2-pretrained_"]) == set(SUITES)
    for result in results:
        assert 0.0 <= result.accuracy <= 1.0 and result.unknown_share == 0.0
        assert result.in_vocabulary_accuracy == result.accuracy


@pytest.mark.parametrize(("change", "message"), [
    (lambda d: d.pop("items"), r"handmade\.json: top level lacks 'items'"),
    (lambda d: d["items"][1]["conditions"][0]["regions"][2].update(region_number="3"),
     r"items\[1\]\.conditions\[0\]\.regions\[2\]\.region_number: expected int"),
    (lambda d: d["predictions"][1].update(formula="[(3;%a%) = (3;%b%)"),
     r"handmade: predictions\[1\], column 19: expected '\]'"),
    (lambda d: d["predictions"][0].update(formula="(2;%a%) < (2;%c%)"),
     r"reads region 2 of condition 'c', which item 1 lacks"),
    (lambda d: d["predictions"][0].update(formula="(9;%a%) < (2;%b%)"),
     r"reads region 9 of condition 'a'"),
])
def test_a_bad_suite_is_one_line_naming_file_and_fault(change, message: str) -> None:
    data = handmade_suite()
    change(data)
    with pytest.raises(SuiteError, match=message) as info:
        parse_suite(data, "handmade.json")
    assert str(info.value).startswith("handmade.json: ") and "\n" not in str(info.value)


def test_read_suite_rejects_a_file_that_is_not_json(tmp_path: Path) -> None:
    path = tmp_path / "broken.json"
    path.write_text('{"meta": ')
    with pytest.raises(SuiteError, match=r"broken\.json: not a JSON suite"):
        read_suite(path)


# ----------------------------------------------------------------------------- downloads


def test_the_pinned_checksums_are_the_staged_files() -> None:
    assert sorted(SUITES) == [p.stem for p in suite_files()]
    for path in suite_files():
        assert hashlib.sha256(path.read_bytes()).hexdigest() == SUITE_SHA256[path.stem]


def test_a_missing_suite_names_path_env_and_flag(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SYNLM_DATA_DIR", str(tmp_path))
    with pytest.raises(SuiteError) as info:
        load_suites(["cleft"])
    message = str(info.value)
    expected = tmp_path / "syntaxgym" / "test_suites" / "cleft.json"
    assert str(expected) in message and "SYNLM_DATA_DIR" in message and "--download" in message
    with pytest.raises(SuiteError, match=r"no suite 'clef'"):
        suite_path("clef", tmp_path)


def test_download_fetches_the_pinned_url_and_checks_it(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    fetched: list[str] = []

    def fake_urlretrieve(url: str, dest: str) -> None:
        fetched.append(url)
        shutil.copyfile(gym("test_suites", url.rsplit("/", 1)[1]), dest)

    monkeypatch.setattr("urllib.request.urlretrieve", fake_urlretrieve)
    (suite,) = load_suites(["fgd_hierarchy"], data_dir=tmp_path, download=True)
    assert fetched == [f"https://raw.githubusercontent.com/cpllab/syntactic-generalization/"
                       f"{SUITE_COMMIT}/test_suites/json/fgd_hierarchy.json"]
    assert suite.name == "fgd_hierarchy" and len(suite.items) == 24
    assert (tmp_path / "syntaxgym" / "test_suites" / "fgd_hierarchy.json").exists()
    load_suites(["fgd_hierarchy"], data_dir=tmp_path, download=True)
    assert len(fetched) == 1  # present: not fetched again
