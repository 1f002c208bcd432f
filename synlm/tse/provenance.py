"""What a result of ``synlm evaluate-syntax`` was computed from (``Provenance``).

- each model (``ModelProvenance``): the checkpoint file its path resolved to (a run folder
  stands for its best checkpoint), or every file of a Hugging Face model's folder that
  changes a score (its config, generation config, tokenizer files, the code it runs with
  ``--trust-remote-code`` and its weights: ``model_files``), each with its sha256; its class
  and architecture (the network a synlm recipe wraps; a Hugging Face config's
  ``architectures`` and ``model_type``), a synlm model's vocabulary (its size and the sha256
  of the form a checkpoint stores it in), parameter count and type; how
  it was scored: the surprisal (``exact`` for a model read left to right, a transition LM's
  search convention, ``pseudo_log_likelihood`` for a masked LM), the PLL variant, a
  transition LM's search (beam sizes or particles, as ``synlm.transition.beam`` holds
  them), and whether each benchmark counted the end of the sentence; the untrained models
  scored beside it;
- each benchmark file read (the staged files, one's own suites and pairs), with its sha256;
  or the ``--sentences`` file, with its sha256 and how its lines became words (``tokenise``:
  ``whitespace``, the tokens as given, or ``treebank``, raw text tokenised);
- synlm's version (and the source tree's ``git describe`` where synlm runs from a checkout),
  torch's, transformers' and Python's; the command line, the folder it ran in, when it ran,
  the thread count (and why that many), the device.

A file is hashed a megabyte at a time, and once a process however many outputs name it
(``file_digest`` keeps each digest by path, size and modification time). The command prints
the record in its JSON (``provenance``), writes it beside each file it writes
(``<file>.provenance.json``: a JSON-lines, CSV or lm-zoo table stays as its readers expect
it) and into a report folder (``provenance.json``).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import platform
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

import synlm
from synlm.capabilities import FromCheckpoint, RunsBackbone, Searches
from synlm.data.files import sha256_of
from synlm.data.vocab import atomic_write_text
from synlm.runtime.threads import Threads
from synlm.tse.scores import AdaptsSynLM, RunsOnDevice, ScoresHubModel, ScoresPLL

#: The name a report folder's record has; beside a file ``<file>`` it is ``<file>`` + ``SUFFIX``.
REPORT_FILE = "provenance.json"
SUFFIX = ".provenance.json"
#: A Hugging Face folder's weights, as transformers looks for them (safetensors first); a
#: sharded model names its shards in the index.
WEIGHTS = ("model.safetensors", "pytorch_model.bin")
#: The other files of a Hugging Face folder that change a score, where it has them: the
#: model's config and generation config, and its tokenizer's files (byte-level BPE's, BERT's
#: WordPiece, SentencePiece models, added and special tokens).
SCORING_FILES = ("config.json", "generation_config.json", "tokenizer.json",
                 "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json",
                 "vocab.json", "merges.txt", "vocab.txt", "spiece.model",
                 "sentencepiece.bpe.model", "tokenizer.model")


@dataclass(frozen=True)
class FileDigest:
    """A file read: its absolute path, sha256 (hex) and size in bytes."""

    path: str
    sha256: str
    bytes: int


@functools.cache
def _sha256(path: str, size: int, modified_ns: int) -> str:
    return sha256_of(Path(path))  # streamed; size and time in the key: a rewritten file anew


def file_digest(path: str | Path) -> FileDigest:
    """``path``'s sha256, computed once a process for a file of the same size and time."""
    resolved = Path(path).resolve()
    stat = resolved.stat()
    return FileDigest(str(resolved), _sha256(str(resolved), stat.st_size, stat.st_mtime_ns),
                      stat.st_size)


