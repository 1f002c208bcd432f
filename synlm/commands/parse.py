"""``synlm parse``: score baseline or model-induced trees against a treebank, or write the
trees a model induces for raw text. See docs/evaluation.md for the protocols.

    synlm parse --baseline right-branching --treebank PATH [--protocol onlstm] [--max-length 10]
    synlm parse --ckpt_path CKPT --treebank PATH [--structure lm] [--layer 1] [--biased]
    synlm parse --ckpt_path CKPT --treebank FILE.conllu --structure NAME   (arcs: UAS)
    synlm parse --ckpt_path CKPT --treebank PATH --structure NAME [--head-rules yamada]
        [--gold-heads CONVERTED.conllx] [--arcs-decoder tree]   (arcs: DDA and UDA)
    synlm parse --ckpt_path CKPT --input TEXT [--output FILE] [--format pretty]
    synlm parse --baseline balanced --treebank PATH --show 3 [--format pretty|svg|json]
    synlm parse --ckpt_path CKPT --list-structures
    synlm parse --config CONFIG --seeds 25 --treebank PATH   (untrained models: mean and std)
    synlm parse --predicted TREES --treebank PATH [--protocol kim]   (another system's trees)

A checkpoint's structures are what its backbone and heads declare (``SyntaxLM.structures``);
each is decoded by its kind: distances and spans into trees scored by UF1, arcs into heads
scored by UAS against CoNLL-U heads, or by directed and undirected accuracy against the heads
of constituency trees (``synlm.syntax.head_rules``). Words are normalised as the training
corpus was (saved in the checkpoint). Trees are written as ``--format`` says
(docs/visualisation.md). A transition LM's beam can find no tree for a sentence ("no parse
within the beam"): its line is empty (json: ``"tree": null``), a line on stderr counts such
sentences, and a scored treebank leaves them out of the F1 and counts them (``no_parse``).
``--predicted``'s trees are read and checked against the gold sentences before torch loads
(``synlm.syntax.predicted``).

One module because every source of structures (a baseline, a checkpoint, untrained models,
another system's trees) is scored against the same treebank under the same flags, and the
flags' checks, the writers of trees and the scorers of each kind share them.

This module imports only the light parts of synlm at the top, so that ``--help`` and a wrong
flag answer before torch, nltk or matplotlib is imported; the model, metrics, parsing, tree
and drawing modules are imported by the functions that use them.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from synlm import errors
from synlm.capabilities import Parses, Searches, require
from synlm.errors import InputError, SynLMError, report
from synlm.runtime.arguments import CommandParser, add_memory_budget
from synlm.runtime.threads import configure_threads
from synlm.syntax.shapes import BASELINES

if TYPE_CHECKING:
    from nltk import Tree

    from synlm.syntax.readers import GoldTreebank

#: How ``--format`` writes trees: one bracketed tree per line, nltk's text drawing (a blank
#: line after each), one SVG picture per sentence (a folder), one JSON object per line.
FORMATS = ("bracket", "pretty", "svg", "json")
#: ``--protocol``: the names of ``synlm.metrics.parsing.PROTOCOLS`` (that module imports
#: torch; a test keeps the two equal).
PROTOCOLS = ("kim", "onlstm", "palm", "urnng")
#: ``--head-rules``: the names of ``synlm.syntax.head_rules.HEAD_RULES`` (a test keeps the two
#: equal).
HEAD_RULES = ("collins", "yamada")
#: ``--arcs-decoder``: ``synlm.metrics.arcs.ARC_DECODERS`` (a test keeps the two equal).
ARC_DECODERS = ("argmax", "tree")


def build_parser() -> argparse.ArgumentParser:
    p = CommandParser("synlm parse", __doc__.split("\n\n")[0])
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--baseline", choices=BASELINES, help="a trivial tree shape")
    src.add_argument("--ckpt_path", help="a SyntaxLM checkpoint whose structures give trees")
    src.add_argument("--config", help="a training config: score the trees of the model it "
                     "builds, untrained (randomly initialised; the vocabulary from its data)")
    src.add_argument("--predicted", metavar="FILE", help="score these trees: one bracketed "
                     "tree a line (labels ignored), one for each sentence of --treebank that "
                     "--protocol and --max-length keep, in its order")
    p.add_argument("--seeds", type=int, default=1, help="--config: initialise this many "
                   "models (seeds 0..N-1) and report each figure's mean and '_std'")
    p.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE",
                   help="--config: overrides, e.g. model.backbone.init_args.hidden_size=64")
    p.add_argument("--treebank", help="a .mrg file, a directory of them, an LDC WSJ dir or the "
                   "NLTK treebank.zip")
    p.add_argument("--sections", type=int, nargs="*", help="LDC WSJ sections (e.g. 23)")
    p.add_argument("--protocol", choices=PROTOCOLS, default="onlstm")
    p.add_argument("--max-length", type=int, help="keep sentences of at most this many words "
                   "after punctuation removal (10: WSJ10, 40: WSJ40)")
    p.add_argument("--head-rules", choices=HEAD_RULES, default="yamada",
                   help="an arcs structure on constituency trees: the head table that gives "
                   "the gold heads (yamada: Yamada & Matsumoto's, as Penn2Malt; collins)")
    p.add_argument("--gold-heads", metavar="FILE", help="an arcs structure on constituency "
                   "trees: the gold heads a converter wrote for --treebank's trees instead "
                   "(CoNLL-X or CoNLL-U, one sentence a tree, traces left out; e.g. CoreNLP's "
                   "Stanford dependencies, as StructFormer and UDGN score)")
    p.add_argument("--arcs-decoder", choices=ARC_DECODERS, default=None,
                   help="an arcs structure: each word's head is the argmax of its row "
                   "(argmax, the default; StructFormer's evaluation) or the best "
                   "single-rooted maximum spanning tree (tree: Chu-Liu-Edmonds, UDGN's)")
    p.add_argument("--seed", type=int, default=0, help="for --baseline random")
    p.add_argument("--structure", help="which of the checkpoint's structures (see "
                   "--list-structures); default: the first head's, else the backbone's")
    p.add_argument("--list-structures", action="store_true",
                   help="print the checkpoint's structures (name and kind) and exit")
    p.add_argument("--layer", default="middle", help="distances: layer index, 'middle' "
                   "(L // 2, ON-LSTM's layer 1 of 3) or 'mean'")
    p.add_argument("--biased", action="store_true", help="ON-LSTM build_tree (Algorithm 3) "
                   "instead of the unbiased split (Algorithm 2)")
    p.add_argument("--search", choices=("beam", "particles"), default="beam",
                   help="a transition LM's trees: its beam search, or particle filtering "
                   "(docs/models/rnng.md)")
    p.add_argument("--particles", type=int, default=None, metavar="N",
                   help="--search particles: particles a sentence (the released 10000)")
    add_memory_budget(p)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--input", help="a text file, one whitespace-tokenised sentence per line "
                   "(- : standard input)")
    p.add_argument("--output", help="write the trees here in --format (without it, --input's "
                   "trees go to stdout); svg: a folder of NNNN.svg, one per sentence; arcs: "
                   "the heads, a sentence a line")
    p.add_argument("--format", choices=FORMATS, default="bracket",
                   help="bracket: one bracketed tree per line; pretty: nltk's text drawing; "
                   "svg: one picture per sentence (--treebank: beside its gold tree); json: "
                   "one object per line (words, tree, and gold for --show)")
    p.add_argument("--show", type=int, default=0, metavar="N", help="--treebank: the first N "
                   "predicted trees beside their gold trees in --format, on stdout before the "
                   "score line (svg: the only pictures written to --output)")
    return p


def main(argv: list[str] | None = None,
         build_model: Callable[..., Any] | None = None) -> int:
    """Entry point of ``synlm parse``; prints one JSON object on stdout (the scores, or what
    ``--input --output`` wrote), after the trees of ``--show``; ``--input`` without
    ``--output`` prints the trees instead. Returns the exit code.
    ``build_model`` builds a model from a config (``--config``; ``synlm.cli`` passes its
    own, which this module cannot import: the CLI sits above it). synlm's own errors
    (``SynLMError``) are one line on stderr and exit code 2."""
    args = build_parser().parse_args(argv)
    try:
        return _main(args, build_model)
    except SynLMError as err:
        return report(err, "synlm parse")


def _main(args: argparse.Namespace, build_model: Callable[..., Any] | None) -> int:
    error = output_error(args)
    if error:
        print(f"synlm parse: {error}", file=sys.stderr)
        return 2
    from synlm.syntax.head_rules import read_gold_heads
    from synlm.syntax.predicted import gold_trees, predicted_trees, read_treebank

    # the treebank to score, read and checked before torch and the model load
    treebank = read_treebank(args.treebank, args.sections) \
        if args.treebank and not (args.input or args.list_structures) else None
    predicted = predicted_trees(args, treebank) if args.predicted else None
    gold_heads = read_gold_heads(args.gold_heads, [t for t, _ in treebank.trees]) \
        if args.gold_heads and treebank is not None and treebank.trees else None
    if predicted == []:
        return 1
    configure_threads()  # torch: once the flags (and --predicted's trees) are good
    import numpy as np

    from synlm.loading import load_model
    from synlm.parsing import (
        BEAM,
        check_structure,
        default_structure,
        evaluate,
        model_trees,
        unknown_words,
    )
    from synlm.syntax import baseline_tree

    if args.config:
        if build_model is None:
            print("synlm parse: --config needs the CLI's model builder; run `synlm parse`",
                  file=sys.stderr)
            return 2
        return _score_untrained(args, build_model, treebank, gold_heads)
    rng = np.random.default_rng(args.seed)
    model = load_model(args.ckpt_path) if args.ckpt_path else None
    if model is not None and args.list_structures:
        print(json.dumps({BEAM: "trees"} if isinstance(model, Parses)
                         else {n: s.kind for n, s in model.structures.items()}))
        return 0
    _use_search(model, args)
    structure = None
    if model is not None:
        structure = args.structure or default_structure(model)
        if check_structure(model, structure) == "arcs":
            return _score_arcs(model, structure, args, treebank, gold_heads)
        _trees_need_no_heads(args, structure)

    def induce(sentences: list[list[str]]) -> list[Tree]:
        if predicted is not None:
            return predicted
        if model is not None:
            return model_trees(model, sentences, structure, args.layer, args.biased,
                               args.batch_size)
        return [baseline_tree(words, args.baseline, rng) for words in sentences]

    if args.input:
        sentences = input_sentences(args.input)
        share = unknown_words(model, sentences, "the input's words") if model else None
        trees = induce(sentences)
        report_no_parse(trees)
        write_trees(trees, args.format, args.output, sentences=sentences)
        if args.output:
            print(json.dumps({"n_sentences": len(trees), "output": args.output,
                              **({} if share is None else {"unknown_share": share})}))
        return 0
    if treebank is None:
        print("synlm parse: give --treebank PATH (to score) or --input TEXT", file=sys.stderr)
        return 2
    golds = gold_trees(args, treebank)
    if golds is None:
        return 1
    preds = induce([g.leaves() for g in golds])
    _write_predictions(args, preds, golds)
    unparsed = report_no_parse(preds, "no tree in --predicted (an empty line)"
                               if args.predicted else "no parse within the beam")
    golds = [g for p, g in zip(preds, golds) if p is not None]
    preds = [p for p in preds if p is not None]
    share = (unknown_words(model, [g.leaves() for g in golds], "the treebank's words")
             if model is not None else None)
    result: dict[str, Any] = {
        "treebank": str(args.treebank),
        "trees": args.predicted or args.baseline or (
            f"{args.ckpt_path}:{structure}" if structure == BEAM else
            f"{args.ckpt_path}:{structure}:{args.layer}:"
            f"{'biased' if args.biased else 'unbiased'}"),
        "protocol": args.protocol,
        **({"search": model.beam.describe()} if structure == BEAM else {}),
        "max_length": args.max_length,
        **evaluate(preds, golds, args.protocol),
        **({} if share is None else {"unknown_share": share}),
        **({"no_parse": unparsed} if unparsed else {}),
    }
    print(json.dumps(result))
    return 0


def report_no_parse(trees: Sequence[Tree | None], why: str = "no parse within the beam"
                    ) -> int:
    """How many sentences have no tree (a transition LM's beam found none; ``why``), said in
    one line on stderr when there are any."""
    missing = [i for i, tree in enumerate(trees, 1) if tree is None]
    if missing:
        shown = ", ".join(map(str, missing[:10])) + (", ..." if len(missing) > 10 else "")
        print(f"synlm parse: {len(missing)} of {len(trees)} sentences have {why} "
              f"(sentences {shown}): an empty tree each, left out of any score",
              file=sys.stderr)
    return len(missing)


def input_sentences(source: str) -> list[list[str]]:
    """The whitespace-tokenised sentences of ``--input``: a file, or ``-`` for stdin."""
    text = sys.stdin.read() if source == "-" else Path(source).read_text(encoding="utf-8")
    return [line.split() for line in text.splitlines() if line.split()]


def output_error(args: argparse.Namespace) -> str | None:
    """What ``--format``, ``--output`` and ``--show`` ask that cannot be done, if anything."""
    if args.show < 0:
        return f"--show takes a number of trees >= 0, got {args.show}"
    if args.input and args.input != "-" and not Path(args.input).is_file():
        return f"--input: no file {args.input} (a text file, one sentence per line; - reads " \
               "them from standard input)"
    if args.gold_heads and (args.input or not args.treebank or args.treebank.endswith(".conllu")
                            or args.baseline or args.predicted):
        return "--gold-heads FILE gives the gold heads of --treebank's trees for an arcs " \
               "structure: give bracketed trees and --ckpt_path or --config"
    if args.arcs_decoder and (args.baseline or args.predicted):
        return "--arcs-decoder decodes a model's arcs structure: give --ckpt_path or --config"
    if args.predicted and (args.input or not args.treebank):
        return "--predicted FILE scores its trees against a treebank: give --treebank PATH, " \
               "without --input"
    if args.show and (args.input or args.config or not args.treebank):
        return "--show N shows predicted beside gold trees: give --treebank PATH with " \
               "--baseline or --ckpt_path, without --input"
    if args.format == "svg" and args.output and Path(args.output).is_file():
        return f"--output {args.output} is a file; --format svg writes one picture per " \
               "sentence into a folder"
    if args.format == "svg" and not args.output and (args.input or args.show):
        return "--format svg writes one picture per sentence: give --output FOLDER"
    return None


def format_tree(tree: Tree | None, fmt: str, gold: Tree | None = None,
                words: Sequence[str] | None = None) -> str:
    """One sentence's tree (with ``gold``: and its gold tree) in the text format ``fmt``
    (bracket, pretty or json), ending in a newline (pretty: a blank line); a sentence with
    no tree (None: no parse within the beam) is an empty line (json: ``"tree": null``, its
    ``words``; pretty: a line that says so)."""
    from synlm.syntax import to_bracket

    if tree is None:
        words = list(words if words is not None else gold.leaves() if gold is not None else [])
        if fmt == "json":
            record = {"words": words, "tree": None, "no_parse": True}
            if gold is not None:
                record["gold"] = to_bracket(gold)
            return json.dumps(record) + "\n"
        if fmt == "pretty":
            return f"(no parse within the beam: {' '.join(words)})\n\n"
        return "\n" if gold is None else f"predicted: \ngold: {to_bracket(gold)}\n"
    if fmt == "json":
        record = {"words": tree.leaves(), "tree": to_bracket(tree)}
        if gold is not None:
            record["gold"] = to_bracket(gold)
        return json.dumps(record) + "\n"
    if fmt == "pretty":
        from synlm import viz

        return viz.pretty(tree, gold) + "\n\n"
    if gold is None:
        return to_bracket(tree) + "\n"
    return f"predicted: {to_bracket(tree)}\ngold: {to_bracket(gold)}\n"


def write_trees(trees: Sequence[Tree | None], fmt: str, output: str | None = None,
                golds: Sequence[Tree] | None = None,
                sentences: Sequence[Sequence[str]] | None = None) -> None:
    """``trees`` (each beside its gold tree if ``golds`` are given) in ``fmt`` to the file
    ``output``, else to stdout; svg: ``NNNN.svg`` (sentence 1 is ``0001.svg``) in the folder
    ``output``, made if missing, none for a sentence without a tree (None; the others as
    ``format_tree`` writes it, with its words from ``sentences``)."""
    pairs = list(zip(trees, golds if golds is not None else [None] * len(trees)))
    words = list(sentences) if sentences is not None else [None] * len(trees)
    if fmt == "svg":
        if output is None:
            raise ValueError("svg writes one picture per sentence: give a folder as output")
        from synlm import viz

        folder = Path(output)
        folder.mkdir(parents=True, exist_ok=True)
        for i, (tree, gold) in enumerate(pairs, 1):
            if tree is not None:
                (folder / f"{i:04d}.svg").write_text(viz.svg(tree, gold), encoding="utf-8")
        return
    text = "".join(format_tree(tree, fmt, gold, w) for (tree, gold), w in zip(pairs, words))
    if output:
        Path(output).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)


def _write_predictions(args: argparse.Namespace, preds: Sequence[Tree],
                       golds: Sequence[Tree]) -> None:
    """A scored treebank's trees: every prediction to ``--output``, and the first ``--show``
    beside their gold trees on stdout; svg pictures always show the gold tree, and
    ``--show`` keeps the first N."""
    if args.format == "svg":
        if args.output:
            n = args.show or len(preds)
            write_trees(preds[:n], "svg", args.output, golds[:n])
        return
    if args.output:
        write_trees(preds, args.format, args.output)
    if args.show:
        write_trees(preds[:args.show], args.format, golds=golds[:args.show])


def _use_search(model: Any, args: argparse.Namespace) -> None:
    """The search flags on the model: particle filtering (``_use_particles``), and
    ``--max-memory-mb`` on a model that searches its trees (a one-line error on any other)."""
    if args.search == "particles" or args.particles is not None:
        _use_particles(model, args)
    if args.max_memory_mb is not None:
        if model is None:
            raise InputError("--max-memory-mb: the memory of a transition LM's search; give "
                             "its --ckpt_path")
        require(model, Searches, "--max-memory-mb")
        model.use_beam(max_memory_mb=args.max_memory_mb)


def _use_particles(model: Any, args: argparse.Namespace) -> None:
    """``--search particles --particles N`` on a model that searches its trees (a transition
    LM); a one-line error otherwise."""
    if args.search != "particles":
        raise InputError("--particles: the particles of particle filtering; add --search "
                         "particles")
    if model is None:
        raise InputError("--search particles: particle filtering searches a transition LM's "
                         "trees (RNNG, PLM, PLM-mask, TG); give its --ckpt_path")
    require(model, Searches, "--search particles")
    errors.at_least("--particles", args.particles)
    from synlm.transition.particles import use_particles

    use_particles(model, args.particles)


def _score_untrained(args: argparse.Namespace, build_model: Callable[..., Any],
                     treebank: GoldTreebank | None,
                     gold_heads: list[tuple[list[str], list[int]]] | None) -> int:
    """``--config``: F1 and split percentages of ``--seeds`` untrained models' trees, or the
    dependency accuracies of their arcs (``tree_dependency_scores``)."""
    from synlm.loading import mean_and_std, untrained_model
    from synlm.parsing import (
        BEAM,
        check_structure,
        default_structure,
        evaluate,
        model_trees,
        tree_dependency_scores,
    )
    from synlm.syntax.predicted import gold_trees

    if treebank is None:
        print("synlm parse: --config scores untrained models: give --treebank PATH",
              file=sys.stderr)
        return 2
    golds = gold_trees(args, treebank)
    if golds is None:
        return 1
    words = [g.leaves() for g in golds]
    results = []
    for seed in range(args.seeds):
        model = untrained_model(build_model, args.config, seed, args.set)
        _use_search(model, args)
        structure = args.structure or default_structure(model)
        arcs = check_structure(model, structure) == "arcs"
        if arcs:  # the same filters as gold_trees: a tree passes both or neither
            results.append(tree_dependency_scores(
                model, structure, [t for t, _ in treebank.trees], args.protocol,
                args.head_rules, args.max_length, args.batch_size, gold_heads,
                arcs_decoder(args)))
            continue
        _trees_need_no_heads(args, structure)
        preds = model_trees(model, words, structure, args.layer, args.biased, args.batch_size)
        unparsed = report_no_parse(preds)
        results.append({**evaluate([p for p in preds if p is not None],
                                   [g for p, g in zip(preds, golds) if p is not None],
                                   args.protocol),
                        **({"no_parse": unparsed} if structure == BEAM else {})})
    print(json.dumps({"treebank": str(args.treebank),
                      "trees": f"{args.config}:{structure}:untrained:seeds 0-{args.seeds - 1}",
                      "protocol": args.protocol,
                      **(_gold_source(args) | {"arcs_decoder": arcs_decoder(args)}
                         if arcs else {}),
                      "max_length": args.max_length, **mean_and_std(results)}))
    return 0


def _trees_need_no_heads(args: argparse.Namespace, structure: str) -> None:
    """``--gold-heads`` or ``--arcs-decoder`` given for a structure of trees: an
    ``InputError``."""
    if args.gold_heads:
        raise InputError(f"--gold-heads: {structure!r} gives trees, scored against the "
                         "treebank's own; the gold heads score an arcs structure")
    if args.arcs_decoder:
        raise InputError(f"--arcs-decoder: {structure!r} gives trees; the decoder reads the "
                         "heads of an arcs structure")


def arcs_decoder(args: argparse.Namespace) -> str:
    """The decoder of an arcs structure's heads: ``--arcs-decoder``, else ``argmax``."""
    return args.arcs_decoder or "argmax"


def _gold_source(args: argparse.Namespace) -> dict[str, str | None]:
    """Where an arcs structure's gold heads on constituency trees come from (JSON keys)."""
    return {"head_rules": None if args.gold_heads else args.head_rules,
            "gold_heads": args.gold_heads}


def _score_arcs(model: Any, structure: str, args: argparse.Namespace,
                treebank: GoldTreebank | None,
                gold_heads: list[tuple[list[str], list[int]]] | None) -> int:
    """UAS of an arc structure against a CoNLL-U treebank, directed and undirected accuracy
    (DDA, UDA) against the heads of a constituency treebank, or heads for ``--input``."""
    from synlm.metrics.structures import AttachmentScore
    from synlm.parsing import model_heads, rounded, tree_dependency_scores, unknown_words

    if args.input:
        sentences = input_sentences(args.input)
        heads = model_heads(model, sentences, structure, args.batch_size, arcs_decoder(args))
        if args.output:
            Path(args.output).write_text("".join(" ".join(map(str, h)) + "\n" for h in heads),
                                         encoding="utf-8")
        print(json.dumps({"n_sentences": len(heads), "output": args.output,
                          "arcs_decoder": arcs_decoder(args)}))
        return 0
    if treebank is None:
        print(f"synlm parse: {structure!r} gives dependency heads: give a CoNLL-U "
              "--treebank FILE.conllu, bracketed trees (or --input TEXT)", file=sys.stderr)
        return 2
    if treebank.trees:  # gold heads (--head-rules, --gold-heads) of the words --protocol keeps
        scores = tree_dependency_scores(model, structure, [t for t, _ in treebank.trees],
                                        args.protocol, args.head_rules, args.max_length,
                                        args.batch_size, gold_heads, arcs_decoder(args))
        if scores is None:
            print(f"synlm parse: no sentence of {args.treebank} passes the filters",
                  file=sys.stderr)
            return 1
        print(json.dumps({"treebank": str(args.treebank), "structure": structure,
                          "protocol": args.protocol, **_gold_source(args),
                          "arcs_decoder": arcs_decoder(args),
                          "max_length": args.max_length, **scores}))
        return 0
    golds = [s for s in treebank.sentences if s.heads is not None]
    if args.max_length:
        golds = [s for s in golds if len(s.words) <= args.max_length]
    metric = AttachmentScore()
    metric.update(model_heads(model, [s.words for s in golds], structure, args.batch_size,
                              arcs_decoder(args)), [s.heads for s in golds])
    share = unknown_words(model, [s.words for s in golds], "the treebank's words")
    print(json.dumps({"treebank": str(args.treebank), "structure": structure,
                      "arcs_decoder": arcs_decoder(args),
                      "max_length": args.max_length, "n_sentences": len(golds),
                      "uas": rounded(metric.compute(), 100.0), "unknown_share": share}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
