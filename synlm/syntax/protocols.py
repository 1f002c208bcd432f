"""Evaluation protocols of unsupervised parsing: how a gold tree is prepared for scoring
(docs/evaluation.md). Light: no torch, so that ``synlm parse`` checks the trees it is given
against the gold sentences before torch loads; ``synlm.metrics.parsing`` scores them."""

from __future__ import annotations

from dataclasses import dataclass

from nltk import Tree

from synlm.syntax.trees import PALM_TAGS, WORD_TAGS, clean_tree


@dataclass(frozen=True)
class Protocol:
    """How gold trees are prepared and short sentences scored.

    ``keep_tags``: POS tags kept (others, punctuation included, are removed with the
    constituents they leave empty). ``min_length``: sentences with fewer words (after removal)
    are skipped; 1- and 2-word sentences have no non-trivial span, so when kept they score
    F1 = 1 (ON-LSTM convention). ``max_length``: longer sentences are skipped too.

    ``kim``: count as Kim et al. 2019's ``compare_trees.py`` does (``kim_spans``, and
    ``sentence_f1`` with ``KIM_EPS``, of ``synlm.metrics.parsing``): only the root's own
    span is left out, so a constituent below the root over the whole sentence (a unary chain) still
    counts; corpus F1 has no 1e-8; each gold label occurrence below the root counts for its
    recall, WH phrases as their base (WHNP as NP)."""

    name: str
    keep_tags: frozenset[str]
    min_length: int = 1
    max_length: int | None = None
    kim: bool = False


PROTOCOLS = {
    "onlstm": Protocol("onlstm", WORD_TAGS),  # ON-LSTM / PRPN / SYD test_phrase_grammar.py
    # PaLM keeps $ and # (docs/reference-implementations.md §4.5)
    "palm": Protocol("palm", PALM_TAGS),
    "urnng": Protocol("urnng", WORD_TAGS, min_length=2),  # length-1 sentences skipped
    # compound-pcfg process_ptb.py + compare_trees.py (length_cutoff 150)
    "kim": Protocol("kim", WORD_TAGS, min_length=2, max_length=150, kim=True),
}


def evaluation_tree(tree: Tree, protocol: Protocol | str = "onlstm") -> Tree | None:
    """The gold tree as scored under ``protocol``: punctuation/empty elements removed by POS,
    function tags stripped; ``None`` if fewer than ``protocol.min_length`` words remain (or
    more than its ``max_length``)."""
    p = PROTOCOLS[protocol] if isinstance(protocol, str) else protocol
    out = clean_tree(tree, keep_tags=p.keep_tags)
    if out is None or len(out.leaves()) < p.min_length:
        return None
    return None if p.max_length is not None and len(out.leaves()) > p.max_length else out
