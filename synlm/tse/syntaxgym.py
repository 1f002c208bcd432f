"""SyntaxGym (Hu, Gauthier, Qian, Wilcox & Levy 2020, "A Systematic Assessment of Syntactic
Generalization in Neural Language Models"): its test suites, their evaluation through a
``Scorer``, the paper's aggregation into an SG score and six circuits, and the alignment of an
external model's token surprisals to regions.

A suite's items each hold several conditions of one sentence cut into numbered regions; its
predictions (``synlm.tse.formula``) compare region surprisals across conditions. An item is
correct when every prediction holds for it, a suite's accuracy is the mean over its items, and
the SG score is the mean of suite accuracies. The suites are those of the paper's repository
(``cpllab/syntactic-generalization`` at ``SUITE_COMMIT``, ``test_suites/json``), fetched with
``download=True`` (the CLI's ``--download``) into ``$SYNLM_DATA_DIR/syntaxgym/test_suites``.

One module because the suites, their scoring, the paper's aggregation and the alignment of a
model's tokens to regions share the suite's types and are checked together against the
reference scorer.
"""

from __future__ import annotations

import csv
import json
import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from synlm.data.files import DATA_ENV, CorpusError, RemoteFile, default_data_dir
from synlm.errors import InputError
from synlm.tse.formula import Expr, FormulaError, Region, evaluate, parse_prediction, referenced
from synlm.tse.formula import to_text as formula_text
from synlm.tse.scores import CoversEnd, MapsRegions, ScoredSentence, Scorer

#: The commit of ``cpllab/syntactic-generalization`` the suites are pinned to (2020-05-22).
SUITE_COMMIT = "43f1f86b746254406dafc89bd17b9d4976607ef6"
SUITE_URL = ("https://raw.githubusercontent.com/cpllab/syntactic-generalization/"
             f"{SUITE_COMMIT}/test_suites/json/{{name}}.json")
