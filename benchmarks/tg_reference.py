"""Reference fixture for ``synlm.transition.attention.tg``: the attention masks and relative
positions of Transformer Grammars (Sartran et al. 2022, TACL) as the released masking code of
deepmind/transformer_grammars (commit edfb9ea, Apache 2.0 licence) computes them for synlm's
trees.

    python benchmarks/tg_reference.py --reference PATH/TO/BUILD \\
        --nltk $SYNLM_DATA_DIR/nltk_treebank/treebank.zip --out tests/fixtures/tg

``--reference`` is the folder holding the released C++ extension ``cpp_masking``, built
unmodified from ``transformer_grammars/models/masking`` (``cpp_masking.cc`` and
``masking_rules.cc``); this script only imports it and contains none of its code.

Each tree is read as synlm's treebank corpora read it (``read_trees``, then ``clean_tree``:
no ``-NONE-``, no function tags) and turned into top-down oracle actions (a preterminal is
one ``SHIFT``), numbered by an ``ActionVocab`` of every label of the fixture. The actions
become a Choe-Charniak sequence without part-of-speech tags: a start token (type SOS), then
an opening nonterminal (type OPENING_NT) for ``NT(X)``, a terminal (TERMINAL) for ``SHIFT``
and a closing nonterminal (CLOSING_NT) for ``REDUCE``. The released
``StackComposeDoubleClosingNT`` rule runs with the settings of the paper's configuration
(``configs/config_tg.py``: relative positions "delta_depth", one attention function, no
transparency, memory gathered into a new memory) and a sequence length that holds the whole
transformed sentence in one chunk, so the memory plays no part. The script checks on the way
that there is one chunk, that nothing attends the memory, and that every relative position
is the depth difference of query and key where attention is allowed and 0 elsewhere.

It writes ``reference.json``: the rule's settings, the action vocabulary, and per tree its
source, its synlm action ids, and over the transformed sequence (start token included,
padding dropped) the token types, the depths, and per query token the key positions it
attends (ascending) with their relative positions. ``nltk`` holds the trees of the NLTK WSJ
sample (``treebank.zip``) picked by ``pick`` (the longest and deepest included; all 3914
with ``--budget 400000``, some 21 MB); ``hand`` holds the small trees of ``HAND`` with their
brackets.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
from nltk import Tree

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from synlm.syntax.actions import REDUCE, SHIFT, ActionVocab, nt_label, oracle  # noqa: E402
from synlm.syntax.readers import read_trees  # noqa: E402
from synlm.syntax.trees import clean_tree  # noqa: E402

COMMIT = "edfb9eae5d61eb04bcf6c9b669d61ab2daaa0cb1"
#: Token types of the released masking code (``masking/constants.py``).
PAD, SOS, OPENING_NT, TERMINAL, CLOSING_NT, CLOSING_NT_2 = 0, 1, 2, 3, 4, 14
#: The keyword arguments of ``configs/config_tg.py``'s ``extra_attention_mask_kwargs``.
SETTINGS: dict[str, Any] = {"relative_pos": "delta_depth", "use_different_attn_fns": False,
                            "transparency_prob": 0.0, "gather_into_new_memory": True,
                            "transparency_depth_threshold": -1}
#: Small trees drawn by hand (preterminals are words): a flat sentence, the sentence of the
#: released unit test, a unary chain, a right-branching and a left-branching tree, words
#: and constituents mixed under one node, a one-word sentence.
HAND = (
    "(S (DT the) (NN cat) (VBZ meows))",
    "(S (NP (DT the) (JJ hungry) (NN cat)) (VP (VBZ meows)))",
    "(S (VP (VP (VP (VB run)))))",
    "(A (X a) (B (X b) (C (X c) (D (X d) (E (X e) (F (X f)))))))",
    "(A (B (C (D (X d) (X e)) (X c)) (X b)) (X a))",
    "(S (X a) (NP (X b) (X c)) (X d) (VP (X e) (PP (X f) (NP (X g)))) (X h))",
    "(S (X hello))",
)
#: Most tokens of the NLTK trees kept in the fixture (the ``pick`` rule).
BUDGET = 8000


def import_reference(path: Path) -> ModuleType:
    """The released ``cpp_masking`` extension from the folder ``path``."""
    sys.path.insert(0, str(path.resolve()))
    return importlib.import_module("cpp_masking")


def choe_charniak(actions: list[str], vocab: ActionVocab) -> tuple[np.ndarray, np.ndarray]:
    """Token ids and token types of the Choe-Charniak sequence of ``actions``, start token
    first. The ids only need to be nonzero for the masks (zero is padding): 1 for the start
    token, 2 for a word, ``3 + k`` for the opening and ``3 + n + k`` for the closing bracket
    of the k-th of n labels."""
    labels = vocab.labels
    ids, types, opened = [1], [SOS], []
    for action in actions:
        label = nt_label(action)
        if label is not None:
            opened.append(labels.index(label))
            ids.append(3 + opened[-1])
            types.append(OPENING_NT)
        elif action == SHIFT:
            ids.append(2)
            types.append(TERMINAL)
        else:
            assert action == REDUCE
            ids.append(3 + len(labels) + opened.pop())
            types.append(CLOSING_NT)
    return np.array(ids, dtype=np.int32), np.array(types, dtype=np.int32)


def released(cpp: ModuleType, actions: list[str], vocab: ActionVocab) -> dict[str, Any]:
    """The released rule's types, depths, attended keys and relative positions for one
    sentence (one chunk, padding dropped)."""
    ids, types = choe_charniak(actions, vocab)
    length = len(ids) + actions.count(REDUCE)  # transformed tokens
    seq_len = 2 * len(ids)  # the rule pads the transformed sequence to a multiple of this
    rules = cpp.StackComposeDoubleClosingNT(sequence_length=seq_len, memory_length=seq_len,
                                            **SETTINGS)
    # inputs, input types, labels (the next token; a pad after the last), label types
    chunks = rules.chunks_for_sequence(ids, types, np.append(ids[1:], 0).astype(np.int32),
                                       np.append(types[1:], PAD).astype(np.int32))
    assert len(chunks) == 1, len(chunks)
    (inputs, t_types, _labels, _label_types, mask, relpos, indicator, memory_mask,
     memory_padding, _memory_pos, depth, *_rest) = chunks[0]
    assert (inputs[:length] > 0).all() and (inputs[length:] == 0).all()
    assert not memory_mask.any() and not memory_padding.any() and not indicator.any()
    assert not mask[length:].any() and not mask[:, length:].any()
    assert not relpos[:, :seq_len].any()  # the memory's columns come first
    mask, relpos, depth = mask[:length, :length], relpos[:length, seq_len:], depth[:length]
    expected = np.where(mask > 0, depth[:, None] - depth[None, :], 0)
    assert (relpos[:, :length] == expected).all() and not relpos[:, length:].any()
    attend = [np.flatnonzero(row).tolist() for row in mask]
    return {"types": t_types[:length].tolist(), "depth": depth.tolist(), "attend": attend,
            "relative": [relpos[i, keys].tolist() for i, keys in enumerate(attend)]}


def nltk_trees(path: Path) -> list[tuple[Tree, str]]:
    """The trees of the NLTK sample as synlm's treebank corpora clean them, with their
    sources inside the zip (``treebank/combined/wsj_0001.mrg:1``)."""
    out = []
    for tree, source in read_trees(path):
        clean = clean_tree(tree)
        if clean is not None:
            out.append((clean, source.removeprefix(f"{path}/")))
    return out


def pick(tokens: list[int], depths: list[int], budget: int = BUDGET) -> list[int]:
    """Indices (ascending) of a deterministic selection of trees with at most ``budget``
    transformed tokens in all, when the whole sample is too large: the longest tree, the
    deepest (the longer first among equals), then every k-th tree in order, k as small as
    the budget allows."""
    if sum(tokens) <= budget:
        return list(range(len(tokens)))
    chosen = {max(range(len(tokens)), key=lambda i: (tokens[i], -i)),
              max(range(len(tokens)), key=lambda i: (depths[i], tokens[i], -i))}
    base = sum(tokens[i] for i in chosen)
    for step in range(2, len(tokens) + 1):
        extra = [i for i in range(0, len(tokens), step) if i not in chosen]
        if base + sum(tokens[i] for i in extra) <= budget:
            return sorted(chosen | set(extra))
    return sorted(chosen)


def record(cpp: ModuleType, tree: Tree, source: str, vocab: ActionVocab) -> dict[str, Any]:
    """One fixture entry: source, action ids and the released rule's output."""
    actions = oracle(tree, "top_down")
    return {"source": source, "actions": vocab.encode(actions),
            **released(cpp, actions, vocab)}