@dataclass(frozen=True)
class ModelProvenance:
    """One model of a command and how it was scored (the module's docs).

    Attributes:
        name: the model's name in the results.
        model_class: the class scored (``synlm.lm.SyntaxLM``,
            ``transformers...GPT2LMHeadModel``); the scorer's for a scorer with no
            ``model`` (a ``synlm.tse.scores.Scorer`` of one's own).
        parameters: its parameter count (a tied matrix once); ``dtype`` their type (None
            without a model).
        architecture: the network a synlm recipe wraps, by class path: a ``SyntaxLM``'s
            backbone, a ``TransitionLM``'s model (``synlm.transition.rnng.RNNG``); a
            Hugging Face model's config's ``architectures`` and ``model_type``
            (``GPT2LMHeadModel (gpt2)``).
        files: the checkpoint file it was loaded from, or the files of a Hugging Face
            model's folder that change a score (``model_files``); none for models built
            untrained.
        vocabulary: a synlm model's vocabulary: ``size`` and the ``sha256`` of the JSON of
            its saved form (``Vocab.to_saved``, what a checkpoint stores), which tells
            apart the vocabularies of untrained models built from different corpora.
        surprisal: ``exact``, ``renormalised_given_length``, ``all_actions``,
            ``pseudo_log_likelihood``, or ``scorer`` (a scorer of one's own: its own).
        eos: for each benchmark, whether its end-of-sentence term counted.
        untrained: how many untrained models of its config were scored (``--untrained``,
            ``--config --seeds``).
    """

    name: str
    model_class: str
    parameters: int | None
    dtype: str | None
    files: tuple[FileDigest, ...] = ()
    architecture: str | None = None
    vocabulary: dict[str, Any] | None = None
    config: FileDigest | None = None
    revision: str | None = None
    surprisal: str = "exact"
    pll: str | None = None
    search: dict[str, Any] | None = None
    eos: dict[str, bool] = field(default_factory=dict)
    untrained: int = 0


@dataclass(frozen=True)
class SentencesRead:
    """The ``--sentences`` file scored and how its lines became words
    (``synlm.tse.reports.line_words``: ``whitespace`` or ``treebank``)."""

    file: FileDigest
    tokenise: str


