"""Write ``train.py`` checkpoints of the released RNNG code (aistairc/rnng-pytorch), top-down
and in-order, and what the released code computes with them, as the fixture of
``tests/test_convert.py`` (``synlm convert --from rnng-pytorch``)::

    python benchmarks/rnng_pytorch_checkpoints.py --reference PATH/TO/rnng-pytorch

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
"""

from __future__ import annotations

import argparse
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


def train(reference: Path, work: Path) -> dict[str, Path]:
    """The released preprocess.py and train.py on the sample trees: each strategy's
    checkpoint."""
    from synlm.syntax.readers import read_trees
    from synlm.syntax.trees import clean_tree

    trees = [clean_tree(t) for t, _ in read_trees(ROOT / "tests/fixtures/syntax/sample.mrg")]
    (work / "trees.txt").write_text("".join(t.pformat(margin=10**9) + "\n"
                                            for t in trees if t is not None))
    env = {"PYTHONPATH": str(reference), "OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"}
    subprocess.run([sys.executable, str(reference / "preprocess.py"), "--trainfile",
                    "trees.txt", "--valfile", "trees.txt", "--testfile", "trees.txt",
                    "--outputfile", "sample", "--vocabminfreq", "1", "--unkmethod", "unk",
                    "--jobs", "1"], cwd=work, env=env, check=True)
    out = {}
    for strategy in STRATEGIES:
        out[strategy] = work / f"{strategy}.pt"
        subprocess.run([sys.executable, "-c", SHIMS, str(reference / "train.py"),
                        "--train_file", "sample-train.json", "--val_file", "sample-val.json",
                        "--strategy", strategy, "--save_path", out[strategy].name, *TRAIN],
                       cwd=work, env=env, check=True)
    return out


def outputs(reference: Path, checkpoint: Path, strategy: str) -> dict[str, Any]:
    """What the released code computes with ``checkpoint``'s model (module docstring)."""
    sys.modules.setdefault("torch.utils.tensorboard",
                           types.SimpleNamespace(SummaryWriter=object))  # train.py imports it
    sys.path.insert(0, str(reference))
    from train import create_model
    from utils import get_in_order_actions

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
    sentences = load_sentences(strategy, get_in_order_actions)
    w_ids = [[vocab.get_id(w) for w in s["words"]] for s in sentences]
    a_ids = [action_dict.to_id(s["actions"]) for s in sentences]
    for s, w, (a_lp, w_lp, joint) in zip(sentences, w_ids,
                                         teacher_forced(model, w_ids, a_ids), strict=True):
        s.update(word_ids=w, action_log_probs=a_lp, word_log_probs=w_lp, joint=joint)
    alone = [beam_search(model, [w], SETTING, action_dict.i2a)[0] for w in w_ids]
    return {"sentences": sentences, "beams": {",".join(map(str, SETTING)): {"alone": alone}}}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reference", type=Path, required=True,
                        help="a checkout of aistairc/rnng-pytorch (see the module docstring)")
    args = parser.parse_args(argv)
    reference = args.reference.resolve()
    torch.set_num_threads(1)
    np.random.seed(0)
    with tempfile.TemporaryDirectory() as tmp:
        checkpoints = train(reference, Path(tmp))
        found = {}
        for strategy, path in checkpoints.items():
            shutil.copyfile(path, FIXTURES / f"released_{strategy}.pt")
            found[strategy] = outputs(reference, path, strategy)
    torch.save(found, FIXTURES / "released_outputs.pt")
    print(f"wrote {FIXTURES}/released_top_down.pt, released_in_order.pt, released_outputs.pt")


if __name__ == "__main__":
    main()