#: Where the suites live under the data folder.
SUITE_FOLDER = Path("syntaxgym") / "test_suites"
#: The 34 suites of the paper and the sha256 of each file at ``SUITE_COMMIT``.
SUITE_SHA256: dict[str, str] = {
    "center_embed": "cc8b60e34eff4ec723a295d0378af07cceaf9bdccddd5a9508a1284e40d3390c",
    "center_embed_mod": "9688aebd2c4a8ff68ca25873fb9039304e3c70996488b74ffb69681dd236e8d7",
    "cleft": "b6e19bedec743fc8af079638d145e4af224efa4d671e403d2d7ff4a395d10713",
    "cleft_modifier": "d9823123e538ea8d3150c7f584881e1e7137339e9a136077d033c7cd5ae4f2a3",
    "fgd-embed3": "35db2d0535f2b4f896157149b3aa625e5fd08694480b4978fcc31a34156462ba",
    "fgd-embed4": "6933e47b9bc5e0635412bfa3dc89d44b34889e73f780f615ba6575dd069ab20b",
    "fgd_hierarchy": "ed5ddf73c04fc0bf577f6fcd4aef62b660b01c4fecb5b69216b1164128924693",
    "fgd_object": "64045162cd8158f07bcf9efc9b2ba9ad60324009f71bae8d58bb9a841e72eee5",
    "fgd_pp": "8baa56588f01f9807d465d910159ad0c89829a211088de88d8a9d2cb4df574ff",
    "fgd_subject": "bb641e69be1e4ad4d4077ceeb5fd86c87fcd1df69795b8654702bf7746386746",
    "mvrr": "5201adc7f9019caffc0bc54ca2d71db601f187d5a0dce55df0e90fd5592b2581",
    "mvrr_mod": "e6f7cea18cd1b5d22faaae0f2f9a08fecab53665dfc2926fabb1c6841637d2d2",
    "nn-nv-rpl": "7b06181fe8aa7cc6d3c3a224485b3023be2be638ca2ae16ef2dc1ee2c74d4dec",
    "npi_orc_any": "96f6bd4ab779633f4837132d2a17d89568e46b154a7052636da208ac360f7685",
    "npi_orc_ever": "7c69bb7c2d01df8107a650703ab12dfb900a09afb2d8e9c54da8ac82eaefd99d",
    "npi_src_any": "3ce002cc8a88beb0012dba511fff56edb60c58b5934275dbf4f8d36274505f75",
    "npi_src_ever": "cd7735f62dc7a301e0c48c825fb93b1824add388c7337954971f7da4bc2523f2",
    "npz_ambig": "2b46dd51f5985e62527e59e7f536656e28f462e33de9e3459cd635f73d5ca5e3",
    "npz_ambig_mod": "3cac79834de52d9cc4ff9b3ab0c8c8160cd9d602f1be2e503b6b622a4a2a582a",
    "npz_obj": "6852eddee888fce984dbe7734f90bfccd185e8b4d11affb8141434d5362b5cb6",
    "npz_obj_mod": "2c7d32dbf0167750510b6d7c30788665537210246024b30d9aa6545228ecb3bc",
    "number_orc": "b5c96cb8ed8306cc2c90f3bb65a4ba1c4d27c004bdb34855bfc7ec2973c934ac",
    "number_prep": "5c6a54fa244df2962b0700a2a6d6e03b8c0db8a1482cccfe64d16d01f8b3eeca",
    "number_src": "8c3a1db336d275fe7d10dac418450f83fc40c5456e94beb3a547ce314753f6df",
    "reflexive_orc_fem": "d18ce6a3a970b1356721ed8415e400b89020b5e0d76a3017d6be28689404b7b7",
    "reflexive_orc_masc": "03d31c93a4225e94decf38fe0c28cd01e869da2f209ae1ef7fb1d5c310323e7c",
    "reflexive_prep_fem": "e192369294f0780b1133349ec3d9a75532b0bce310ae50ddab9b2e2d394137e9",
    "reflexive_prep_masc": "81934e17431b72a553ab3a501471cb0b0eaa101ca7f78799abc48905a21f16ca",
    "reflexive_src_fem": "4e821bfd260762d996a72989fa350e64802e4f22e2188c0d5f58abcce2160a58",
    "reflexive_src_masc": "645ef6786dc63433c407de9d0085233df3b212579bef7b04f6e20493d37ec312",
    "subordination": "065fc960d7346cd96f152c389c36816bf330b415661319e7dc6022ff610855b4",
    "subordination_orc-orc": "91232f6eb5247b5fdccb399af642eb86411e099db2ba91b45b434401326a3497",
    "subordination_pp-pp": "e9eb380ba720048c4b6a503c23ccef2680db55bdd4093b41afb0d281ae0bb912",
    "subordination_src-src": "f0b84b08402fbde49b9e2ae07db0a3e663ff149a4dcffc4c8c931ef8bbc843a5",
}
SUITES = tuple(SUITE_SHA256)

#: Suites the paper leaves out of its scores (its ``notebooks/main.py``); 31 of the 34 remain.
EXCLUDED_SUITES = re.compile(r"^fgd-embed[34]|^gardenpath|^nn-nv")
#: The paper's circuits and the suite tags each gathers.
CIRCUITS: dict[str, tuple[str, ...]] = {
    "Licensing": ("npi", "reflexive"),
    "Long-Distance Dependencies": ("fgd", "cleft"),
    "Agreement": ("number",),
    "Garden-Path Effects": ("npz", "mvrr"),
    "Gross Syntactic State": ("subordination",),
    "Center Embedding": ("center",),
}
_TAG_CIRCUIT = {tag: circuit for circuit, tags in CIRCUITS.items() for tag in tags}


class SuiteError(CorpusError):
    """A suite or results file is missing or malformed; the one-line message names the file."""


# --------------------------------------------------------------------------------- suites


@dataclass(frozen=True)
class Condition:
    """One condition of an item: its regions' numbers and contents, in region order."""

    name: str
    region_numbers: tuple[int, ...]
    contents: tuple[str, ...]


@dataclass(frozen=True)
class Item:
    """An item: the same sentence frame under each condition."""

    number: int
    conditions: tuple[Condition, ...]

    def condition(self, name: str) -> Condition:
        for condition in self.conditions:
            if condition.name == name:
                return condition
        raise KeyError(f"item {self.number} has no condition {name!r}")


