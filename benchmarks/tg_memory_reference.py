"""Reference fixture for Transformer Grammars with memory (``synlm.transition.attention.tg``
``tg_chunks``): the chunks of documents as the released masking code of
deepmind/transformer_grammars (commit edfb9ea, Apache 2.0 licence) cuts them, with the
Transformer-XL memory that its "smart" memory (``gather_into_new_memory``) carries.

    python benchmarks/tg_memory_reference.py --reference PATH/TO/BUILD \\
        --nltk $SYNLM_DATA_DIR/nltk_treebank/treebank.zip --out tests/fixtures/tg_memory

``--reference`` is the folder holding the released C++ extension ``cpp_masking``, built
unmodified from ``transformer_grammars/models/masking`` as for ``benchmarks/tg_reference.py``
(whose helpers this script imports); this script contains none of the released code.

A document is the trees of one ``.mrg`` file of the NLTK WSJ sample under a root ``DOC``
(``synlm.syntax.documents``, as the DataModule's ``action_unit: document`` builds it), read
as the Choe-Charniak sequence of its top-down actions after a start token (as the
sentence-level fixture). The released ``StackComposeDoubleClosingNT`` runs with the paper's
settings (``configs/config_tg.py``: relative positions "delta_depth", one attention function,
no transparency, ``gather_into_new_memory``) at small sequence lengths (``LENGTHS``; the
released code requires ``memory_length == sequence_length``), so that chunk boundaries cut
constituents and the memory cannot hold the whole stack.

It writes ``reference.json``: the settings, the action vocabulary, and per document and
sequence length its source, its synlm action ids and per chunk: ``memory`` (the token
position each memory slot holds while the chunk is read, -1 empty: the released
``memory_position``, whose valid slots are its ``memory_padding_mask``), ``update`` (the
next memory's slots as ``[slot, index into [memory | chunk]]``: the released
``update_memory_from_memory`` and ``update_memory_from_sequence``), and per real query token
of the chunk the memory slots and chunk tokens it attends (``attend_memory``, ``attend``,
ascending) with their relative positions.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from tg_reference import (  # noqa: E402
    COMMIT,
    PAD,
    SETTINGS,
    choe_charniak,
    import_reference,
    nltk_trees,
    reference_arguments,
)

from synlm.syntax import Sentence  # noqa: E402
from synlm.syntax.actions import REDUCE, ActionVocab, oracle  # noqa: E402
from synlm.syntax.documents import documents  # noqa: E402
from synlm.syntax.trees import words_and_tags  # noqa: E402

#: The sequence (and memory) lengths each document is cut at.
LENGTHS = (8, 23)
#: Most transformed tokens of the documents kept (the ``pick`` rule), per length.
BUDGET = 1500


def released_chunks(cpp: ModuleType, actions: list[str], vocab: ActionVocab, length: int
                    ) -> list[dict[str, Any]]:
    """The released rule's chunks of one document at ``sequence_length = memory_length =
    length``: memory positions, memory update, and per real query its attended memory slots
    and chunk tokens with their relative positions."""
    ids, types = choe_charniak(actions, vocab)
    rules = cpp.StackComposeDoubleClosingNT(sequence_length=length, memory_length=length,
                                            **SETTINGS)
    chunks = rules.chunks_for_sequence(ids, types, np.append(ids[1:], 0).astype(np.int32),
                                       np.append(types[1:], PAD).astype(np.int32))
    tokens = len(ids) + actions.count(REDUCE)
    assert len(chunks) == -(-tokens // length), (len(chunks), tokens)
    out = []
    for (inputs, _types, _labels, _label_types, mask, relpos, _indicator, memory_mask,
         memory_padding, memory_position, _depth, _bos, _eos, from_sequence,
         from_memory) in chunks:
        real = np.flatnonzero(inputs > 0)
        assert (real == np.arange(len(real))).all()  # padding only at the end
        assert ((memory_position >= 0) == (memory_padding > 0)).all()
        update = sorted([int(n), int(m)] for m, n in zip(*np.nonzero(from_memory))) + \
            sorted([int(n), length + int(t)] for t, n in zip(*np.nonzero(from_sequence)))
        assert len({n for n, _ in update}) == len(update)  # one source a slot
        queries = []
        for i in real:
            own, held = np.flatnonzero(mask[i]), np.flatnonzero(memory_mask[i])
            assert held.size == 0 or memory_padding[held].all()
            queries.append({"attend_memory": held.tolist(), "attend": own.tolist(),
                            "relative_memory": relpos[i, held].tolist(),
                            "relative": relpos[i, length + own].tolist()})
            others = np.setdiff1d(np.arange(2 * length), np.concatenate([held, length + own]))
            assert not relpos[i, others].any()
        assert not mask[len(real):].any() and not memory_mask[len(real):].any()
        out.append({"memory": memory_position.tolist(), "update": sorted(update),
                    "queries": queries})
    return out


def nltk_documents(path: Path) -> list[Sentence]:
    """The NLTK sample's documents, one a file (``synlm.syntax.documents``)."""
    sentences = []
    for tree, source in nltk_trees(path):
        words, tags = words_and_tags(tree)
        sentences.append(Sentence(words, tree=tree, tags=tags, source=source))
    return documents(sentences, "NLTK sample")


def pick(sizes: list[int], budget: int) -> list[int]:
    """Indices (ascending) of the documents kept: every k-th in order, k as small as the
    budget of tokens allows."""
    for step in range(1, len(sizes) + 1):
        chosen = list(range(0, len(sizes), step))
        if sum(sizes[i] for i in chosen) <= budget:
            return chosen
    return [min(range(len(sizes)), key=sizes.__getitem__)]


def main(argv: list[str] | None = None) -> None:
    args = reference_arguments(
        __doc__.split("\n\n")[0], ROOT / "tests" / "fixtures" / "tg_memory", BUDGET,
        "most tokens of the documents kept per sequence length").parse_args(argv)
    cpp = import_reference(args.reference)

    docs = nltk_documents(args.nltk)
    vocab = ActionVocab.from_trees([d.tree for d in docs])
    actions = [oracle(d.tree) for d in docs]
    sizes = [len(a) + a.count(REDUCE) + 1 for a in actions]
    records = []
    for length in LENGTHS:
        # the short documents at the short length, longer ones at the longer
        budget = args.budget * length // LENGTHS[0] if length != LENGTHS[0] else args.budget
        order = sorted(range(len(docs)), key=lambda i: (sizes[i], i))
        small = [i for i in order if sizes[i] <= 12 * length]
        for k in sorted(small[j] for j in pick([sizes[i] for i in small], budget)):
            source = docs[k].source.removeprefix(f"{args.nltk}/")
            records.append({"source": source, "sequence_length": length,
                            "actions": vocab.encode(actions[k]),
                            "chunks": released_chunks(cpp, actions[k], vocab, length)})
    fixture = {"reference": {"repository": "deepmind/transformer_grammars", "commit": COMMIT,
                             "rule": "StackComposeDoubleClosingNT", **SETTINGS},
               "actions_itos": vocab.itos, "documents": records}
    args.out.mkdir(parents=True, exist_ok=True)
    out = args.out / "reference.json"
    out.write_text(json.dumps(fixture, separators=(",", ":")) + "\n")
    chunks = sum(len(r["chunks"]) for r in records)
    print(f"{len(records)} documents ({', '.join(str(n) for n in LENGTHS)} tokens a chunk), "
          f"{chunks} chunks; wrote {out} ({out.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
