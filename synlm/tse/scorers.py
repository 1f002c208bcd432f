"""The scorers of the models ``synlm evaluate-syntax`` names, in command-line order
(``build_scorers``): each synlm checkpoint or run folder's ``ModelScorer`` (a masked LM's:
``PLLScorer`` over ``SynLMMaskedLM``) with its untrained copies (its chance row), each Hugging
Face model's ``HFScorer`` (a causal LM) or ``PLLScorer`` (a masked LM, by
pseudo-log-likelihood); or a config's untrained seeds. What
the models cannot honour (a search flag where none searches, ``--eos`` where the
end-of-sentence term is 0 for every sentence or absent, ``--pll`` without a masked LM) is a
one-line ``InputError``.

Loading synlm's models sits above ``synlm.tse`` (``synlm.loading``): the command hands in
what loads them (``Builders``). torch, and transformers for a Hugging Face model, are
imported when a scorer is built.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from synlm.capabilities import RunsBackbone, Searches
from synlm.errors import InputError
from synlm.runtime.labels import default_labels
from synlm.tse.scores import ScoresPLL
from synlm.tse.sharding import local_device


def device_of(name: str) -> str:
    """``name``, a torch device; ``auto``: ``cuda`` where available, else ``cpu``; ``cuda``
    under torchrun: the process's own (``sharding.local_device``)."""
    import torch

    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    return local_device(name)


class ModelScorers(NamedTuple):
    """One model of the command line: its ``label`` (the column of the tables), ``source``
    (what was scored), its ``scorer`` (None for a config's untrained seeds alone) and the
    scorers of its ``untrained`` copies (its chance row)."""

    label: str
    source: str
    scorer: Any
    untrained: list[Any]


@dataclass(frozen=True)
class Settings:
    """How every model is scored: ``batch_size`` sentences a forward pass on ``device``;
    ``eos``, the end-of-sentence choice (None: each benchmark's reference convention);
    ``pll``, a masked LM's pseudo-log-likelihood (None: ``within_word_l2r``);
    ``trust_remote_code`` for Hugging Face folders; ``search_flag``, the first search flag
    given (``--beam-size``), refused where no model searches."""

    batch_size: int = 64
    device: str = "cpu"
    eos: bool | None = None
    pll: str | None = None
    trust_remote_code: bool = False
    search_flag: str | None = None


@dataclass(frozen=True)
class Builders:
    """What builds synlm's models, from the floors above ``synlm.tse``, handed in by the
    command: ``load`` reads a checkpoint or run folder, ``untrained_copy`` gives a model's
    architecture with fresh weights of a seed, ``search`` sets a model's search from the
    flags (its beam's sizes, or particle filtering; a model without search as it is), and
    ``untrained`` builds a config's untrained model of a seed (None: no config can be
    built)."""

    load: Callable[[str], Any]
    untrained_copy: Callable[[Any, int], Any]
    search: Callable[[Any], Any]
    untrained: Callable[[int], Any] | None = None


def check_models(settings: Settings, models: Sequence[tuple[str, Any]],
                 several: bool = False) -> None:
    """One-line errors for what the named models (source, model, searching as the flags
    say) cannot honour: a search flag when none of them searches, ``--eos`` for a single
    model (``several``: more were given) whose end term is 0 for every sentence
    (``synlm.tse.scoring.end_is_certain``; several models: that model's conventions say so
    instead)."""
    from synlm.tse.scoring import end_is_certain

    flag = settings.search_flag
    masked = [source for source, model in models if is_masked_synlm(model)]
    if settings.eos and masked:
        raise InputError(f"--eos: {masked[0]} is a masked LM, scored by pseudo-log-likelihood, "
                         "which has no end-of-sentence term; drop --eos")
    if flag and not any(isinstance(model, Searches) for _, model in models):
        raise InputError(f"{flag}: {models[0][0]} has no beam search; the beam flags are for "
                         "transition LMs (RNNG, PLM, PLM-mask, TG)")
    if settings.eos and len(models) == 1 and not several and end_is_certain(models[0][1]):
        source, model = models[0]
        raise InputError(f"--eos: the end-of-sentence term of {source} is 0 for every "
                         f"sentence (its search renormalises over the legal actions given "
                         f"the length, renormalised_given_length, and after the last word "
                         f"{type(model.model).__name__} can only close its constituents); "
                         "drop --eos, or add --search-convention all_actions")


def is_masked_synlm(model: Any) -> bool:
    """Whether a synlm ``model`` is a masked LM: its backbone attends both ways."""
    return isinstance(model, RunsBackbone) and model.backbone.spec.bidirectional