@dataclass(frozen=True)
class Provenance:
    """What a command's results were computed from (the module's docs)."""

    command: str
    cwd: str
    created: str
    synlm: str
    synlm_source: str | None
    torch: str
    transformers: str | None
    python: str
    platform: str
    threads: int
    threads_why: str
    device: str
    models: tuple[ModelProvenance, ...]
    benchmark_files: dict[str, tuple[FileDigest, ...]]
    sentences: SentencesRead | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _class_name(obj: Any) -> str:
    return f"{type(obj).__module__}.{type(obj).__qualname__}"


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def synlm_source() -> str | None:
    """``git describe --always --dirty`` of the tree synlm is imported from, where that is a
    git checkout (an installed wheel: None)."""
    try:
        done = subprocess.run(["git", "describe", "--always", "--dirty", "--abbrev=12"],
                              cwd=Path(synlm.__file__).parent, capture_output=True, text=True,
                              timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return (done.stdout.strip() or None) if done.returncode == 0 else None


def weight_files(folder: Path) -> list[Path]:
    """The weight files of a Hugging Face model's ``folder``: the shards its index names, or
    the first of ``WEIGHTS`` there."""
    for name in WEIGHTS:
        index = folder / f"{name}.index.json"
        if index.is_file():
            shards = json.loads(index.read_text(encoding="utf-8"))["weight_map"].values()
            return [folder / shard for shard in sorted(set(shards))]
        if (folder / name).is_file():
            return [folder / name]
    return []


def model_files(folder: Path) -> list[Path]:
    """The files of a Hugging Face model's ``folder`` that change its scores: those of
    ``SCORING_FILES`` it has, the Python files of its own code (what ``--trust-remote-code``
    runs), then its weights (``weight_files``)."""
    return [folder / name for name in SCORING_FILES if (folder / name).is_file()] + \
        sorted(folder.glob("*.py")) + weight_files(folder)


def hf_files(name: str, revision: str | None) -> list[Path]:
    """The files of the Hugging Face model ``name`` that change its scores
    (``model_files``): a folder's, or a hub model's in the local cache (the snapshot of
    ``revision``)."""
    if Path(name).is_dir():
        return model_files(Path(name))
    from huggingface_hub import try_to_load_from_cache

    cached = try_to_load_from_cache(name, "config.json", revision=revision)
    return model_files(Path(cached).parent) if isinstance(cached, str) else []


def hf_architecture(config: Any) -> str:
    """A Hugging Face config's architecture: its ``architectures`` and ``model_type``
    (``GPT2LMHeadModel (gpt2)``; the type alone where the config names no class)."""
    classes = ", ".join(getattr(config, "architectures", None) or ())
    return f"{classes} ({config.model_type})" if classes else config.model_type


def vocabulary_of(model: Any) -> dict[str, Any] | None:
    """A synlm model's vocabulary: its size and the sha256 of the JSON of its saved form
    (what a checkpoint stores); None without one."""
    vocab = getattr(model, "vocab", None)
    if vocab is None:
        return None
    saved = json.dumps(vocab.to_saved(), sort_keys=True, ensure_ascii=False)
    return {"size": len(vocab), "sha256": hashlib.sha256(saved.encode("utf-8")).hexdigest()}


def _search(model: Any, convention: str) -> dict[str, Any] | None:
    """A transition LM's search settings (``beam``: ``BeamSettings`` or
    ``ParticleSettings``) with their description, and the ``convention`` it computes (the
    settings' None: the model's released one); None for a model with no search."""
    if not isinstance(model, Searches):
        return None
    settings = model.beam
    return {"kind": type(settings).__name__, "text": settings.describe(), **asdict(settings),
            "convention": convention}


def _network(model: Any) -> Any:
    """The network a synlm recipe wraps: a ``SyntaxLM``'s backbone, a transition LM's
    transition model; None for another model."""
    if isinstance(model, RunsBackbone):
        return model.backbone
    return model.model if isinstance(model, Searches) else None


def model_provenance(name: str, scorer: Any, untrained: int = 0,
                     conventions: Mapping[str, Mapping[str, Any]] | None = None,
                     config: str | None = None) -> ModelProvenance:
    """``scorer``'s model (a ``ModelScorer``'s synlm model, an ``HFScorer``'s or
    ``PLLScorer``'s transformers model, the synlm masked LM a ``PLLScorer`` adapts) under
    ``name``; ``conventions``: each benchmark's
    ``BenchmarkResult.convention`` (whether it counted the end of the sentence);
    ``config``: the config file its untrained models were built from."""
    from synlm.tse.scoring import ModelScorer

    files: list[Path] = []
    model: Any = None  # None: a Scorer of one's own, its numbers its own
    revision = convention = architecture = vocabulary = None
    adapted = isinstance(scorer, ScoresHubModel) and isinstance(scorer.model, AdaptsSynLM)
    if isinstance(scorer, ScoresHubModel) and not adapted:  # a Hugging Face model
        model = scorer.model
        revision = getattr(model.config, "_commit_hash", None)
        files = hf_files(scorer.name, revision)
        architecture = hf_architecture(model.config)
    elif isinstance(scorer, ModelScorer) or adapted:  # a synlm recipe; its file where load_model
        # read one (a masked LM's pseudo-log-likelihood: no convention of its own)
        model, convention = (scorer.model.lm, None) if adapted else \
            (scorer.model, scorer.convention)
        network = _network(model)
        architecture = None if network is None else _class_name(network)
        vocabulary = vocabulary_of(model)
        files = [Path(model.checkpoint_file)] if isinstance(model, FromCheckpoint) else []
    parameters = [] if model is None else list(model.parameters())
    pll = scorer.pll if isinstance(scorer, ScoresPLL) else None
    return ModelProvenance(
        name=name, model_class=_class_name(scorer if model is None else model),
        parameters=None if model is None else sum(p.numel() for p in parameters),
        dtype=str(parameters[0].dtype).removeprefix("torch.") if parameters else None,
        files=tuple(map(file_digest, files)),
        architecture=architecture, vocabulary=vocabulary,
        config=None if config is None else file_digest(config_file(config)),
        revision=revision,
        surprisal="scorer" if model is None else
        "pseudo_log_likelihood" if pll else convention or "exact", pll=pll,
        search=_search(model, convention) if convention else None,
        eos={benchmark: bool(c["eos"]) for benchmark, c in (conventions or {}).items()},
        untrained=untrained)


def config_file(config: str) -> Path:
    """The file ``--config`` names: itself, or the shipped config of that name."""
    from synlm.runtime.usage import resolve_configs

    return Path(resolve_configs(["--config", config])[-1])


def benchmark_files(benchmarks: Sequence[str], data_dir: str | Path | None = None,
                    suites: Sequence[str] | None = None,
                    pairs: Sequence[str | Path] = ()) -> dict[str, list[Path]]:
    """The files ``synlm.tse.benchmarks.load_benchmarks`` read for ``benchmarks`` (called
    after it: every file is there), by benchmark: BLiMP's archive, Marvin & Linzen's JSON
    lines or its 22 pickles, each SyntaxGym suite's file, one's own ``pairs`` files."""
    from synlm.tse import blimp, marvin_linzen, syntaxgym
    from synlm.tse.benchmarks import is_suite_file

    files: dict[str, list[Path]] = {}
    for name in benchmarks:
        if name == "blimp":
            files[name] = [blimp.data_file(blimp.BLIMP_ZIP, data_dir)]
        elif name == "marvin_linzen":
            source = marvin_linzen.default_source(data_dir, download=False)
            files[name] = [source / remote.name for remote in marvin_linzen.TEMPLATES.values()
                           ] if source.is_dir() else [source]
        elif name == "syntaxgym":
            named = [s for s in suites if not is_suite_file(s)] if suites else syntaxgym.SUITES
            files[name] = [syntaxgym.suite_path(s, data_dir) for s in named] + [
                Path(s) for s in suites or () if is_suite_file(s)]
        elif name == "pairs":
            files[name] = [Path(p) for p in pairs]
    return files


def _device_name(device: str) -> str:
    """``device`` with a GPU's name: ``cuda:0 (NVIDIA H100 80GB HBM3)``."""
    import torch

    if device.startswith("cuda") and torch.cuda.is_available():
        return f"{device} ({torch.cuda.get_device_name(torch.device(device))})"
    return device


def collect(command: str, models: Sequence[tuple[str, Any, Sequence[Any]]], threads: Threads,
            files: Mapping[str, Sequence[Path]] | None = None,
            conventions: Sequence[Mapping[str, Mapping[str, Any]]] = (),
            config: str | None = None,
            sentences: tuple[str | Path, str] | None = None) -> Provenance:
    """The record of one command: ``models`` as (name, scorer, untrained scorers), the
    scorer None where only untrained models were scored (``--config``: ``config`` is
    their file); ``threads``: ``synlm.runtime.threads.Threads``; ``files``:
    ``benchmark_files``; ``conventions``: each model's benchmark conventions, in order;
    ``sentences``: the ``--sentences`` file read instead, and its ``--tokenise``."""
    import torch

    records = []
    for number, (name, scorer, untrained) in enumerate(models):
        shown = scorer if scorer is not None else untrained[0]
        records.append(model_provenance(
            name, shown, len(untrained),
            conventions[number] if number < len(conventions) else None,
            config if scorer is None else None))
    scorers = [s for _, scorer, untrained in models for s in (scorer, *untrained)
               if s is not None]
    return Provenance(
        command=command, cwd=os.getcwd(),
        created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        synlm=synlm.__version__, synlm_source=synlm_source(), torch=torch.__version__,
        transformers=_version("transformers"), python=platform.python_version(),
        platform=platform.platform(), threads=threads.count, threads_why=threads.why,
        device=", ".join(dict.fromkeys(_device_name(str(s.device)) for s in scorers
                                       if isinstance(s, RunsOnDevice))) or "unknown",
        models=tuple(records),
        benchmark_files={name: tuple(map(file_digest, paths))
                         for name, paths in (files or {}).items()},
        sentences=None if sentences is None else SentencesRead(file_digest(sentences[0]),
                                                               sentences[1]))


def of_saved(command: str, files: Sequence[Sequence[Any]], labels: Sequence[str]
             ) -> dict[str, Any]:
    """The record of tables made from finished evaluations (``synlm.tse.saved``: each file's
    runs, under its label in the tables): the command, synlm's version, and each file read,
    the JSON and its records with their sha256, and the provenance it was scored with (the
    ``parts`` of a run split over commands, each so)."""
    return {
        "command": command, "cwd": os.getcwd(),
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "synlm": synlm.__version__, "synlm_source": synlm_source(),
        "python": platform.python_version(), "platform": platform.platform(),
        "results": [{"label": label, **_read_back(runs[0].parts[0])} if len(runs[0].parts) == 1
                    else {"label": label, "parts": [_read_back(part) for part in runs[0].parts]}
                    for label, runs in zip(labels, files)]}


def _read_back(part: Any) -> dict[str, Any]:
    """A file read back (``synlm.tse.saved.SavedPart``): the JSON and its records with their
    sha256, and the provenance it was scored with."""
    return {"file": asdict(file_digest(part.file)), "records": asdict(file_digest(part.records)),
            "scored": part.provenance}


def command_line(prog: str, argv: Sequence[str] | None) -> str:
    """The command as typed: ``prog`` and its arguments (``sys.argv``'s where ``argv`` is
    None), quoted for a shell."""
    import shlex

    return " ".join([prog, shlex.join(sys.argv[1:] if argv is None else argv)]).strip()


def write_beside(path: str | Path, record: Mapping[str, Any]) -> Path:
    """``record`` as ``<path>.provenance.json`` beside ``path``, written whole; its path."""
    target = Path(path).with_name(Path(path).name + SUFFIX)
    write(target, record)
    return target


def write(path: Path, record: Mapping[str, Any]) -> Path:
    """``record`` as indented JSON at ``path``, written whole or not at all; ``path``."""
    atomic_write_text(path, json.dumps(record, indent=2) + "\n")
    return path
