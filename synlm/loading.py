"""Loading a model: a checkpoint or run folder, or the untrained models a config builds (the
chance rows of the results), and the spread of a figure over seeds. Every command that reads
a model loads it here."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from synlm.runtime.run_folders import resolve_checkpoint
from synlm.runtime.runs import best_in_run, read_checkpoint


def load_model(path: str, flag: str = "--ckpt_path") -> Any:
    """The model of the checkpoint ``path`` names (a file, a run folder, which stands for its
    best, or ``FOLDER/best|last``: ``synlm.runtime.run_folders.resolve_checkpoint``), on the
    CPU in eval mode; a missing or unreadable checkpoint is a one-line ``CheckpointError`` naming
    ``flag``. The file read is the model's ``checkpoint_file`` (a path). torch's global RNG
    is left as it was (building the model draws its initial weights from a fork of it)."""
    import torch

    from synlm.registry import recipe_class

    # memory-mapped: checked before Lightning unpickles; the recipe by the name it saved
    # (SyntaxLM's checkpoints name none)
    saved = read_checkpoint(path, flag, "best").get("synlm") or {}
    model_class = recipe_class(saved.get("model_class"))
    file = resolve_checkpoint(path, best_in_run, flag, "best")
    with torch.random.fork_rng(devices=[]):
        model = model_class.load_from_checkpoint(file, map_location="cpu")
    model.checkpoint_file = str(file)  # the file read (synlm.tse.provenance)
    model.eval()
    return model


def untrained_model(build_model: Callable[..., Any], config: str, seed: int,
                    overrides: Sequence[str] = ()) -> Any:
    """The model ``build_model`` (``synlm.lightning_cli.from_config``) makes of
    ``config`` with ``seed_everything: seed``, untrained, in eval mode, with the vocabulary
    and normalisation of its data (for PaLM Table 4's random row)."""
    model = build_model(config, [f"--seed_everything={seed}",
                                 *(f"--{item}" for item in overrides)])
    model.setup("predict")  # takes the vocabulary and normalisation from its DataModule
    return model.eval()


def mean_and_std(results: Sequence[dict[str, Any]], digits: int = 2) -> dict[str, Any]:
    """Each numeric figure's mean over ``results`` and its ``_std``, the sample standard
    deviation (n - 1 in the denominator: the seeds are a sample of the seeds one could draw;
    None for a single result), rounded to ``digits`` places; other values as the first
    result has them."""
    out: dict[str, Any] = {"n_models": len(results)}
    for key, value in results[0].items():
        values = [r[key] for r in results]
        if isinstance(value, float) and None not in values:
            std = round(float(np.std(values, ddof=1)), digits) if len(values) > 1 else None
            out[key], out[f"{key}_std"] = round(float(np.mean(values)), digits), std
        else:
            out[key] = value
    return out


def untrained_copy(model: Any, seed: int) -> Any:
    """``model``'s architecture with fresh weights (``torch.manual_seed(seed)``), its
    vocabulary and normalisation (a transition LM's actions too), in eval mode: the chance
    row of a trained checkpoint."""
    import torch

    from synlm.transition.lm import TransitionLM

    torch.manual_seed(seed)
    transition = isinstance(model, TransitionLM)  # its hparams are TransitionLM's form
    # its constructor's arguments: not the recipe's class, which Lightning's subclass mode
    # records among them (``_class_path``)
    arguments = {key: value for key, value in model.hparams.items() if key != "_class_path"}
    fresh = (TransitionLM if transition else type(model))(**arguments)
    fresh.vocab, fresh.normalization = model.vocab, model.normalization
    if transition:
        fresh.action_vocab = model.action_vocab
    return fresh.eval()