def _scorer(model: Any, settings: Settings, source: str) -> Any:
    """The scorer of a synlm ``model`` loaded from ``source``: its ``ModelScorer``, or a
    masked LM's ``PLLScorer`` (the pseudo-log-likelihood of ``settings.pll``)."""
    if is_masked_synlm(model):
        from synlm.tse.masked_scoring import PLLScorer, SynLMMaskedLM

        return PLLScorer(SynLMMaskedLM(model, source), variant=settings.pll or "within_word_l2r",
                         batch_size=settings.batch_size, device=settings.device)
    from synlm.tse.scoring import ModelScorer

    return ModelScorer(model, settings.batch_size, settings.device)


def build_scorers(models: Sequence[tuple[str, str]], labels: Sequence[str] | None,
                  settings: Settings, builders: Builders, untrained: int = 0,
                  config: str | None = None, seeds: int = 1) -> list[ModelScorers]:
    """The scorers of ``models``, (flag, source) in command-line order (``ckpt_path``: a
    synlm checkpoint or run folder, ``hf``: a Hugging Face model), under ``labels`` (None:
    ``synlm.runtime.labels.default_labels``); each label's first checkpoint with
    ``untrained`` untrained copies (seeds 0..N-1; the label's other runs, its seeds, share
    that chance row). With a ``config`` instead, its ``seeds`` untrained models
    (``builders.untrained``), under the config's name."""
    if config and builders.untrained is None:
        raise InputError("--config needs the CLI's model builder; run `synlm evaluate-syntax`")
    if config:
        label = (labels or [f"{Path(config).stem} untrained"])[0]
        chance = [builders.search(builders.untrained(seed)) for seed in range(seeds)]
        check_models(settings, [(config, chance[0])])
        return [ModelScorers(label, f"{config} untrained, seeds 0-{seeds - 1}", None,
                             [_scorer(model, settings, config) for model in chance])]
    labels = labels or default_labels([source for _, source in models])
    scorers = hf_scorers(models, settings)
    loaded = {k: builders.search(builders.load(source))
              for k, (flag, source) in enumerate(models) if flag == "ckpt_path"}
    if loaded:
        check_models(settings, [(models[k][1], model) for k, model in loaded.items()],
                     several=len(models) > 1)
    if settings.pll and loaded and not any(map(is_masked_synlm, loaded.values())) and \
            not any(isinstance(s, ScoresPLL) for s in scorers.values()):
        raise InputError(f"--pll: {models[next(iter(loaded))][1]} is a causal LM, scored by "
                         "its own log-probabilities; --pll is for a masked LM")
    out = []
    for k, ((_, source), label) in enumerate(zip(models, labels)):
        copies = []
        if k in loaded:
            model = loaded[k]
            scorers[k] = _scorer(model, settings, source)
            if label not in labels[:k]:
                copies = [_scorer(builders.search(builders.untrained_copy(model, seed)),
                                  settings, source) for seed in range(untrained)]
        out.append(ModelScorers(label, source, scorers[k], copies))
    return out


def check_hf_models(models: Sequence[tuple[str, str]], settings: Settings
                    ) -> dict[str, bool]:
    """Whether each ``hf`` model of ``models`` is a masked LM (its config alone is read),
    with a one-line error for a flag none of them can honour: ``--eos`` with a masked LM
    (pseudo-log-likelihood has no end term), ``--pll`` with causal LMs only. The command
    calls it before any benchmark is looked for."""
    names = [source for flag, source in models if flag == "hf"]
    if not names:
        return {}
    from synlm.tse.masked_scoring import is_masked_lm

    masked = {name: is_masked_lm(name, settings.trust_remote_code) for name in names}
    if settings.eos and any(masked.values()):
        raise InputError(f"--eos: {next(n for n in masked if masked[n])} is a masked LM, "
                         "scored by pseudo-log-likelihood, which has no end-of-sentence "
                         "term; drop --eos")
    if settings.pll and not any(masked.values()):
        raise InputError(f"--pll: {names[0]} is a causal LM, scored by its own "
                         "log-probabilities; --pll is for a masked LM (BERT, RoBERTa)")
    return masked


def hf_scorers(models: Sequence[tuple[str, str]], settings: Settings) -> dict[int, Any]:
    """The scorer of each ``hf`` model of ``models``, by its place among them: a causal LM's
    log-probabilities, or a masked LM's pseudo-log-likelihood."""
    names = [(k, source) for k, (flag, source) in enumerate(models) if flag == "hf"]
    if not names:
        return {}
    from synlm.tse.hf_scoring import HFScorer
    from synlm.tse.masked_scoring import PLLScorer

    remote = settings.trust_remote_code
    masked = check_hf_models(models, settings)
    return {k: PLLScorer(name, variant=settings.pll or "within_word_l2r",
                         batch_size=settings.batch_size, device=settings.device,
                         trust_remote_code=remote) if masked[name]
            else HFScorer(name, batch_size=settings.batch_size, device=settings.device,
                          trust_remote_code=remote)
            for k, name in names}
