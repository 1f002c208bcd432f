"""``synlm export-hf``: a checkpoint as a Hugging Face folder that ``transformers``' Auto
classes, minicons and lm-evaluation-harness load (docs/interop.md).

    synlm export-hf --ckpt_path RUN --out DIR [--force]

The folder holds ``config.json``, ``model.safetensors``, the tokenizer and two small remote-code
files that rebuild the model with the installed ``synlm`` package (``synlm.hf_export``); load
it with ``AutoModelForCausalLM.from_pretrained(DIR, trust_remote_code=True)``. Its
next-token log-probabilities are the checkpoint's own.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from synlm.errors import SynLMError, report
from synlm.runtime.arguments import CommandParser
from synlm.runtime.files import check_replaceable
from synlm.runtime.run_folders import check_checkpoint
from synlm.runtime.threads import configure_threads

PROG = "synlm export-hf"


def build_parser() -> argparse.ArgumentParser:
    p = CommandParser(PROG, __doc__.split("\n\n")[0])
    p.add_argument("--ckpt_path", required=True, help="a SyntaxLM checkpoint or run folder")
    p.add_argument("--out", required=True, help="the folder to write (new or empty)")
    p.add_argument("--force", action="store_true",
                   help="replace an earlier export in --out (one that holds only what "
                   "synlm export-hf wrote: its .synlm-output)")
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``synlm export-hf``; returns the exit code."""
    args = build_parser().parse_args(argv)
    try:
        check_checkpoint(args.ckpt_path, folder="best")  # before torch loads
        check_replaceable(Path(args.out), args.force)
        configure_threads()
        from synlm.hf_export import export_hf
        from synlm.loading import load_model

        out = export_hf(load_model(args.ckpt_path), args.out, args.force)
    except SynLMError as err:
        return report(err, PROG)
    print(f"{PROG}: wrote {out}; load it with AutoModelForCausalLM.from_pretrained"
          f"({str(out)!r}, trust_remote_code=True) (needs synlm installed)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
