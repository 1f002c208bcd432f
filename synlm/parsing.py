"""What a model induces, as trees and heads, scored against gold: the library behind
``synlm parse`` (docs/evaluation.md), also read by generation's vocabulary check."""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from nltk import Tree

from synlm.capabilities import InducesStructures, Parses, model_name, require
from synlm.data.normalization import encode_words, normalizer
from synlm.data.subwords import SubwordVocab
from synlm.errors import InputError
from synlm.metrics.attachment import DependencyAccuracy
from synlm.metrics.parsing import ParsingF1
from synlm.metrics.structures import decode_heads, decode_trees
from synlm.syntax import Sentence
from synlm.syntax.head_rules import evaluation_dependencies
from synlm.tse.scoring import ModelScorer, sentence_rows

#: The share of unknown words above which a command warns that the model meets text outside
#: its vocabulary.
UNKNOWN_WARNING = 0.1


def unknown_words(model: Any, sentences: Sequence[Sequence[str]], what: str,
                  prog: str = "synlm parse") -> float:
    """The share of the words of ``sentences`` (treebank or generated words, each normalised
    as the training corpus normalised its words) that ``model`` reads as unknown, as synlm's
    one sentence scorer counts them (``ModelScorer.encode``: ``<unk>`` or an unknown-word
    class; none for a subword vocabulary), with one warning line on stderr above
    ``UNKNOWN_WARNING``. (Running text, as the benchmarks have it, is normalised as text
    instead: ``ModelScorer.words``.)"""
    if isinstance(model.vocab, SubwordVocab):
        return 0.0
    scorer, normalize = ModelScorer(model), normalizer(model.normalization)
    flags = [unknown for words in sentences
             for unknown in scorer.encode([normalize(w) for w in words])[2]]
    share = sum(flags) / len(flags) if flags else 0.0
    if share > UNKNOWN_WARNING:
        print(f"{prog}: warning: {share:.0%} of {what} are outside the model's vocabulary "
              "(read as <unk>): it was trained on other text", file=sys.stderr)
    return round(share, 4)


#: What ``synlm parse`` calls the trees of a transition LM (an RNNG): its beam's best.
BEAM = "beam"


def default_structure(model: Any) -> str:
    """The model's headline structure: the first head's if a head induces one, else the
    backbone's first (``SyntaxLM.structures`` is in that order); a transition LM's
    ``BEAM``."""
    if isinstance(model, Parses):
        return BEAM
    if not isinstance(model, InducesStructures) or not model.structures:
        raise InputError(f"the checkpoint's model ({model_name(model)}) induces no structure")
    return next(iter(model.structures))


def check_structure(model: Any, name: str) -> str:
    """``name``'s kind; an unknown name is an ``InputError`` listing the valid ones, a
    model that induces none one naming its class."""
    if isinstance(model, Parses):
        if name != BEAM:
            raise InputError(f"the model has no structure {name!r}; a transition LM gives "
                             f"its beam search's best trees: {BEAM}")
        return "trees"
    require(model, InducesStructures, f"--structure {name}")
    if name not in model.structures:
        valid = ", ".join(f"{n} ({s.kind})" for n, s in sorted(model.structures.items()))
        raise InputError(f"the model has no structure {name!r}; it has: {valid or 'none'}")
    return model.structures[name].kind


def _batches(model: Any, sentences: Sequence[Sequence[str]], batch_size: int
             ) -> list[tuple[list[int], torch.Tensor, torch.Tensor]]:
    """Rows ``[<eos>, w1..wn, <eos>]`` in the model's vocabulary (words normalised as its
    corpus), by increasing length, with their lengths n + 1 (B,): the trailing ``<eos>``
    gives a causal model's spans ending at w_n a row, and a bidirectional backbone reads
    ``[<eos>, w1..wn]`` (``SyntaxModel.induce``'s ``lengths``), the rest as padding."""
    if isinstance(model.vocab, SubwordVocab):  # trees would be over subwords
        raise InputError("trees are induced over words, by a word-level model; this "
                         "model's vocabulary is subwords (data.subwords)")
    order = sorted(range(len(sentences)), key=lambda i: len(sentences[i]))
    out = []
    for start in range(0, len(order), batch_size):
        chunk = order[start:start + batch_size]
        rows = encode_words(model.vocab, model.normalization, [sentences[i] for i in chunk])
        lengths = torch.tensor([len(sentences[i]) + 1 for i in chunk])
        out.append((chunk, sentence_rows(rows, model.vocab.eos_id), lengths))
    return out


