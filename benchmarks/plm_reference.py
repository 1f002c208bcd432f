"""Reference fixture for ``synlm.syntax.plm``: the lines IBM/transformers-struct-guidance
``src/get_oracle.py --gen`` (commit 17716af, MIT licence) prints for synlm's trees.

    python benchmarks/plm_reference.py --reference PATH/TO/get_oracle.py \\
        --nltk PATH/TO/treebank.zip --out tests/fixtures/plm

The script runs the reference (unchanged; it runs on Python 3 as released) on one-line
brackets written by synlm's ``to_bracket``, and contains none of its code. It writes:

- ``sample.gen``: its output for ``tests/fixtures/syntax/sample.mrg`` read as synlm's corpora
  read it (``read_trees``: PTB wrapper unwrapped; ``clean_tree``: no ``-NONE-``, no function
  tags);
- ``sample_raw.gen``: its output for the same file as written (wrapper, traces and function
  tags kept; whitespace collapsed);
- ``nltk.sha256``: for the NLTK WSJ sample read as synlm reads it, ``whole <sha256>`` of the
  whole output, then per tree ``index <first 16 hex digits of the sha256 of its line>``, or
  ``index -`` where the reference skips the tree. The per-tree lines come from the
  reference's own ``get_actions_and_terms`` and ``main``'s filters, imported from the file,
  and are checked against the whole output.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from synlm.syntax.readers import read_trees
from synlm.syntax.trees import clean_tree, to_bracket

SAMPLE = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "syntax" / "sample.mrg"


def run(reference: Path, lines: list[str]) -> str:
    """The reference's stdout for ``lines`` (one tree per line)."""
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write("\n".join(lines) + "\n")
    return subprocess.run([sys.executable, str(reference), "--gen", "--fpath", f.name],
                          check=True, capture_output=True, text=True).stdout


def cleaned(path: Path) -> list[str]:
    return [to_bracket(clean_tree(tree)) for tree, _ in read_trees(path)]


def raw(path: Path) -> list[str]:
    """Each top-level bracketing of the file on one line, as written."""
    out, depth, cur = [], 0, []
    for tok in re.findall(r"\(|\)|[^\s()]+", path.read_text()):
        cur.append(tok)
        depth += (tok == "(") - (tok == ")")
        if depth == 0:
            out.append(re.sub(r"\( (?=[^(])", "(", " ".join(cur)))
            cur = []
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reference", type=Path, required=True)
    parser.add_argument("--nltk", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "sample.gen").write_text(run(args.reference, cleaned(SAMPLE)))
    (args.out / "sample_raw.gen").write_text(run(args.reference, raw(SAMPLE)))

    spec = importlib.util.spec_from_file_location("get_oracle", args.reference)
    ref = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ref)
    lines = cleaned(args.nltk)
    whole = run(args.reference, lines)
    rows, kept = [f"whole {hashlib.sha256(whole.encode()).hexdigest()}"], []
    for i, line in enumerate(lines):
        actions, _ = ref.get_actions_and_terms(line, is_generative=True)
        if not ref.is_valid_action_sequence(actions) or len(actions) > 500:
            rows.append(f"{i} -")
            continue
        kept.append(" ".join(actions))
        rows.append(f"{i} {hashlib.sha256(kept[-1].encode()).hexdigest()[:16]}")
    assert "".join(k + "\n" for k in kept) == whole, "per-tree lines differ from the output"
    (args.out / "nltk.sha256").write_text("\n".join(rows) + "\n")
    print(f"{len(lines)} NLTK trees, {len(kept)} kept")


if __name__ == "__main__":
    main()