def reference_arguments(description: str, out: Path, budget: int,
                        budget_help: str) -> argparse.ArgumentParser:
    """The options of a generator of a fixture from the released masking extension: where
    it is built, the NLTK sample, the fixture's folder and its token budget."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--reference", type=Path, required=True,
                        help="the folder holding the built cpp_masking extension")
    parser.add_argument("--nltk", type=Path, required=True, help="the NLTK treebank.zip")
    parser.add_argument("--out", type=Path, default=out)
    parser.add_argument("--budget", type=int, default=budget, help=budget_help)
    return parser


def main(argv: list[str] | None = None) -> None:
    args = reference_arguments(
        __doc__.split("\n\n")[0], ROOT / "tests" / "fixtures" / "tg", BUDGET,
        "most tokens of the NLTK trees kept (400000 keeps them all)").parse_args(argv)
    cpp = import_reference(args.reference)

    sample = nltk_trees(args.nltk)
    hand = [Tree.fromstring(text) for text in HAND]
    vocab = ActionVocab.from_trees([t for t, _ in sample] + hand)
    sizes = [len(a) + a.count(REDUCE) + 1 for a in (oracle(t) for t, _ in sample)]
    depths = [t.height() for t, _ in sample]
    picked = pick(sizes, depths, args.budget)
    nltk_records = [record(cpp, *sample[i], vocab) for i in picked]
    hand_records = [{**record(cpp, tree, "hand", vocab), "tree": text}
                    for tree, text in zip(hand, HAND)]
    fixture = {"reference": {"repository": "deepmind/transformer_grammars", "commit": COMMIT,
                             "rule": "StackComposeDoubleClosingNT", **SETTINGS},
               "token_types": {"SOS": SOS, "OPENING_NT": OPENING_NT, "TERMINAL": TERMINAL,
                               "CLOSING_NT": CLOSING_NT, "CLOSING_NT_2": CLOSING_NT_2},
               "actions_itos": vocab.itos, "nltk_trees": len(sample),
               "nltk": nltk_records, "hand": hand_records}
    args.out.mkdir(parents=True, exist_ok=True)
    out = args.out / "reference.json"
    out.write_text(json.dumps(fixture, separators=(",", ":")) + "\n")
    longest = max(nltk_records, key=lambda r: len(r["types"]))
    print(f"{len(nltk_records)} of {len(sample)} NLTK trees ({sum(sizes)} tokens in all), "
          f"{len(hand_records)} hand-drawn; longest kept {len(longest['types'])} tokens, "
          f"deepest kept {max(max(r['depth']) for r in nltk_records)}; "
          f"wrote {out} ({out.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
