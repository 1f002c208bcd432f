"""``synlm parse``: score baseline or model-induced trees against a treebank, or write the
trees a model induces for raw text. See docs/evaluation.md for the protocols.

    synlm parse --baseline right-branching --treebank PATH [--protocol onlstm] [--max-length 10]
    synlm parse --ckpt_path CKPT --treebank PATH [--distances lm] [--layer 1] [--biased]
    synlm parse --ckpt_path CKPT --input TEXT --output FILE
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from nltk import Tree

from synlm.data.treebanks import normalize_word
from synlm.metrics.parsing import PROTOCOLS, ParsingF1, evaluation_tree
from synlm.syntax import BASELINES, ReaderError, baseline_tree, distances_to_tree, read_trees
from synlm.syntax.trees import to_bracket


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="synlm parse", description=__doc__.split("\n\n")[0])
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--baseline", choices=BASELINES, help="a trivial tree shape")
    src.add_argument("--ckpt_path", help="a SyntaxLM checkpoint whose distances give trees")
    p.add_argument("--treebank", help="a .mrg file, a directory of them, an LDC WSJ dir or the "
                   "NLTK treebank.zip")
    p.add_argument("--sections", type=int, nargs="*", help="LDC WSJ sections (e.g. 23)")
    p.add_argument("--protocol", choices=sorted(PROTOCOLS), default="onlstm")
    p.add_argument("--max-length", type=int, help="keep sentences of at most this many words "
                   "after punctuation removal (10: WSJ10, 40: WSJ40)")
    p.add_argument("--seed", type=int, default=0, help="for --baseline random")
    p.add_argument("--distances", default="lm", help="distance set of the model (lm, syd, ..)")
    p.add_argument("--layer", default="middle", help="layer index, 'middle' (L // 2, ON-LSTM's "
                   "layer 1 of 3) or 'mean'")
    p.add_argument("--biased", action="store_true", help="ON-LSTM build_tree (Algorithm 3) "
                   "instead of the unbiased split (Algorithm 2)")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--input", help="raw text, one whitespace-tokenised sentence per line")
    p.add_argument("--output", help="write one bracketed tree per line here")
    return p


def load_model(path: str) -> Any:
    """``SyntaxLM.load_from_checkpoint(path, map_location="cpu")`` in eval mode."""
    from synlm.lm import SyntaxLM

    model = SyntaxLM.load_from_checkpoint(path, map_location="cpu")
    model.eval()
    return model


def model_trees(model: Any, sentences: Sequence[Sequence[str]], distances: str = "lm",
                layer: str | int = "middle", biased: bool = False,
                batch_size: int = 32) -> list[Tree]:
    """Trees induced by ``model.distance_sets`` on rows ``[<eos>, w1..wn]``; the values at
    inputs 1..n are the per-word distances of ``distances_to_tree``. Words are mapped to the
    LM's vocabulary as in PTB-Concat-Syn (lowercase, numbers -> N)."""
    out: list[Tree | None] = [None] * len(sentences)
    order = sorted(range(len(sentences)), key=lambda i: len(sentences[i]))
    eos = model.vocab.encode(["<eos>"])[0]
    for start in range(0, len(order), batch_size):
        chunk = order[start:start + batch_size]
        T = max(len(sentences[i]) for i in chunk) + 1
        tokens = torch.full((len(chunk), T), eos, dtype=torch.long)
        for b, i in enumerate(chunk):
            ids = model.vocab.encode(["<eos>"] + [normalize_word(w) for w in sentences[i]])
            tokens[b, :len(ids)] = torch.tensor(ids)
        with torch.no_grad():
            sets = model.distance_sets(tokens)
        if distances not in sets:
            raise SystemExit(f"synlm parse: the model has no distance set {distances!r}; "
                             f"it has {sorted(sets)}")
        d = sets[distances].float()  # (L, B, T)
        if layer == "mean":
            values = d.mean(0)
        else:
            values = d[d.shape[0] // 2 if layer == "middle" else int(layer)]
        values = values.cpu().numpy()
        for b, i in enumerate(chunk):
            n = len(sentences[i])
            out[i] = distances_to_tree(sentences[i], values[b, 1:n + 1], biased=biased)
    return out  # type: ignore[return-value]


def _number(x: torch.Tensor, scale: float = 1.0) -> float | None:
    v = float(x) * scale
    return None if math.isnan(v) else round(v, 2)


def evaluate(preds: Sequence[Tree], golds: Sequence[Tree]) -> dict[str, float | None]:
    """``ParsingF1`` figures, F1s, recalls and split percentages in percent."""
    metric = ParsingF1()
    metric.update(preds, golds)
    out = {}
    for k, v in metric.compute().items():
        percent = k.startswith(("uf1", "precision", "recall"))
        out[k] = _number(v, 100.0 if percent else 1.0)
    out["n_sentences"] = int(metric.n_sentences)
    return out


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``synlm parse``; prints one JSON object on stdout, returns the exit code."""
    args = build_parser().parse_args(argv)
    rng = np.random.default_rng(args.seed)
    model = load_model(args.ckpt_path) if args.ckpt_path else None

    def induce(sentences: list[list[str]]) -> list[Tree]:
        if model is not None:
            return model_trees(model, sentences, args.distances, args.layer, args.biased,
                               args.batch_size)
        return [baseline_tree(words, args.baseline, rng) for words in sentences]

    if args.input:
        lines = Path(args.input).read_text(encoding="utf-8").splitlines()
        sentences = [line.split() for line in lines if line.split()]
        trees = induce(sentences)
        if args.output:
            Path(args.output).write_text("".join(to_bracket(t) + "\n" for t in trees),
                                         encoding="utf-8")
        print(json.dumps({"n_sentences": len(trees), "output": args.output}))
        return 0
    if not args.treebank:
        print("synlm parse: give --treebank PATH (to score) or --input TEXT", file=sys.stderr)
        return 2
    try:
        raw = read_trees(args.treebank, sections=args.sections)
    except (ReaderError, FileNotFoundError) as e:
        print(f"synlm parse: {e}", file=sys.stderr)
        return 1
    golds = [g for g in (evaluation_tree(t, args.protocol) for t, _ in raw) if g is not None]
    if args.max_length:
        golds = [g for g in golds if len(g.leaves()) <= args.max_length]
    if not golds:
        print(f"synlm parse: no sentence of {args.treebank} passes the filters", file=sys.stderr)
        return 1
    preds = induce([g.leaves() for g in golds])
    if args.output:
        Path(args.output).write_text("".join(to_bracket(t) + "\n" for t in preds),
                                     encoding="utf-8")
    result: dict[str, Any] = {
        "treebank": str(args.treebank),
        "trees": args.baseline or f"{args.ckpt_path}:{args.distances}:{args.layer}:"
                                  f"{'biased' if args.biased else 'unbiased'}",
        "protocol": args.protocol,
        "max_length": args.max_length,
        **evaluate(preds, golds),
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
