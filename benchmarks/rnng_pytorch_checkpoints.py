"""Write ``train.py`` checkpoints of the released RNNG code (aistairc/rnng-pytorch), top-down
and in-order, over words and over SentencePiece pieces, and what the released code computes
with them, as the fixture of ``tests/test_convert.py`` (``synlm convert --from
rnng-pytorch``)::

    SYNLM_DATA_DIR=/path/to/data python benchmarks/rnng_pytorch_checkpoints.py \
        --reference PATH/TO/rnng-pytorch

``PATH/TO/rnng-pytorch`` is the checkout described in tests/fixtures/rnng/README.md. The
script runs the released ``preprocess.py`` on the cleaned trees of
``tests/fixtures/syntax/sample.mrg`` (``--unkmethod unk --vocabminfreq 1``) and its
``train.py`` for two epochs of a tiny model (``--fixed_stack --w_dim 8 --h_dim 8
--batch_size 4 --device cpu``, its default seed), in a temporary folder, and copies each
checkpoint it saves to ``tests/fixtures/rnng/released_{top_down,in_order}.pt``. Two shims
let the 2021 code run on today's libraries without changing a number: a stand-in for
``torch.utils.tensorboard`` (no logging) and ``np.random.permutation`` of a list of
unequal batches (which today's NumPy refuses) as a permutation of its indices.

Then, with the released code and each checkpoint's model cast to float64 in eval mode, it
writes ``released_outputs.pt`` (``torch.load(weights_only=True)``): per strategy, the six
sentences of ``benchmarks/rnng_reference.py`` with their word ids, teacher-forced action and
word log-probabilities (with ``<pad>``'s word and action biases at -1e30: the converted
model leaves ``<pad>`` out of its softmaxes as the released beam search does) and
``word_sync_beam_search`` at 10/5/1 on each sentence alone (surprisals and n-best parses; the
in-order model searches with ``max_cons_nts = 3`` as ``beam_search.py`` sets it).

Subwords: the released ``preprocess.py``'s ``learn_sentencepiece`` trains a SentencePiece
unigram model of 400 pieces on the words of the NLTK sample's trees
(``nltk_treebank/treebank.zip`` under ``SYNLM_DATA_DIR``, cleaned as above; as
``--unkmethod subword --subword_type unigram --vocabsize 400`` does, with
``treat_whitespace_as_suffix``), then
preprocesses the sample trees with that model (``--vocabfile``), and ``train.py
--sp_model`` trains each strategy as above: ``released_subword_{top_down,in_order}.pt``. For
the six sentences, ``released_subword_outputs.pt`` holds the released pieces
(``transform_to_subword_tree``), their ids and word ends (``subword_end_mask``), the
released oracle's actions over the pieces, teacher-forced log-probabilities and the
per-piece surprisals and n-best parses of ``word_sync_beam_search`` at 10/5/1 with that mask.

``berkeley_rule.pt``: the released ``utils.berkeley_unk_conv`` of ``BERKELEY_WORDS``, the
words ``tests/test_convert.py`` checks ``synlm.data.unknown_words.berkeley_rule`` on, and the
ids a released ``--unkmethod berkeleyrule`` vocabulary gives them (``berkeley_rule``).

``released_berkeleyrule2.pt``: the top-down model trained as above, its vocabulary built by
``preprocess.py --unkmethod berkeleyrule2 --vocabminfreq 2`` (the classes of every training
word, then the words seen twice or more). ``berkeley_rule2.pt``: the released
``utils.berkeley_unk_conv2`` of ``BERKELEY2_WORDS`` (``classes``), and the id that
checkpoint's pickled ``Vocabulary.get_id`` gives each of ``BERKELEY2_WORDS`` and of the six
sentences' words (``ids``; ``None`` where it raises ``KeyError``: a class the vocabulary
lacks, with no ``<unk>`` to fall back on). ``--berkeley-only`` writes these three files
alone.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import types
from pathlib import Path
from typing import Any

import numpy as np
import torch
from rnng_reference import (
    FIXTURES,
    PAD_LOGIT,
    ROOT,
    STRATEGIES,
    beam_search,
    load_sentences,
    teacher_forced,
)

SETTING = (10, 5, 1)
#: preprocess.py's SentencePiece model (module docstring).
PIECES = ["--unkmethod", "subword", "--subword_type", "unigram", "--vocabsize", "400"]
#: preprocess.py's ``learn_sentencepiece`` with those flags on the NLTK sample's words: the
#: model alone (preprocess.py would go on to rewrite all of those trees).
LEARN_PIECES = """
import argparse, preprocess
preprocess.learn_sentencepiece("nltk.txt", "nltk-spm", argparse.Namespace(
    subword_user_defined_symbols=None, keep_ptb_bracket=False, jobs=1, seqlength=300,
    minseqlength=0, vocabsize=400, subword_type="unigram"))