@dataclass(frozen=True)
class Suite:
    """A test suite: its predictions parsed (``formulas`` their text) and its items."""

    name: str
    region_names: dict[int, str]
    formulas: tuple[str, ...]
    predictions: tuple[Expr, ...]
    items: tuple[Item, ...]

    @property
    def critical_regions(self) -> tuple[int, ...]:
        """The region numbers the predictions read (every region where one reads ``*``)."""
        read = {region for prediction in self.predictions
                for region, _ in referenced(prediction)}
        if "*" in read:
            return tuple(sorted({number for item in self.items for condition in item.conditions
                                 for number in condition.region_numbers}))
        return tuple(sorted(int(region) for region in read))


def _expect(value: Any, kind: type | tuple[type, ...], source: str, where: str) -> Any:
    if not isinstance(value, kind) or isinstance(value, bool):
        names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise SuiteError(f"{source}: {where}: expected {names}, found {json.dumps(value)[:60]}")
    return value


def _field(obj: Mapping[str, Any], key: str, kind: type, source: str, where: str) -> Any:
    if key not in obj:
        raise SuiteError(f"{source}: {where} lacks {key!r}")
    return _expect(obj[key], kind, source, f"{where}.{key}")


def _condition(data: Any, source: str, where: str) -> Condition:
    _expect(data, dict, source, where)
    name = _field(data, "condition_name", str, source, where)
    regions = []
    for r, region in enumerate(_field(data, "regions", list, source, where)):
        at = f"{where}.regions[{r}]"
        _expect(region, dict, source, at)
        regions.append((_field(region, "region_number", int, source, at),
                        _field(region, "content", str, source, at)))
    numbers = [number for number, _ in regions]
    if not regions or len(set(numbers)) != len(numbers):
        raise SuiteError(f"{source}: {where} ({name!r}): expected regions with distinct numbers, "
                         f"found {numbers}")
    regions.sort()
    return Condition(name, tuple(n for n, _ in regions), tuple(c for _, c in regions))


def _item(data: Any, source: str, where: str) -> Item:
    _expect(data, dict, source, where)
    number = _field(data, "item_number", int, source, where)
    conditions = tuple(_condition(c, source, f"{where}.conditions[{i}]")
                       for i, c in enumerate(_field(data, "conditions", list, source, where)))
    names = [c.name for c in conditions]
    if not conditions or len(set(names)) != len(names):
        raise SuiteError(f"{source}: {where}: expected conditions with distinct names, "
                         f"found {names}")
    return Item(number, conditions)


def _check_references(suite: Suite, source: str) -> None:
    """Every region a prediction reads exists in every item."""
    for index, prediction in enumerate(suite.predictions):
        for region, condition in sorted(referenced(prediction), key=str):
            for item in suite.items:
                names = [c.name for c in item.conditions]
                if condition not in names or (
                        region != "*" and region not in item.condition(condition).region_numbers):
                    raise SuiteError(f"{source}: predictions[{index}] reads region {region} of "
                                     f"condition {condition!r}, which item {item.number} lacks "
                                     f"(conditions {names})")


def parse_suite(data: Any, source: str) -> Suite:
    """A suite from its JSON object; ``source`` names it in errors."""
    _expect(data, dict, source, "top level")
    meta = _field(data, "meta", dict, source, "top level")
    name = _field(meta, "name", str, source, "meta")
    region_meta = _expect(data.get("region_meta", {}), dict, source, "region_meta")
    specs = _field(data, "predictions", list, source, "top level")
    if not specs:
        raise SuiteError(f"{source}: expected at least one prediction, found none")
    try:
        predictions = tuple(parse_prediction(p, name, i) for i, p in enumerate(specs))
    except FormulaError as err:
        raise SuiteError(f"{source}: {err}") from None
    items = tuple(_item(it, source, f"items[{i}]")
                  for i, it in enumerate(_field(data, "items", list, source, "top level")))
    if not items:
        raise SuiteError(f"{source}: expected at least one item, found none")
    formulas = tuple(p["formula"].strip() if "formula" in p else formula_text(e)
                     for p, e in zip(specs, predictions))
    try:
        region_names = {int(k): str(v) for k, v in region_meta.items()}
    except ValueError:
        raise SuiteError(f"{source}: region_meta: expected region numbers as keys, "
                         f"found {sorted(region_meta)}") from None
    suite = Suite(name, region_names, formulas, predictions, items)
    _check_references(suite, source)
    return suite


