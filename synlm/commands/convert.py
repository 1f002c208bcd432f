"""``synlm convert``: a checkpoint of another code base as a synlm run folder that
``parse``, ``evaluate-syntax``, ``test`` and ``lm-eval`` take (docs/models/rnng.md,
"rnng-pytorch checkpoints").

    synlm convert --from rnng-pytorch MODEL.pt --out DIR [--force]
    synlm convert --from pushdown MODEL.pt VOCAB.pkl --out DIR [--force]

``--from rnng-pytorch``: a ``train.py`` checkpoint of aistairc/rnng-pytorch (top-down or
in-order, over words or SentencePiece pieces), read without the released package
(``synlm.transition.rnng_pytorch``). ``DIR`` gets ``config.yaml`` (``TransitionLM``'s form),
``checkpoints/last.ckpt``, ``actions.json`` and the vocabulary: ``vocab.json`` (words), or
``spm.model`` (a subword checkpoint's SentencePiece model), and ``.synlm-output`` (what
this command wrote there). ``--from pushdown``: the ``model.pt`` and ``vocab.pkl`` of
MurtyShikhar/Pushdown-Layers (``synlm.transition.pushdown_checkpoint``,
docs/models/pushdown.md); ``DIR`` gets ``config.yaml`` (``PushdownLM``'s form),
``checkpoints/last.ckpt``, ``vocab.json`` and ``.synlm-output``. Either folder is written
in a temporary folder beside it and moved into place, so that an error leaves nothing
half-written. ``--force`` replaces a folder that holds only what ``synlm convert`` wrote
(``synlm.runtime.files.check_replaceable``); any other file in it is a one-line refusal,
and nothing is deleted.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from synlm.errors import InputError, SynLMError, report
from synlm.runtime.arguments import CommandParser
from synlm.runtime.files import check_replaceable, staged_folder
from synlm.runtime.threads import configure_threads

PROG = "synlm convert"
SOURCES = ("rnng-pytorch", "pushdown")
#: A subword checkpoint's SentencePiece model in the run folder.
SPM = "spm.model"


def build_parser() -> argparse.ArgumentParser:
    p = CommandParser(PROG, __doc__.split("\n\n")[0])
    # a positional: argparse's own add_argument (CommandParser's spells options)
    argparse.ArgumentParser.add_argument(p, "checkpoint", metavar="MODEL.pt",
                                         help="the checkpoint to convert")
    argparse.ArgumentParser.add_argument(p, "vocab", metavar="VOCAB.pkl", nargs="?",
                                         help="its vocabulary (--from pushdown)")
    p.add_argument("--from", dest="source", required=True, choices=SOURCES,
                   help="the code base that wrote it")
    p.add_argument("--out", required=True, help="the run folder to write (new or empty)")
    p.add_argument("--force", action="store_true",
                   help="replace a folder synlm convert wrote at --out (its .synlm-output)")
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``synlm convert``; returns the exit code."""
    args = build_parser().parse_args(argv)
    try:
        out = Path(args.out)
        check_replaceable(out, args.force)
        pushdown = args.source == "pushdown"
        if pushdown != (args.vocab is not None):
            raise InputError("VOCAB.pkl: --from pushdown takes the vocabulary after MODEL.pt, "
                             "--from rnng-pytorch none")
        for path in (args.checkpoint, args.vocab):
            if path is not None and not Path(path).is_file():
                raise InputError(f"{path}: no such file")
        configure_threads()  # torch: after the checks
        if pushdown:
            write_pushdown_run(args.checkpoint, args.vocab, out)
        else:
            write_run(args.checkpoint, out)
    except SynLMError as err:
        return report(err, PROG)
    print(f"{PROG}: wrote {out}; e.g. synlm parse --ckpt_path {out} --input FILE")
    return 0