def model_trees(model: Any, sentences: Sequence[Sequence[str]], structure: str,
                layer: str | int = "middle", biased: bool = False,
                batch_size: int = 32) -> list[Tree]:
    """Trees the model's ``structure`` (kind distances or spans) induces for ``sentences``;
    a transition LM's best trees (``structure`` ``BEAM``)."""
    kind = check_structure(model, structure)
    if kind == "trees":
        return model.parse(sentences)
    if kind not in ("distances", "spans"):
        raise InputError(f"{structure!r} is of kind {kind}, which gives heads, not trees: "
                         "score it on a CoNLL-U --treebank")
    out: list[Tree | None] = [None] * len(sentences)
    for chunk, tokens, lengths in _batches(model, sentences, batch_size):
        values = model.induce(tokens, lengths)[structure].float()
        if kind == "distances" and layer == "mean":
            values, layer_index = values.mean(0, keepdim=True), 0
        elif kind == "distances":
            layer_index = values.shape[0] // 2 if layer == "middle" else int(layer)
        rows = [(b, Sentence(list(sentences[i]))) for b, i in enumerate(chunk)]
        keep = [np.ones(len(sentences[i]), dtype=bool) for i in chunk]
        trees = decode_trees(kind, values, rows, keep, biased)
        for i, tree in zip(chunk, trees[layer_index if kind == "distances" else 0]):
            out[i] = tree
    return out  # type: ignore[return-value]


def model_heads(model: Any, sentences: Sequence[Sequence[str]], structure: str,
                batch_size: int = 32, decoder: str = "argmax") -> list[list[int]]:
    """Heads (1-based, 0 = ROOT) the model's arc ``structure`` induces for ``sentences``,
    decoded by ``decoder`` (``synlm.metrics.arcs.ARC_DECODERS``)."""
    out: list[list[int]] = [[] for _ in sentences]
    for chunk, tokens, lengths in _batches(model, sentences, batch_size):
        values = model.induce(tokens, lengths)[structure]
        for b, i in enumerate(chunk):
            out[i] = decode_heads(values[b], len(sentences[i]), decoder)
    return out


def rounded(x: torch.Tensor | float, scale: float = 1.0) -> float | None:
    """``x`` times ``scale`` to two places; None for NaN (a figure with nothing to count)."""
    v = float(x) * scale
    return None if math.isnan(v) else round(v, 2)


def evaluate(preds: Sequence[Tree], golds: Sequence[Tree],
             protocol: str = "onlstm") -> dict[str, float | None]:
    """``ParsingF1`` figures under ``protocol``, F1s, recalls and split percentages in
    percent."""
    metric = ParsingF1(protocol=protocol)
    metric.update(preds, golds)
    out = {}
    for k, v in metric.compute().items():
        percent = k.startswith(("uf1", "precision", "recall"))
        out[k] = rounded(v, 100.0 if percent else 1.0)
    out["n_sentences"] = int(metric.n_sentences)
    return out


def dependency_accuracy(preds: Sequence[Sequence[int]], golds: Sequence[Sequence[int]],
                        words: Sequence[Sequence[str]],
                        gold_words: Sequence[Sequence[str]] | None = None
                        ) -> dict[str, float | int | None]:
    """``DependencyAccuracy``'s directed and undirected figures in percent, with the
    sentences and words they count."""
    metric = DependencyAccuracy()
    metric.update(preds, golds, words, gold_words)
    return {**{k: rounded(v, 100.0) for k, v in metric.compute().items()},
            "n_sentences": metric.n_sentences, "n_words": metric.n_words}


def tree_dependency_scores(model: Any, structure: str, trees: Sequence[Tree],
                           protocol: str = "onlstm", rules: str = "yamada",
                           max_length: int | None = None, batch_size: int = 32,
                           converted: Sequence[tuple[list[str], list[int]]] | None = None,
                           decoder: str = "argmax") -> dict[str, float | int | None] | None:
    """``dependency_accuracy`` of the heads the arc ``structure`` induces (decoded by
    ``decoder``) for the words of ``trees`` that ``protocol`` keeps, against their heads by
    the head table ``rules`` or a converter's (``converted``: its words and heads of each
    tree; ``synlm.syntax.head_rules``), with the share of unknown words; None when no tree
    passes ``protocol`` and ``max_length``."""
    gold = evaluation_dependencies(trees, protocol, rules, max_length, converted)
    if not gold.words:
        return None
    preds = model_heads(model, gold.words, structure, batch_size, decoder)
    return {**dependency_accuracy(preds, gold.heads, gold.words, gold.gold_words),
            "unknown_share": unknown_words(model, gold.words, "the treebank's words")}