def read_suite(path: str | Path) -> Suite:
    """Read a suite file (JSON as the SyntaxGym repositories publish it)."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as err:
        raise SuiteError(f"{path}: cannot read ({err.strerror})") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise SuiteError(f"{path}: not a JSON suite ({err})") from None
    return parse_suite(data, str(path))


def suite_file(name: str) -> RemoteFile:
    """Where suite ``name`` is published (at ``SUITE_COMMIT``) and its sha256."""
    if name not in SUITE_SHA256:
        raise SuiteError(f"syntaxgym: no suite {name!r}; suites: {', '.join(SUITES)}")
    return RemoteFile(f"{name}.json", SUITE_URL.format(name=name), SUITE_SHA256[name])


def suite_path(name: str, data_dir: str | Path | None = None, download: bool = False) -> Path:
    """The file of suite ``name`` under ``data_dir`` (default ``$SYNLM_DATA_DIR``) in
    ``syntaxgym/test_suites``; with ``download`` a missing one is fetched and checked."""
    remote = suite_file(name)
    folder = Path(data_dir).expanduser() if data_dir else default_data_dir()
    path = folder / SUITE_FOLDER / remote.name
    if path.exists():
        return path
    if download:
        return remote.fetch(path)
    raise SuiteError(f"syntaxgym: missing {path}; pass --download (download=True) to fetch it "
                     f"from {remote.url}, or point {DATA_ENV} at a folder holding "
                     f"{SUITE_FOLDER / remote.name}")


def load_suites(names: Sequence[str] | None = None, data_dir: str | Path | None = None,
                download: bool = False) -> list[Suite]:
    """The named suites (default all 34 of the paper), read from ``suite_path``."""
    names = SUITES if names is None else names
    return [read_suite(suite_path(name, data_dir, download)) for name in names]


# ----------------------------------------------------------------------------- evaluation


def region_words(scorer: Scorer, condition: Condition) -> tuple[tuple[str, ...], ...]:
    """Each region's content as the words the model reads (``Scorer.words``); a region may
    yield none (an empty region, or punctuation a model without it drops)."""
    return tuple(tuple(scorer.words(content)) for content in condition.contents)


@dataclass(frozen=True)
class RegionMap:
    """Where a condition's words and its end of the sentence go: ``owners[i]``, the index of
    the region word i counts in; ``eos``, the region of the end of the sentence."""

    owners: tuple[int, ...]
    eos: int


def map_regions(words: Sequence[Sequence[str]], unknown: Sequence[bool],
                covers_end: Sequence[bool], heuristic: bool = True) -> RegionMap:
    """Words and the end of the sentence onto regions, as syntaxgym-core's runner maps a
    model's tokens (``agg_surprisals.py``).

    Its heuristic (``compute_mapping_heuristic``, the runner for every model but a Hugging
    Face one) walks the tokens along the regions' text, moving to the next region when a token
    uses up the current one's text:

    - a known word counts in its own region;
    - a run of unknown tokens swallows the text up to where the next known token matches and
      counts, whole, in the region where it starts; a run that ends the sentence takes the
      end-of-sentence token with it;
    - otherwise the end-of-sentence token goes to the region the walk has reached: the one
      after the last word's when that word ends its region's text and a region follows (for
      a model that drops punctuation, the ``"."`` region), else the last word's own region
      (region 0 when no region has a word).

    Its Hugging Face path (``heuristic=False``) assigns tokens by character offsets: each word
    counts in its own region, and no end-of-sentence token is added (``eos`` is then where
    the heuristic would put it, for a caller that asks for one).

    Args:
        words: each region's words, as ``region_words`` gives them.
        unknown: for each word of the sentence, whether the model read it as unknown.
        covers_end: for each region, whether its words reach the end of its text
            (``Scorer.covers_end``: no deleted punctuation trails the last word).
        heuristic: the heuristic walk (True) or the offsets (False).
    """
    owners = [index for index, region in enumerate(words) for _ in region]
    if not owners:
        return RegionMap((), 0)
    if heuristic:
        for i in range(1, len(owners)):
            if unknown[i] and unknown[i - 1]:
                owners[i] = owners[i - 1]
    last = owners[-1]
    if heuristic and unknown[-1]:
        eos = last
    else:
        eos = last + 1 if last + 1 < len(words) and covers_end[last] else last
    return RegionMap(tuple(owners), eos)


def region_surprisals(scored: ScoredSentence, regions: RegionMap, n_regions: int,
                      eos: bool, where: str) -> list[float]:
    """Each region's surprisal in nats: minus the summed log-probabilities of the words that
    count in it (``RegionMap.owners``) and, with ``eos``, of the end of the sentence in its
    region. A region with neither sums nothing: 0, as the reference's sum over no tokens."""
    if len(scored.word_log_probs) != len(regions.owners):
        raise ValueError(f"{where}: the scorer returned {len(scored.word_log_probs)} words for "
                         f"a sentence of {len(regions.owners)}")
    if eos and scored.eos_log_prob is None:
        raise InputError(f"{where}: the scorer gives no end-of-sentence probability; score "
                         "SyntaxGym without it (eos=False, --no-eos)")
    log_probs = [0.0] * n_regions
    for owner, log_prob in zip(regions.owners, scored.word_log_probs):
        log_probs[owner] += log_prob
    if eos:
        log_probs[regions.eos] += scored.eos_log_prob  # type: ignore[operator]
    return [0.0 - value for value in log_probs]


