"""Surprisals in the field's file formats, from what synlm computes (natural logarithms).

- ``token_table``: lm-zoo's ``get-surprisals`` output, the per-token input of SyntaxGym's
  reference runner (``syntaxgym-core``): tab-separated ``sentence_id``, ``token_id``,
  ``token``, ``surprisal``, a header line, ids counted from 1, one row a model token
  (``ScoredSentence.tokens``) and then the end-of-sentence row where the scorer gives its
  probability; surprisal -log_base p to 6 places, in bits by default as lm-zoo writes it.
- ``region_table``: SyntaxGym's region-level measure, one CSV row a region of a condition of
  an item: ``suite``, ``item_number``, ``condition_name``, ``region_number``, ``metric``
  (``sum``: the region's summed surprisal, the measure the suites' predictions compare),
  ``value`` and ``unit`` (``bits`` by default, as SyntaxGym reports them; synlm's records
  hold nats). A region's surprisal is as the records hold it: its words', with the end of
  the sentence in the region syntaxgym-core's mapping puts it when the evaluation counted it
  (``BenchmarkResult.convention``), 0 for a region that reads nothing.

The first token. In lm-zoo's files the first token's surprisal is 0 (the reference runner's
fixtures: ``1  1  I  0.000000``): lm-zoo's models do not score the first word (and the
fixtures' end-of-sentence rows read 0 too). synlm scores every word from its start context
(``<eos>``, as its models are trained), so ``token_table`` writes the first token's true
surprisal, the same number synlm's region sums contain, and the end's log p(end | sentence).
A region sum computed from an lm-zoo file therefore differs from synlm's in the first word's
region by that word's surprisal (a prediction that compares that region across conditions
starting with the same word is unaffected).

Write either table whole or not at all with ``synlm.data.vocab.atomic_write_text`` (a
temporary file beside the target, then a rename).
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Mapping, Sequence
from typing import Any

from synlm.errors import InputError
from synlm.tse.scores import ScoredSentence

__all__ = ["REGION_COLUMNS", "TOKEN_COLUMNS", "region_table", "token_table", "unit_name"]

#: The header of lm-zoo's surprisal table.
TOKEN_COLUMNS = ("sentence_id", "token_id", "token", "surprisal")
#: The columns of the region table.
REGION_COLUMNS = ("suite", "item_number", "condition_name", "region_number", "metric", "value",
                  "unit")


def unit_name(base: float) -> str:
    """The unit of -log_base p: ``bits`` (2), ``nats`` (e), else ``log<base>``."""
    if base <= 0 or base == 1:
        raise InputError(f"a logarithm's base must be positive and not 1, got {base}")
    return {2: "bits", math.e: "nats"}.get(base, f"log{base:g}")


def _surprisal(log_prob: float, base: float) -> str:
    """-log_base p from a natural log-probability, to 6 places (``+ 0.0`` turns -0.0,
    the surprisal of a certain token, into 0.0)."""
    return f"{-log_prob / math.log(base) + 0.0:.6f}"


def token_table(scored: Sequence[ScoredSentence], base: float = 2,
                eos_token: str = "<eos>") -> str:
    """lm-zoo's surprisal table of ``scored`` sentences: ``sentence_id``, ``token_id``,
    ``token``, ``surprisal`` (-log_base p; bits by default), tab-separated under a header,
    ids from 1; each sentence's tokens, then ``eos_token`` (the scorer's end-of-sentence
    token) where its ``eos_log_prob`` is not None. Every token's true surprisal, the first
    one's included (lm-zoo writes 0 there: the module's docs). A sentence a transition LM
    has no parse for (``ScoredSentence.parsed`` False) has no rows; the ids keep counting."""
    unit_name(base)
    lines = ["\t".join(TOKEN_COLUMNS)]
    for s, sentence in enumerate(scored, start=1):
        if not sentence.parsed:
            continue
        if len(sentence.tokens) != len(sentence.token_log_probs):
            raise InputError(f"sentence {s}: {len(sentence.tokens)} tokens but "
                             f"{len(sentence.token_log_probs)} token log-probabilities")
        rows = list(zip(sentence.tokens, sentence.token_log_probs))
        if sentence.eos_log_prob is not None:
            rows.append((eos_token, sentence.eos_log_prob))
        for t, (token, log_prob) in enumerate(rows, start=1):
            if any(c in token for c in "\t\n\r"):
                raise InputError(f"sentence {s}, token {t}: {token!r} holds a tab or a line "
                                 f"break, which the table cannot hold")
            lines.append(f"{s}\t{t}\t{token}\t{_surprisal(log_prob, base)}")
    return "\n".join(lines) + "\n"


def region_table(records: Sequence[Mapping[str, Any]], base: float = 2) -> str:
    """SyntaxGym's region-level table of item ``records`` (``SuiteResult.records()``, or a
    SyntaxGym ``BenchmarkResult``'s: ``suite``, ``item``, ``surprisals`` {condition: {region
    number: nats}}), as CSV with the columns ``REGION_COLUMNS``: a row a region, items in
    record order, conditions in their order, regions by number; ``metric`` ``sum``, ``value``
    the region's surprisal in ``unit`` (-log_base p; ``bits`` by default) to 6 places.
    Records that name their ``model`` (several models in one table) get a first column
    ``model``."""
    unit = unit_name(base)
    models = bool(records) and "model" in records[0]
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow((["model"] if models else []) + list(REGION_COLUMNS))
    for number, record in enumerate(records):
        missing = [k for k in ("suite", "item", "surprisals") if k not in record]
        if missing:
            raise InputError(f"record {number} is not a SyntaxGym item record: no "
                             f"{', '.join(missing)}")
        for condition, regions in record["surprisals"].items():
            for region, nats in sorted(regions.items(), key=lambda kv: int(kv[0])):
                writer.writerow(([record["model"]] if models else [])
                                + [record["suite"], record["item"], condition, int(region),
                                   "sum", _surprisal(-nats, base), unit])
    return out.getvalue()

