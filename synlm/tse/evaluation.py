"""Models scored on the benchmarks, as ``synlm evaluate-syntax`` reports them: each model's
results and its untrained copies' (``Evaluated``, from ``evaluate_model``), the warnings
they call for (unknown words, sentences without a parse), the JSON object the command
prints (``summarize_runs``) and what it was computed from (``provenance_of``).

Each sentence is scored from a fresh state, its words normalised as the training corpus was,
under each benchmark's reference convention for the end of the sentence unless ``eos`` says
otherwise. A transition LM (RNNG, PLM, PLM-mask, TG) is scored by its search under its
surprisal convention, which each benchmark's convention names (with ``eos_term`` where the
end's term is 0 for every sentence: ``ModelScorer.end_is_certain``); a pair or item with a
sentence the search finds no tree for is counted apart (``no_parse``).

A label given to several models names the seeds of one model (``by_label``): its headline is
their mean and spread to 4 places, computed by the ``Spread`` the command hands in
(``synlm.loading.mean_and_std``, above this floor).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from synlm.runtime.threads import Threads
from synlm.tse.benchmarks import BenchmarkResult, score_benchmarks
from synlm.tse.minimal_pairs import is_unparsed
from synlm.tse.scorers import ModelScorers
from synlm.tse.scores import ScoresPLL, SearchesTrees

#: One model's results, by benchmark.
Results = dict[str, BenchmarkResult]
#: Headlines (one a seed) and the places to round to -> each figure's mean and
#: ``<figure>_std``, and ``n_models`` (``synlm.loading.mean_and_std``).
Spread = Callable[..., dict[str, Any]]
#: What a transition LM's conventions say where its end term is 0 for every sentence.
END_IS_CERTAIN = "0 for every sentence (renormalised, and after the last word only the " \
    "closing REDUCEs are legal): --eos changes nothing"
#: The scorer that scores one benchmark, given a model's scorer and the benchmark's name (the
#: command's progress display).
Shown = Callable[[Any, str], Any]


@dataclass
class Evaluated:
    """One model's results and its untrained copies' (the chance row), under its label
    (``name``); ``source``: what was scored (a checkpoint, run folder or Hugging Face model)."""

    name: str
    results: Results
    untrained: list[Results]
    vocab_size: int
    source: str = ""


def by_label(runs: Sequence[Evaluated]) -> dict[str, list[Evaluated]]:
    """The runs under each label, in command-line order: a label given to several models
    names the seeds of one model."""
    groups: dict[str, list[Evaluated]] = {}
    for run in runs:
        groups.setdefault(run.name, []).append(run)
    return groups


def _as_it_is(scorer: Any, name: str) -> Any:
    return scorer


def evaluate_scorer(scorer: Any, loaded: Mapping[str, list[Any]], eos: bool | None,
                    search_texts: Mapping[str, str], show: Shown = _as_it_is) -> Results:
    """The benchmarks ``load_benchmarks`` read, scored with ``scorer`` under ``eos`` (None:
    each benchmark's reference convention), a benchmark at a time through ``show``; a
    transition LM's results name its surprisal convention (``search_convention``, in words
    from ``search_texts``: ``synlm.transition.types.CONVENTIONS``) and its search, a masked
    LM's its pseudo-log-likelihood."""
    results = {}
    for name, data in loaded.items():
        results.update(score_benchmarks({name: data}, show(scorer, name), eos))
    convention = scorer.convention if isinstance(scorer, SearchesTrees) else None
    if convention is not None:
        for result in results.values():
            result.convention["search_convention"] = convention
            result.convention["search_text"] = search_texts[convention]
            result.convention["search"] = scorer.model.beam.describe()  # beam or particles
            if scorer.end_is_certain:
                result.convention["eos_term"] = END_IS_CERTAIN
    if isinstance(scorer, ScoresPLL):  # a masked LM: which pseudo-log-likelihood
        pll = scorer.pll
        from synlm.tse.masked_scoring import VARIANT_TEXT

        for result in results.values():
            result.convention.update(pll=pll, pll_text=VARIANT_TEXT[pll])
    return results


def evaluate_model(model: ModelScorers, loaded: Mapping[str, list[Any]], eos: bool | None,
                   search_texts: Mapping[str, str], show: Shown = _as_it_is) -> Evaluated:
    """``model`` (label, source, scorer, untrained scorers) and its untrained copies scored
    on the benchmarks ``loaded`` (``evaluate_scorer``)."""
    label, source, scorer, chance = model
    results = evaluate_scorer(scorer, loaded, eos, search_texts, show) \
        if scorer is not None else {}
    untrained = [evaluate_scorer(c, loaded, eos, search_texts, show) for c in chance]
    return Evaluated(label, results, untrained, (scorer or chance[0]).vocab_size, source)