@dataclass(frozen=True)
class ItemResult:
    """One item: each condition's region surprisals (region number -> nats), each
    prediction's truth, the critical-region words read as unknown (in any condition), and
    the critical regions whose text the model reads as nothing (condition -> region numbers:
    punctuation a PTB model deletes; their surprisal is 0, so a prediction over them tests
    nothing). ``parsed`` False: a transition LM's beam found no tree for a condition's
    sentence; the item has no surprisals nor predictions and is counted apart."""

    item: int
    surprisals: dict[str, dict[int, float]]
    predictions: tuple[bool, ...]
    unknown_words: tuple[str, ...]
    empty_regions: dict[str, tuple[int, ...]]
    parsed: bool = True

    @property
    def correct(self) -> bool:
        if not self.parsed:
            raise ValueError(f"item {self.item}: no parse within the beam, neither right nor "
                             "wrong")
        return all(self.predictions)

    @property
    def unknown(self) -> bool:
        return bool(self.unknown_words)


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


@dataclass(frozen=True)
class SuiteResult:
    """A suite's items evaluated, and its accuracies: over the items with a parse (every
    item but those of ``no_parse_items``)."""

    suite: str
    items: tuple[ItemResult, ...]

    @property
    def scored(self) -> tuple[ItemResult, ...]:
        """The items with a parse (``ItemResult.parsed``)."""
        return tuple(item for item in self.items if item.parsed)

    @property
    def no_parse_items(self) -> int:
        """How many items have a sentence with no parse within the beam (left out)."""
        return len(self.items) - len(self.scored)

    @property
    def accuracy(self) -> float | None:
        """The share of items whose predictions all hold; None when no item has a parse."""
        return _mean([item.correct for item in self.scored]) if self.scored else None

    @property
    def in_vocabulary_items(self) -> int:
        """How many items have no unknown critical word."""
        return sum(not item.unknown for item in self.scored)

    @property
    def in_vocabulary_accuracy(self) -> float | None:
        """The accuracy over items with no unknown critical word; None when there are none."""
        known = [item.correct for item in self.scored if not item.unknown]
        return _mean(known) if known else None

    @property
    def unknown_share(self) -> float | None:
        """The share of items with an unknown word in a critical region."""
        return _mean([item.unknown for item in self.scored]) if self.scored else None

    @property
    def empty_region_items(self) -> int:
        """How many items read a critical region as nothing (``ItemResult.empty_regions``)."""
        return sum(bool(item.empty_regions) for item in self.scored)

    def summary(self) -> dict[str, Any]:
        return {"suite": self.suite, "items": len(self.items), "accuracy": self.accuracy,
                "in_vocabulary_accuracy": self.in_vocabulary_accuracy,
                "in_vocabulary_items": self.in_vocabulary_items,
                "unknown_share": self.unknown_share,
                "empty_region_items": self.empty_region_items,
                "no_parse_items": self.no_parse_items}

    def records(self) -> list[dict[str, Any]]:
        """One JSON-ready dict an item (one without a parse: ``no_parse``, and neither
        surprisals, predictions nor ``correct``)."""
        return [{"suite": self.suite, "item": item.item,
                 **({"surprisals": {condition: {str(r): value for r, value in regions.items()}
                                    for condition, regions in item.surprisals.items()},
                     "predictions": list(item.predictions), "correct": item.correct}
                    if item.parsed else {"no_parse": True}),
                 "unknown": item.unknown, "unknown_words": list(item.unknown_words),
                 "empty_regions": {c: list(r) for c, r in item.empty_regions.items()}}
                for item in self.items]


