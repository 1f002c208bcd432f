"""Reference fixtures for ``synlm.syntax.plm`` and ``synlm.transition.attention.plm_mask``, from
IBM/transformers-struct-guidance (commit 17716af, MIT licence): the lines ``src/get_oracle.py
--gen`` prints for synlm's trees, and the attention masks ``src/plm-gen.py`` gives PLM-mask.

    python benchmarks/plm_reference.py --reference PATH/TO/get_oracle.py \\
        --nltk PATH/TO/treebank.zip --out tests/fixtures/plm
    python benchmarks/plm_reference.py masks --reference PATH/TO/get_oracle.py \\
        --plm-gen PATH/TO/plm-gen.py --nltk PATH/TO/treebank.zip \\
        --out tests/fixtures/plm/masks.json

The script runs the reference (unchanged; it runs on Python 3 as released) on one-line
brackets written by synlm's ``to_bracket``, and contains none of its code. The first form
writes:

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

``masks`` writes ``masks.json`` (``masks_fixture``): the masks of ``plm-gen.py``'s
``get_attention_mask_from_actions`` (taken from the file with ``RNNGMachine`` and ``nt_re``
and run as they are, with the globals ``--add_structured_mask --buffer_head 0 --stack_head 1``
sets on a CPU) for the PLM tokens, ``[START]`` first, that ``get_actions_and_terms`` gives the
bundled sample's trees (cleaned and as written) and a fixed selection of the NLTK sample's.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import importlib.util
import json
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import torch
from torch import Tensor

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


def load_oracle(reference: Path) -> ModuleType:
    """``get_oracle.py`` imported from its file (its ``main`` runs only as a script)."""
    spec = importlib.util.spec_from_file_location("get_oracle", reference)
    assert spec is not None and spec.loader is not None, reference
    ref = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ref)
    return ref


#: The heads ``plm-gen.py`` is run with for PLM-mask (its README), and its head count.
BUFFER_HEAD, STACK_HEAD, N_HEADS = 0, 1, 12
#: The NLTK trees in the masks fixture: every hundredth, and those ``nltk_extremes`` names.
NLTK_EVERY = 100


def reference_masker(plm_gen: Path) -> tuple[Callable[..., Tensor], str, str]:
    """``get_attention_mask_from_actions`` of ``plm-gen.py``, its ``REDUCE`` token and its
    ``ROOT`` (``[START]``) token. The function, the ``RNNGMachine`` class and ``nt_re`` are
    compiled from the file's own source, unchanged; the globals they read are those its
    ``__main__`` sets for ``--buffer_head 0 --stack_head 1`` on a CPU (``REDUCE`` and ``ROOT``
    read from the file's assignments)."""
    tree = ast.parse(plm_gen.read_text(), str(plm_gen))
    wanted = {"nt_re", "RNNGMachine", "get_attention_mask_from_actions"}
    body = [node for node in tree.body
            if (isinstance(node, ast.ClassDef | ast.FunctionDef) and node.name in wanted)
            or (isinstance(node, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id in wanted for t in node.targets))]
    assert len(body) == 3, f"{plm_gen}: expected {sorted(wanted)} at its top level"
    constants = {t.id: ast.literal_eval(node.value) for node in ast.walk(tree)
                 if isinstance(node, ast.Assign) for t in node.targets
                 if isinstance(t, ast.Name) and t.id in ("REDUCE", "ROOT")}
    namespace: dict[str, Any] = {
        "re": re, "torch": torch, "device": "cpu", **constants,
        "args": SimpleNamespace(buffer_head=BUFFER_HEAD, stack_head=STACK_HEAD),
    }
    exec(compile(ast.Module(body=body, type_ignores=[]), str(plm_gen), "exec"), namespace)
    return namespace["get_attention_mask_from_actions"], constants["REDUCE"], constants["ROOT"]


def nltk_extremes(tokens: Sequence[Sequence[str]]) -> dict[str, int]:
    """The indices of the tree with the most tokens, the deepest (most constituents open at
    once), the one with the longest run of ``NT`` tokens and the shortest (first of ties)."""
    def depth_and_run(seq: Sequence[str]) -> tuple[int, int]:
        depth = deepest = run = longest = 0
        for token in seq:
            opens = token.startswith("NT(")
            depth += opens - (token == "REDUCE()")
            run = run + 1 if opens else 0
            deepest, longest = max(deepest, depth), max(longest, run)
        return deepest, longest

    shape = [depth_and_run(seq) for seq in tokens]
    first = range(len(tokens))
    return {"longest": max(first, key=lambda i: len(tokens[i])),
            "deepest": max(first, key=lambda i: shape[i][0]),
            "longest NT run": max(first, key=lambda i: shape[i][1]),
            "shortest": min(first, key=lambda i: len(tokens[i]))}


def _runs(row: Tensor) -> list[int]:
    """``[first, last]`` of the one run of 1s in a 0/1 mask row (checked)."""
    ones = row.nonzero().flatten().tolist()
    assert ones and ones == list(range(ones[0], ones[-1] + 1)), row.tolist()
    assert set(row.unique().tolist()) <= {0.0, 1.0}, row.tolist()
    return [ones[0], ones[-1]]


def mask_entry(masker: Callable[..., Tensor], reduce: str, root: str, tokens: list[str],
               labels: list[str]) -> dict[str, Any]:
    """One fixture tree: synlm action ids for ``tokens`` (no ``[START]``) and, for the buffer
    and stack heads, ``[first, last]`` allowed key of each row of the reference's mask for
    ``[START]`` + ``tokens`` (before the causal mask, which the reference leaves to GPT-2);
    its other heads are checked to be all 1s."""
    seq = [root, *tokens]
    mask = masker(seq)
    n = len(seq)
    assert mask.shape == (1, N_HEADS, n, n), mask.shape
    padded = masker(seq, max_len=n + 3)
    assert torch.equal(padded[..., :n, :n], mask) and not padded[..., n:].any()
    others = [h for h in range(N_HEADS) if h not in (BUFFER_HEAD, STACK_HEAD)]
    assert bool((mask[0, others] == 1).all())
    actions = [1 if t == reduce else 2 + labels.index(m.group(1))
               if (m := re.fullmatch(r"NT\((.*)\)", t)) else 0 for t in tokens]
    return {"actions": actions,
            **{f"head{h}": [k for row in mask[0, h] for k in _runs(row)]
               for h in (BUFFER_HEAD, STACK_HEAD)}}


def masks_fixture(reference: Path, plm_gen: Path, nltk: Path) -> dict[str, Any]:
    """The content of ``masks.json`` (module docstring)."""
    masker, reduce, root = reference_masker(plm_gen)
    oracle = load_oracle(reference)

    def tokens_of(line: str) -> list[str]:
        return list(oracle.get_actions_and_terms(line, is_generative=True)[0])

    nltk_tokens = [tokens_of(line) for line in cleaned(nltk)]
    extremes = nltk_extremes(nltk_tokens)
    picked = sorted(set(range(0, len(nltk_tokens), NLTK_EVERY)) | set(extremes.values()))
    chosen = [("sample", i, tokens_of(line)) for i, line in enumerate(cleaned(SAMPLE))]
    chosen += [("sample_raw", i, tokens_of(line)) for i, line in enumerate(raw(SAMPLE))]
    chosen += [("nltk", i, nltk_tokens[i]) for i in picked]
    labels = sorted({m.group(1) for _, _, seq in chosen for t in seq
                     if (m := re.fullmatch(r"NT\((.*)\)", t))})
    return {
        "about": "PLM-mask attention masks of IBM/transformers-struct-guidance 17716af "
                 "src/plm-gen.py get_attention_mask_from_actions (buffer_head 0, stack_head 1, "
                 "12 heads), written by benchmarks/plm_reference.py masks",
        "format": "per tree: synlm action ids (SHIFT 0, REDUCE 1, NT(nt_labels[k]) 2 + k) of "
                  "the tokens after [START]; head0, head1: per row of the reference's mask "
                  "(T = actions + 1 rows and keys, before GPT-2's causal mask) the first and "
                  "last allowed key, every key between them allowed; heads 2-11 allow every "
                  "key. source: sample (tests/fixtures/syntax/sample.mrg as synlm reads it), "
                  "sample_raw (as written), nltk (the NLTK WSJ sample as synlm reads it, index "
                  "in reading order)",
        "n_heads": N_HEADS, "buffer_head": BUFFER_HEAD, "stack_head": STACK_HEAD,
        "nltk_extremes": extremes,
        "nt_labels": labels,
        "trees": [{"source": source, "index": index,
                   **mask_entry(masker, reduce, root, seq, labels)}
                  for source, index, seq in chosen],
    }


def write_masks(data: dict[str, Any], out: Path) -> None:
    """``data`` as JSON, one tree a line."""
    head = {k: v for k, v in data.items() if k != "trees"}
    lines = [json.dumps(tree, separators=(",", ":")) for tree in data["trees"]]
    text = json.dumps(head, indent=1)[:-2] + ',\n "trees": [\n' + ",\n".join(lines) + "\n]}\n"
    assert json.loads(text) == data
    out.write_text(text)


def masks_main(argv: Sequence[str]) -> None:
    """``plm_reference.py masks``: write the masks fixture."""
    parser = argparse.ArgumentParser(prog="plm_reference.py masks",
                                     description="Write the PLM-mask masks fixture.")
    parser.add_argument("--reference", type=Path, required=True, help="src/get_oracle.py")
    parser.add_argument("--plm-gen", type=Path, required=True, help="src/plm-gen.py")
    parser.add_argument("--nltk", type=Path, required=True, help="NLTK treebank.zip")
    parser.add_argument("--out", type=Path, required=True, help="masks.json to write")
    args = parser.parse_args(argv)
    data = masks_fixture(args.reference, args.plm_gen, args.nltk)
    write_masks(data, args.out)
    print(f"{len(data['trees'])} trees, {args.out.stat().st_size} bytes")


def main() -> None:
    """Write the oracle fixtures, or with ``masks`` first the masks fixture."""
    if sys.argv[1:2] == ["masks"]:
        masks_main(sys.argv[2:])
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reference", type=Path, required=True)
    parser.add_argument("--nltk", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "sample.gen").write_text(run(args.reference, cleaned(SAMPLE)))
    (args.out / "sample_raw.gen").write_text(run(args.reference, raw(SAMPLE)))

    ref = load_oracle(args.reference)
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