"""
#: Words covering each branch of the released ``berkeley_unk_conv``.
BERKELEY_WORDS = ["cat", "Cat", "dog-house", "1989", "1,200", "2nd", "running", "Running",
                  "walked", "quickly", "cats", "biggest", "bigger", "nation", "factory",
                  "unhappy", "Unhappy", "formal", "U.S.", "co-op", "e-mail", "ab", "A",
                  "3", "x.y", "well-known", "Inc.", "est", "alerts", "-", "..."]
#: Words covering each branch of the released ``berkeley_unk_conv2``: capitalisation (one
#: capital first, several, a capital after a non-letter, lower case, none; capitals and lower
#: case counted among letters only: Roman numerals are neither), digits, dashes, the ``-s``
#: rule and its exceptions, each suffix, and the conditions that drop it.
BERKELEY2_WORDS = ["cat", "Cat", "USA", "UNK", "3M", "1989", ",", "-", "2nd", "dog-house",
                   "1-2", "Dog-houses", "cats", "glass", "radii", "bonus", "gas", "as", "is",
                   "Alerts", "walked", "running", "nation", "bigger", "BIGGER", "biggest",
                   "quickly", "unity", "happy", "formal", "table", "bed", "well-liked",
                   "B52ing", "4wheeled", "WALKED", "Walked", "\u216b", "\u216bs", "\u217b",
                   "x\u216b", "walked  "]
TRAIN = ["--fixed_stack", "--w_dim", "8", "--h_dim", "8", "--num_epochs", "2",
         "--batch_size", "4", "--device", "cpu"]
#: Run before the released train.py (see the module docstring).
SHIMS = """
import runpy, sys, types
import numpy as np
tensorboard = types.ModuleType("torch.utils.tensorboard")
tensorboard.SummaryWriter = object
sys.modules["torch.utils.tensorboard"] = tensorboard
permutation = np.random.permutation
np.random.permutation = (lambda x: [x[i] for i in permutation(len(x))]
                         if isinstance(x, list) else permutation(x))
sys.argv = ["train.py", *sys.argv[1:]]
runpy.run_path(sys.argv.pop(1), run_name="__main__")
"""


def cleaned_trees(path: Path, out: Path) -> None:
    """The trees of ``path`` cleaned as synlm's PTB corpora clean them, one a line."""
    from synlm.syntax.readers import read_trees
    from synlm.syntax.trees import clean_tree

    trees = [clean_tree(t) for t, _ in read_trees(path)]
    out.write_text("".join(t.pformat(margin=10**9) + "\n" for t in trees if t is not None))


def train(reference: Path, work: Path, subwords: bool = False,
          vocab: tuple[str, ...] = ("--vocabminfreq", "1", "--unkmethod", "unk"),
          strategies: tuple[str, ...] = tuple(STRATEGIES)) -> dict[str, Path]:
    """The released preprocess.py and train.py on the sample trees, over words (a
    vocabulary made with the flags ``vocab``) or pieces (module docstring): each strategy's
    checkpoint."""
    cleaned_trees(ROOT / "tests/fixtures/syntax/sample.mrg", work / "trees.txt")
    env = {"PYTHONPATH": str(reference), "OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"}

    def preprocess(train_file: str, output: str, *flags: str) -> None:
        subprocess.run([sys.executable, str(reference / "preprocess.py"), "--trainfile",
                        train_file, "--valfile", "trees.txt", "--testfile", "trees.txt",
                        "--outputfile", output, "--jobs", "1", *flags], cwd=work, env=env,
                       check=True)

    pieces = []
    if subwords:
        data = Path(os.environ.get("SYNLM_DATA_DIR", "data"))
        cleaned_trees(data / "nltk_treebank" / "treebank.zip", work / "nltk.txt")
        subprocess.run([sys.executable, "-c", LEARN_PIECES], cwd=work, env=env, check=True)
        preprocess("trees.txt", "sample", *PIECES, "--vocabfile", "nltk-spm.model")
        pieces = ["--sp_model", "sample-spm.model"]
    else:
        preprocess("trees.txt", "sample", *vocab)
    out = {}
    for strategy in strategies:
        out[strategy] = work / f"{strategy}.pt"
        subprocess.run([sys.executable, "-c", SHIMS, str(reference / "train.py"),
                        "--train_file", "sample-train.json", "--val_file", "sample-val.json",
                        "--strategy", strategy, "--save_path", out[strategy].name, *TRAIN,
                        *pieces], cwd=work, env=env, check=True)
    return out