def _item_result(suite: Suite, critical: set[int], item: Item,
                 words: list[tuple[tuple[str, ...], ...]], scored: list[ScoredSentence],
                 covers_end: Any, eos: bool, heuristic: bool) -> ItemResult:
    surprisals: dict[str, dict[int, float]] = {}
    unknown: list[str] = []
    empty: dict[str, tuple[int, ...]] = {}
    for condition, condition_words, sentence in zip(item.conditions, words, scored):
        where = f"{suite.name} item {item.number} {condition.name}"
        if len(sentence.unknown) != sum(len(region) for region in condition_words):
            raise ValueError(f"{where}: the scorer returned {len(sentence.unknown)} words "
                             f"for a sentence of {sum(map(len, condition_words))}")
        regions = map_regions(condition_words, sentence.unknown,
                              [covers_end(c) for c in condition.contents], heuristic)
        if sentence.parsed:
            values = region_surprisals(sentence, regions, len(condition_words), eos, where)
            surprisals[condition.name] = dict(zip(condition.region_numbers, values))
        # an unknown word in a critical region of the text, wherever its surprisal counts
        numbers = condition.region_numbers
        own = [(w, numbers[index]) for index, region in enumerate(condition_words)
               for w in region]
        unknown += [w for (w, number), unk in zip(own, sentence.unknown)
                    if unk and number in critical]
        counted = set(regions.owners) | ({regions.eos} if eos else set())
        nothing = tuple(number for index, (number, content) in enumerate(
            zip(numbers, condition.contents))
            if number in critical and content.strip() and index not in counted)
        if nothing:
            empty[condition.name] = nothing
    unknown_words = tuple(dict.fromkeys(unknown))
    if not all(sentence.parsed for sentence in scored):
        return ItemResult(item.number, {}, (), unknown_words, empty, parsed=False)

    def surprisal(region: Region, condition: str) -> float:
        values = surprisals[condition]
        return sum(values.values()) if region == "*" else values[region]

    truths = tuple(bool(evaluate(p, surprisal)) for p in suite.predictions)
    return ItemResult(item.number, surprisals, truths, unknown_words, empty)


def _always(text: str) -> bool:
    return True


def maps_by_heuristic(scorer: Scorer) -> bool:
    """Whether syntaxgym-core's runner maps ``scorer``'s tokens onto regions by its heuristic
    walk (a scorer that does not say otherwise, ``MapsRegions``), not by offsets."""
    return not isinstance(scorer, MapsRegions) or scorer.syntaxgym_mapping == "heuristic"


def evaluate_suites(suites: Sequence[Suite], scorer: Scorer,
                    eos: bool | None = None) -> list[SuiteResult]:
    """Evaluate suites with one ``scorer.score`` call over every condition's sentence (the
    scorer batches); a sentence is its regions' words in order, scored once.

    A region's surprisal sums the words syntaxgym-core's runner counts in it, and the
    end-of-sentence token where it puts it (``map_regions``): its heuristic for a scorer
    whose ``syntaxgym_mapping`` is ``"heuristic"`` (the default, ``maps_by_heuristic``;
    lm-zoo's word-level models, which end each sentence with a token), its offsets for
    ``"offsets"`` (a Hugging Face model, no end-of-sentence token). ``eos``: None follows
    the reference; True or False forces the end of the sentence in or out.
    """
    heuristic = maps_by_heuristic(scorer)
    eos = heuristic if eos is None else eos
    covers_end = scorer.covers_end if isinstance(scorer, CoversEnd) else _always
    words = [[[region_words(scorer, c) for c in item.conditions] for item in suite.items]
             for suite in suites]
    sentences = [[w for region in condition for w in region]
                 for suite_words in words for item_words in suite_words
                 for condition in item_words]
    scored = iter(scorer.score(sentences))
    results = []
    for suite, suite_words in zip(suites, words):
        critical = set(suite.critical_regions)
        items = tuple(_item_result(suite, critical, item, item_words,
                                   [next(scored) for _ in item_words], covers_end, eos,
                                   heuristic)
                      for item, item_words in zip(suite.items, suite_words))
        results.append(SuiteResult(suite.name, items))
    return results


