"""Which gold ``Batch`` fields ``SynLMDataModule`` serves a head that trains on them
(``SyntaxHead.needs_gold``), and the one-line refusal of a request it cannot serve
(``SynLMDataModule.request``): the field, what it needs (a gold kind of the corpus, training
in sentence mode, gold trees), and the flag to set."""

from __future__ import annotations

from synlm.data.batching import PATH_FIELDS
from synlm.data.corpora import Corpus
from synlm.data.layout import EXAMPLES
from synlm.outputs import GOLD_FIELDS

#: The gold kind (``Corpus.gold``) each gold ``Batch`` field of the stream is built from, and
#: the kind of tree of each path-length field (``PATH_FIELDS``).
FIELD_KINDS = {"distances": "constituency", "spans": "constituency", "dep_targets": "dependency",
               **{name: kind for name, (kind, _) in PATH_FIELDS.items()}}

#: The fields built row by row from each training sentence, which only training in sentence
#: mode serves: the rows' gold ``Sentence`` (``trees``) and their path lengths.
ROW_FIELDS = frozenset({"trees", *PATH_FIELDS})

#: The gold kind a head that trains on a field needs: ``FIELD_KINDS``'s, and for ``trees`` (a
#: head trains on the rows' constituency trees, TreeReg) constituency.
TRAINED_KINDS = {**FIELD_KINDS, "trees": "constituency"}


def servable(corpus: Corpus, mode: str) -> frozenset[str]:
    """The gold fields a head can train on with ``corpus`` trained in ``mode``: each field
    whose kind the corpus has (``TRAINED_KINDS``), the ``ROW_FIELDS`` only in sentence mode."""
    return frozenset(f for f, kind in TRAINED_KINDS.items()
                     if kind in corpus.gold and (mode == "sentence" or f not in ROW_FIELDS))


def refusal(fields: frozenset[str], who: str, corpus: Corpus, mode: str,
            tree_source: str) -> str | None:
    """Why ``who`` cannot train on ``fields`` (one line), or None: a field the corpus or the
    training ``mode`` cannot serve, or path lengths under random trees (``tree_source``), which
    would still be the gold trees'."""
    missing = fields - servable(corpus, mode)
    if missing:
        return missing_gold(frozenset(missing), who, corpus, mode)
    if fields & PATH_FIELDS.keys() and tree_source != "gold":
        return (f"{who} reads the gold trees' path lengths, which data.tree_source: "
                f"{tree_source} would not replace; use tree_source: gold")
    return None


def missing_gold(missing: frozenset[str], who: str, corpus: Corpus, mode: str) -> str:
    """One line: who needs which gold kind (and fields), what the corpus has, what to do
    (``mode``: the training one)."""
    name, has = type(corpus).__name__, corpus.gold
    unknown = sorted(missing - GOLD_FIELDS)
    if unknown:
        return (f"{who} needs {unknown}, which are not gold fields; gold fields are "
                f"{sorted(GOLD_FIELDS)}")
    has_text = f"has only {' and '.join(sorted(has))} gold" if has else "has no gold syntax"
    rows = sorted(f for f in missing & ROW_FIELDS if TRAINED_KINDS[f] in has)
    if rows:  # the kind is there, the training mode not
        named = ", ".join("gold sentences (trees)" if f == "trees" else f for f in rows)
        serves = ("only training in sentence mode serves (data.eval_mode does not)"
                  if "trees" in rows else "training in sentence mode serves")
        return (f"{who} needs {named}, which {serves}, but data.mode is {mode}; "
                "set data.mode: sentence")
    also = "; trees also need data.mode: sentence" if "trees" in missing and mode != "sentence" \
        else ""
    if missing == {"trees"}:
        return (f"{who} needs gold sentences (trees) but {name} {has_text}; it trains on "
                f"constituency trees: set data.corpus to {EXAMPLES['constituency']}{also}")
    kinds = sorted({TRAINED_KINDS[f] for f in missing})
    use = EXAMPLES[kinds[0]] if len(kinds) == 1 else EXAMPLES["constituency"]
    return (f"{who} needs {' and '.join(kinds)} gold ({', '.join(sorted(missing))}) but {name} "
            f"{has_text}; use {use}{also}")