def released_model(reference: Path, checkpoint: Path, strategy: str) -> tuple[Any, Any, Any]:
    """(model, vocab, action_dict) of ``checkpoint`` through the released code: the model
    in float64, eval mode, ``<pad>`` biased out (module docstring)."""
    sys.modules.setdefault("torch.utils.tensorboard",
                           types.SimpleNamespace(SummaryWriter=object))  # train.py imports it
    if str(reference) not in sys.path:
        sys.path.insert(0, str(reference))
    from train import create_model

    saved = torch.load(checkpoint, weights_only=False)
    vocab, action_dict = saved["vocab"], saved["action_dict"]
    model = create_model(saved["args"], action_dict, vocab)
    model.load_state_dict(saved["model_state_dict"])
    model = model.double().eval()
    if strategy == "in_order":
        model.max_cons_nts = 3
    with torch.no_grad():
        model.vocab_mlp.bias[vocab.padding_idx] = PAD_LOGIT
        model.action_mlp.bias[action_dict.padding_idx] = PAD_LOGIT
    return model, vocab, action_dict


def outputs(reference: Path, checkpoint: Path, strategy: str) -> dict[str, Any]:
    """What the released code computes with ``checkpoint``'s model (module docstring)."""
    model, vocab, action_dict = released_model(reference, checkpoint, strategy)
    from utils import get_in_order_actions

    sentences = load_sentences(strategy, get_in_order_actions)
    w_ids = [[vocab.get_id(w) for w in s["words"]] for s in sentences]
    a_ids = [action_dict.to_id(s["actions"]) for s in sentences]
    for s, w, (a_lp, w_lp, joint) in zip(sentences, w_ids,
                                         teacher_forced(model, w_ids, a_ids), strict=True):
        s.update(word_ids=w, action_log_probs=a_lp, word_log_probs=w_lp, joint=joint)
    alone = [beam_search(model, [w], SETTING, action_dict.i2a)[0] for w in w_ids]
    return {"sentences": sentences, "beams": {",".join(map(str, SETTING)): {"alone": alone}}}