def evaluate_suite(suite: Suite, scorer: Scorer, eos: bool | None = None) -> SuiteResult:
    """Evaluate one suite (``evaluate_suites`` of one)."""
    return evaluate_suites([suite], scorer, eos)[0]


# ---------------------------------------------------------------------------- aggregation


def suite_tag(name: str) -> str:
    """A suite's tag: its name up to the first ``-``, ``_`` or digit (``npi_orc_any``: npi)."""
    return re.split(r"[-_0-9]", name)[0]


def suite_circuit(name: str) -> str | None:
    """The paper's circuit of a suite, None for a tag outside them."""
    return _TAG_CIRCUIT.get(suite_tag(name))


def is_excluded(name: str) -> bool:
    """Whether the paper leaves the suite out (``EXCLUDED_SUITES``)."""
    return EXCLUDED_SUITES.search(name) is not None


@dataclass(frozen=True)
class SGScore:
    """The paper's aggregation: the SG score (mean suite accuracy over the included suites),
    each circuit's mean suite accuracy, and the included suites' accuracies."""

    score: float
    circuits: dict[str, float]
    suites: dict[str, float]


def sg_score(accuracies: Mapping[str, float | Sequence[float]]) -> SGScore:
    """Aggregate suite accuracies (suite name -> accuracy, or one accuracy a seed, averaged
    first) as the paper does: excluded suites dropped, SG score and circuit scores as means
    of suite accuracies."""
    suites = {name: value if isinstance(value, (int, float)) else _mean(value)
              for name, value in sorted(accuracies.items()) if not is_excluded(name)}
    if not suites:
        raise InputError(f"no suite left to score after the exclusions from {sorted(accuracies)}")
    by_circuit: dict[str, list[float]] = defaultdict(list)
    for name, accuracy in suites.items():
        circuit = suite_circuit(name)
        if circuit is not None:
            by_circuit[circuit].append(accuracy)
    circuits = {c: _mean(by_circuit[c]) for c in CIRCUITS if c in by_circuit}
    return SGScore(_mean(list(suites.values())), circuits, suites)


def read_results_csv(path: str | Path) -> dict[str, dict[str, tuple[float, ...]]]:
    """The paper's item-level results (``model,suite,item,correct``; ``model`` is
    ``<architecture>_<corpus>_<seed>``, the seed after the last ``_``) as model -> suite ->
    the suite's accuracy under each seed (seeds in sorted order)."""
    path = Path(path)
    if not path.is_file():
        raise SuiteError(f"{path}: no such results file")
    rows: dict[str, dict[str, dict[str, list[bool]]]] = defaultdict(
        lambda: defaultdict(lambda: defaultdict(list)))
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.reader(f)
        header = next(reader, None)
        if header != ["model", "suite", "item", "correct"]:
            raise SuiteError(f"{path}:1: expected the header model,suite,item,correct, "
                             f"found {header}")
        for line, row in enumerate(reader, start=2):
            if len(row) != 4 or row[3] not in ("True", "False") or "_" not in row[0]:
                raise SuiteError(f"{path}:{line}: expected <model>_<seed>,suite,item,"
                                 f"True|False, found {','.join(row)}")
            model, seed = row[0].rsplit("_", 1)
            rows[model][row[1]][seed].append(row[3] == "True")
    if not rows:
        raise SuiteError(f"{path}: no results")
    return {model: {suite: tuple(_mean(seeds[s]) for s in sorted(seeds))
                    for suite, seeds in suites.items()}
            for model, suites in rows.items()}