def write_run(checkpoint: str | Path, out: str | Path) -> Path:
    """Convert the rnng-pytorch ``checkpoint`` into the run folder ``out`` (module
    docstring), written whole or not at all; returns ``out``."""
    import torch

    from synlm.data.subwords import SentencePieceVocab
    from synlm.runtime.run_folders import CHECKPOINTS, LAST
    from synlm.runtime.runs import CONFIG_KEY
    from synlm.transition.lm import TransitionLM
    from synlm.transition.rnng_pytorch import check_shapes, convert

    out = Path(out).absolute()
    parts = convert(checkpoint)
    dtype = next(iter(parts.state_dict.values())).dtype
    with torch.random.fork_rng(devices=[]):
        lm = TransitionLM(parts.model_config, vocab_size=len(parts.vocab),
                          n_actions=len(parts.action_vocab)).to(dtype)
    check_shapes(parts.state_dict, lm.model, checkpoint)
    lm.model.load_state_dict(parts.state_dict, strict=True)
    lm.vocab, lm.action_vocab = parts.vocab, parts.action_vocab
    data = ({"subwords": {"class_path": "synlm.data.subwords.SentencePieceModel",
                          "init_args": {"path": str(out / SPM), "eos": parts.vocab.eos}}}
            if isinstance(parts.vocab, SentencePieceVocab)
            else {"vocab_file": str(out / "vocab.json")})
    config = {"seed_everything": parts.seed, **_config(lm, parts.action_order, data)}
    saved = _saved(lm, config, "rnng-pytorch", checkpoint)
    del saved["synlm"]["rng"]  # no run to resume
    with staged_folder(out, PROG) as tmp:
        (tmp / CHECKPOINTS).mkdir()
        torch.save(saved, tmp / CHECKPOINTS / LAST)
        (tmp / "config.yaml").write_text(saved[CONFIG_KEY], encoding="utf-8")
        if isinstance(parts.vocab, SentencePieceVocab):
            (tmp / SPM).write_bytes(parts.vocab.model_proto)
        else:
            parts.vocab.save(tmp / "vocab.json")
        (tmp / "actions.json").write_text(json.dumps(parts.action_vocab.to_saved()),
                                          encoding="utf-8")
    return out


def write_pushdown_run(checkpoint: str | Path, vocab: str | Path, out: str | Path) -> Path:
    """Convert the released Pushdown-Layers ``checkpoint`` and ``vocab`` into the run folder
    ``out`` (module docstring), written whole or not at all; returns ``out``."""
    import torch

    from synlm.data.vocab import UNK, Vocab
    from synlm.runtime.run_folders import CHECKPOINTS, LAST
    from synlm.runtime.runs import CONFIG_KEY
    from synlm.transition.pushdown_checkpoint import read_model, read_vocabulary
    from synlm.transition.pushdown_lm import PushdownLM

    out = Path(out).absolute()
    model, config = read_model(str(checkpoint))
    words = read_vocabulary(str(vocab))
    if len(words) != config["vocab_size"]:
        raise InputError(f"{vocab}: {len(words)} words, but {checkpoint} has "
                         f"{config['vocab_size']}: not the vocabulary it was trained with")
    with torch.random.fork_rng(devices=[]):
        lm = PushdownLM(**config).to(model.embedding.weight.dtype)
    lm.model.load_state_dict(model.state_dict())
    lm.vocab = Vocab(words, unk=UNK if UNK in words else None)
    hp = {k: v for k, v in lm.hparams.items() if k not in ("_class_path", "vocab_size")}
    run_config = {"model": {"class_path": "PushdownLM", "init_args": hp},
                  "data": {"mode": "sentence", "vocab_file": str(out / "vocab.json")}}
    saved = _saved(lm, run_config, "pushdown", checkpoint)
    with staged_folder(out, PROG) as tmp:
        (tmp / CHECKPOINTS).mkdir()
        torch.save(saved, tmp / CHECKPOINTS / LAST)
        (tmp / "config.yaml").write_text(saved[CONFIG_KEY], encoding="utf-8")
        lm.vocab.save(tmp / "vocab.json")
    return out


def _saved(lm: Any, config: dict[str, Any], source: str, checkpoint: str | Path
           ) -> dict[str, Any]:
    """The Lightning checkpoint of the converted recipe ``lm``, with its run's ``config``
    and where it came from."""
    import yaml

    from synlm.runtime.runs import CONFIG_KEY

    saved: dict[str, Any] = {
        "state_dict": lm.state_dict(), "hyper_parameters": dict(lm.hparams),
        "pytorch-lightning_version": _lightning_version(), "epoch": 0, "global_step": 0,
        CONFIG_KEY: yaml.safe_dump(config, sort_keys=False),
        "converted_from": {"source": source, "file": str(Path(checkpoint).absolute())}}
    lm.on_save_checkpoint(saved)
    return saved


def _config(lm: Any, action_order: str, data: dict[str, Any]) -> dict[str, Any]:
    """The converted model's config in ``TransitionLM``'s form, with a DataModule that reads
    its vocabulary (``data``; a corpus to add for ``synlm test``)."""
    hp = dict(lm.hparams)
    init_args = {k: hp[k] for k in ("model", "loss_normalize", "beam_size", "word_beam_size",
                                    "shift_size")}
    return {"model": {"class_path": "TransitionLM", "init_args": init_args},
            "data": {"mode": "actions", "action_order": action_order, **data}}


def _lightning_version() -> str:
    import lightning

    return lightning.__version__


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