def subword_outputs(reference: Path, checkpoint: Path, strategy: str) -> dict[str, Any]:
    """What the released code computes with a subword ``checkpoint``'s model: the six
    sentences as its pieces (module docstring)."""
    model, vocab, action_dict = released_model(reference, checkpoint, strategy)
    from nltk import Tree
    from preprocess import get_actions, get_tags_tokens_lowercase, transform_to_subword_tree
    from utils import get_in_order_actions, get_subword_boundary_mask

    sentences = load_sentences(strategy, get_in_order_actions)
    for s in sentences:
        tree = transform_to_subword_tree(Tree.fromstring(s["tree"]).pformat(margin=10**9),
                                         vocab.sp)
        _, pieces, _ = get_tags_tokens_lowercase(tree)
        actions = (get_in_order_actions(tree, subword_tokenized=True)
                   if strategy == "in_order" else get_actions(tree))
        s.update(pieces=pieces, piece_ids=vocab.sp.piece_to_id(pieces), actions=actions,
                 word_ends=get_subword_boundary_mask(pieces))
    p_ids = [s["piece_ids"] for s in sentences]
    ends = [s["word_ends"] for s in sentences]
    a_ids = [action_dict.to_id(s["actions"]) for s in sentences]
    assert all(sum(e) == len(s["words"]) for e, s in zip(ends, sentences, strict=True))
    for s, (a_lp, w_lp, joint) in zip(sentences, teacher_forced(model, p_ids, a_ids, ends),
                                      strict=True):
        s.update(action_log_probs=a_lp, word_log_probs=w_lp, joint=joint)
    alone = [beam_search(model, [p], SETTING, action_dict.i2a, ends=[e])[0]
             for p, e in zip(p_ids, ends, strict=True)]
    return {"sentences": sentences, "beams": {",".join(map(str, SETTING)): {"alone": alone}}}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reference", type=Path, required=True,
                        help="a checkout of aistairc/rnng-pytorch (see the module docstring)")
    parser.add_argument("--berkeley-only", action="store_true",
                        help="write only the unknown-word rules' fixtures (berkeley_rule.pt, "
                             "released_berkeleyrule2.pt, berkeley_rule2.pt)")
    args = parser.parse_args(argv)
    reference = args.reference.resolve()
    torch.set_num_threads(1)
    np.random.seed(0)
    for subwords, prefix, compute in ((False, "released", outputs),
                                      (True, "released_subword", subword_outputs)):
        if args.berkeley_only:
            break
        with tempfile.TemporaryDirectory() as tmp:
            checkpoints = train(reference, Path(tmp), subwords)
            found = {}
            for strategy, path in checkpoints.items():
                shutil.copyfile(path, FIXTURES / f"{prefix}_{strategy}.pt")
                found[strategy] = compute(reference, path, strategy)
        torch.save(found, FIXTURES / f"{prefix}_outputs.pt")
        print(f"wrote {FIXTURES}/{prefix}_top_down.pt, {prefix}_in_order.pt, "
              f"{prefix}_outputs.pt")
    torch.save(berkeley_rule(reference), FIXTURES / "berkeley_rule.pt")
    print(f"wrote {FIXTURES}/berkeley_rule.pt")
    with tempfile.TemporaryDirectory() as tmp:
        (checkpoint,) = train(reference, Path(tmp), vocab=("--vocabminfreq", "2", "--unkmethod",
                                                           "berkeleyrule2"),
                              strategies=("top_down",)).values()
        shutil.copyfile(checkpoint, FIXTURES / "released_berkeleyrule2.pt")
    torch.save(berkeley_rule2(reference, FIXTURES / "released_berkeleyrule2.pt"),
               FIXTURES / "berkeley_rule2.pt")
    print(f"wrote {FIXTURES}/released_berkeleyrule2.pt, berkeley_rule2.pt")


def berkeley_rule(reference: Path) -> dict[str, Any]:
    """The released ``berkeley_unk_conv`` of ``BERKELEY_WORDS`` (``classes``), and a released
    ``Vocabulary`` built as ``preprocess.py --unkmethod berkeleyrule --vocabminfreq 2`` builds
    it from the six sentences' words (``i2w``; the classes of every word as its specials, in
    sorted order): the id its ``get_id`` gives each of ``BERKELEY_WORDS`` and of those words
    (``ids``)."""
    if str(reference) not in sys.path:
        sys.path.insert(0, str(reference))
    from data import Vocabulary
    from utils import berkeley_unk_conv

    words = [w for s in load_sentences() for w in s["words"]]
    counts = {w: words.count(w) for w in dict.fromkeys(words)}
    specials = sorted({berkeley_unk_conv(w) for w in counts})
    vocab = Vocabulary([(w, c) for w, c in counts.items() if c >= 2], "<pad>", "berkeleyrule",
                       "<unk>", specials)
    return {"classes": {w: berkeley_unk_conv(w) for w in BERKELEY_WORDS}, "i2w": vocab.i2w,
            "ids": {w: vocab.get_id(w) for w in [*BERKELEY_WORDS, *counts]}}


def berkeley_rule2(reference: Path, checkpoint: Path) -> dict[str, Any]:
    """The released ``berkeley_unk_conv2`` of ``BERKELEY2_WORDS`` (``classes``), and the id
    the pickled vocabulary of ``checkpoint`` (``--unkmethod berkeleyrule2``) gives each of
    ``BERKELEY2_WORDS`` and of the six sentences' words, ``None`` where its ``get_id``
    raises ``KeyError`` (``ids``)."""
    if str(reference) not in sys.path:
        sys.path.insert(0, str(reference))
    from utils import berkeley_unk_conv2

    vocab = torch.load(checkpoint, weights_only=False)["vocab"]
    assert vocab.unkmethod == "berkeleyrule2"

    def get_id(word: str) -> int | None:
        try:
            return vocab.get_id(word)
        except KeyError:
            return None

    words = [w for s in load_sentences() for w in s["words"]]
    return {"classes": {w: berkeley_unk_conv2(w) for w in BERKELEY2_WORDS},
            "ids": {w: get_id(w) for w in dict.fromkeys([*BERKELEY2_WORDS, *words])}}


if __name__ == "__main__":
    main()