def headline(results: Results) -> dict[str, float | None]:
    """The headline figures of every benchmark of ``results``, in one dict."""
    return {k: v for result in results.values() for k, v in result.headline.items()}


def conventions(results: Results) -> dict[str, dict[str, Any]]:
    """How each benchmark treated the end of the sentence (``BenchmarkResult.convention``)."""
    return {name: result.convention for name, result in results.items()}


def unknown_warnings(results: Results, threshold: float, vocab_size: int) -> list[str]:
    """A line for each benchmark whose unknown-word share passes ``threshold``."""
    return [f"warning: {result.name}: {result.unknown_share:.0%} of the pairs or items "
            f"have a word outside the model's {vocab_size}-word vocabulary where it matters; "
            f"compare the in_vocabulary numbers (docs/syntactic-evaluation.md)"
            for result in results.values()
            if result.unknown_share is not None and result.unknown_share > threshold]


def no_parse_warnings(results: Results, name: str) -> list[str]:
    """A line for each benchmark with pairs or items the beam found no tree for."""
    counts = {result.name: sum(map(is_unparsed, result.records))
              for result in results.values()}
    return [f"warning: {name}: {benchmark}: {count} pairs or items have a sentence "
            "with no parse within the beam (even with no stack bound); counted apart "
            "(no_parse), outside the accuracies" for benchmark, count in counts.items() if count]


def run_warnings(run: Evaluated, unknown_share: float | None = None) -> list[str]:
    """The warnings of ``run``: with ``unknown_share``, each benchmark whose share of pairs
    or items with an unknown word passes it; then those with sentences without a parse, the
    model's and its untrained copies'."""
    lines = [] if unknown_share is None else unknown_warnings(
        run.results or run.untrained[0], unknown_share, run.vocab_size)
    return lines + no_parse_warnings(run.results, run.name) + [
        line for r in run.untrained for line in no_parse_warnings(r, f"{run.name} untrained")]


def summarize_runs(runs: Sequence[Evaluated], benchmarks: Sequence[str], subset: int | None,
                   eos: bool | None, spread: Spread, config: bool = False) -> dict[str, Any]:
    """The JSON object the command prints, for ``runs`` scored on ``benchmarks`` (``subset``
    items of each, ``eos``): one model's summaries (``model``: what was scored, ``label``:
    its name in the tables), or several side by side under ``models``, by label (a label of
    several runs: the ``spread`` of their headlines, ``per_seed``); ``config``: the one run
    is a config's untrained seeds."""
    summary: dict[str, Any] = {"benchmarks": list(benchmarks), "subset": subset, "eos": eos}
    if config:
        chance = runs[0].untrained
        summary["model"], summary["label"] = runs[0].source, runs[0].name
        per_seed = [headline(r) for r in chance]
        summary["headline"] = spread(per_seed, digits=4)
        summary["per_seed"] = per_seed
        summary["conventions"] = conventions(chance[0])
        return summary
    first = runs[0]
    summary["conventions"] = conventions(first.results)
    if len(runs) == 1:
        summary["model"], summary["label"] = first.source, first.name
        summary["headline"] = headline(first.results)
        summary.update({name: result.summary for name, result in first.results.items()})
        if first.untrained:
            summary["untrained"] = spread([headline(r) for r in first.untrained], digits=4)
        return summary
    models: dict[str, Any] = {}
    for label, group in by_label(runs).items():
        entry: dict[str, Any] = {"model": group[0].source, "headline": headline(group[0].results)}
        if len(group) > 1:
            per_seed = [headline(run.results) for run in group]
            entry = {"models": [run.source for run in group],
                     "headline": spread(per_seed, digits=4), "per_seed": per_seed}
        entry["conventions"] = conventions(group[0].results)
        if group[0].untrained:
            entry["untrained"] = spread([headline(r) for r in group[0].untrained], digits=4)
        models[label] = entry
    summary["models"] = models
    return summary


def provenance_of(command: str, models: Sequence[ModelScorers], threads: Threads,
                  files: Mapping[str, Sequence[Path]], runs: Sequence[Evaluated] = (),
                  config: str | None = None,
                  sentences: tuple[str | Path, str] | None = None) -> dict[str, Any]:
    """What ``runs`` were computed from (``synlm.tse.provenance.collect``), as JSON: the
    ``command``, the ``models`` scored, the ``threads``, the benchmark ``files`` read, each
    run's conventions; ``config``: the file of a config's untrained seeds; ``sentences``:
    the ``--sentences`` file and how its lines became words (``--tokenise``)."""
    from synlm.tse import provenance

    return provenance.collect(
        command, [(label, scorer, chance) for label, _, scorer, chance in models], threads,
        files, [conventions(run.results or run.untrained[0]) for run in runs],
        config, sentences).to_json()
