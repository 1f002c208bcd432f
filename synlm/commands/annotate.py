"""``synlm annotate``: dependency heads for raw text, written as a cached CoNLL-U file.

    synlm annotate --input news/valid.txt --parser spacy --model spacy_ewt/model-best
    synlm annotate --input rocstories/ROCStories_dev.csv --format rocstories \\
        --parser spacy --model spacy_ewt/model-best
    synlm annotate --input text.txt --parser conllu --conllu parsed.conllu

Input: one pre-tokenised sentence per line (``lines``: WMT News, PTB text), or a ROCStories
CSV (``rocstories``: its ``sentence1`` .. ``sentence5`` columns, one sentence each). The
tokens are kept as they are: the spaCy pipeline gets them as a ``Doc`` with one sentence
(no re-tokenisation, no sentence split), so the heads align with what a language model
reads. ``--parser conllu`` takes the heads of an existing CoNLL-U parse of the same
sentences instead (checked token by token). The output (``--output``, default under the
cache folder, keyed by the input's and the parser's digests) is reused when it exists.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from synlm.errors import SynLMError, existing_file, report
from synlm.runtime.arguments import CommandParser

#: What ``--input`` takes in each ``--format``.
INPUTS = {"lines": "a text file, one sentence a line", "rocstories": "a ROCStories CSV"}


def build_parser() -> CommandParser:
    p = CommandParser("synlm annotate", __doc__.split("\n\n")[0])
    p.add_argument("--input", type=Path, required=True)
    p.add_argument("--format", choices=("lines", "rocstories"), default="lines")
    p.add_argument("--parser", choices=("spacy", "conllu"), default="spacy")
    p.add_argument("--model", help="spaCy pipeline: a package name or a directory")
    p.add_argument("--conllu", type=Path, help="an existing CoNLL-U parse of the input")
    p.add_argument("--output", type=Path, help="default: under the cache folder")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        existing_file("--input", args.input, INPUTS[args.format])
        if args.conllu is not None:
            existing_file("--conllu", args.conllu, "a CoNLL-U parse of the input")
        from synlm.data.annotation import annotate  # nltk, spaCy: after the checks

        path = annotate(args.input, args.format, args.parser, args.model, args.conllu,
                        args.output)
    except SynLMError as err:  # AnnotateError, CorpusError, ReaderError, ...
        return report(err, "synlm annotate")
    print(path)
    return 0
