"""``synlm`` as a model of EleutherAI's lm-evaluation-harness (docs/interop.md): any
``SyntaxLM`` checkpoint runs lm-eval's log-likelihood tasks through synlm's own scorer,
``synlm.tse.scoring.ModelScorer``, so the numbers are those of ``synlm evaluate-syntax``.

    synlm lm-eval --model synlm --model_args ckpt_path=RUN --tasks T [--include_path DIR]
    lm_eval.simple_evaluate(model=SynlmLM(ckpt_path=RUN), tasks=[...])
    lm_eval.simple_evaluate(model="synlm", model_args="ckpt_path=RUN", tasks=[...])

Importing this module registers the model ``synlm`` with lm-eval; ``synlm lm-eval`` is
lm-eval's own command line (``lm_eval.__main__.cli_evaluate``'s) run after that import.
``write_blimp_tasks`` writes BLiMP as local lm-eval tasks (``--include_path``). Needs the
``lm-eval`` extra: ``pip install 'synlm[lm-eval]'``.

Importing it imports lm-eval and the light parts of synlm, not torch: ``synlm lm-eval
--help`` and a wrong flag answer before torch loads; the model, its scorer and torch are
imported when lm-eval builds the model.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

try:
    import lm_eval.models  # noqa: F401  (registers lm-eval's own models before synlm's)
    from lm_eval.api.model import LM
    from lm_eval.api.registry import register_model
    from lm_eval.utils import simple_parse_args_string
except ImportError as err:
    raise ImportError("synlm.lm_eval_model needs lm-evaluation-harness: pip install "
                      "'synlm[lm-eval]'", name="lm_eval") from err

from synlm.capabilities import Searches
from synlm.errors import InputError, SynLMError, report
from synlm.tse.blimp import read_blimp
from synlm.tse.scores import ScoredSentence

if TYPE_CHECKING:
    import torch

PROG = "synlm lm-eval"
#: Sentences a forward pass when lm-eval asks for ``auto`` batching.
DEFAULT_BATCH_SIZE = 64
#: The task name of a BLiMP paradigm written by ``write_blimp_tasks`` (lm-eval's own
#: ``blimp_<UID>`` tasks read the Hugging Face hub) and of their group.
BLIMP_TASK = "synlm_blimp_{}"
BLIMP_GROUP = "synlm_blimp"

log = logging.getLogger(__name__)


def _batch_size(value: int | str) -> int:
    """lm-eval's ``batch_size``: a number, or ``auto[:N]`` (``DEFAULT_BATCH_SIZE``)."""
    if isinstance(value, str) and value.startswith("auto"):
        return DEFAULT_BATCH_SIZE
    try:
        return int(value)
    except (TypeError, ValueError):
        raise InputError(f"batch_size={value}: expected a whole number or auto") from None


def _device(value: str | None) -> str:
    """``device``: as given, CUDA when none is given and there is one; a CUDA device on a
    machine without CUDA (lm-eval's command line asks for ``cuda:0`` unless told) is the
    CPU, with a warning."""
    import torch

    if value is None:
        return "cuda" if torch.cuda.is_available() else "cpu"
    if str(value).startswith("cuda") and not torch.cuda.is_available():
        log.warning("synlm: device %s asked for, but CUDA is not available: using the CPU",
                    value)
        return "cpu"
    return str(value)


@register_model("synlm")
class SynlmLM(LM):
    """A ``SyntaxLM`` as an lm-eval model, scoring through ``ModelScorer``.

    Every request is read from a fresh state after ``<eos>``, as synlm scores a sentence
    (``synlm.tse.scoring``), its text as the checkpoint's corpus writes it
    (``ModelScorer.words``: Treebank tokens, and for Mikolov's PTB lowercase, numbers
    ``N``, punctuation dropped). Log-probabilities are natural logs, each word's the sum of
    its tokens'; none includes the end-of-sentence term.

    - ``loglikelihood``: the words of the context, then those of the continuation, scored
      as one sentence; the continuation's words' log-probabilities summed, and whether each
      of its tokens is the model's most likely one there (``greedy``; False without it).
      A continuation without words (punctuation that PTB drops) has log-probability 0
      and counts as greedy.
    - ``loglikelihood_rolling``: the text's words, scored whole (no windows: a recurrent
      model has no length limit; GPT-2's ``n_positions`` is one, a longer text an error).
    - ``generate_until``: not offered (an export, ``synlm export-hf``, generates through
      lm-eval's ``hf`` model).

    A transition LM (RNNG, PLM, PLM-mask, TG, CAG) and a Pushdown LM are scored by their
    search under the surprisal convention they declare (``search_convention``;
    ``synlm.transition.types.CONVENTIONS``: the Pushdown LM's only ``pushdown_ranked``),
    kept as ``convention`` and logged; a search setting the model does not take (a Pushdown
    LM's word beam) is refused in one line. A text its beam finds no tree for ("no parse
    within the beam") has log-likelihood -inf (lm-eval has no way to leave a request out):
    such requests are counted
    (``no_parse``) and each call that meets one logs a warning with the count.

    Args:
        ckpt_path: a checkpoint or run folder (``synlm.loading.load_model``).
        model: a ``SyntaxLM`` already loaded, instead of ``ckpt_path``.
        batch_size: sentences a forward pass (``auto``: ``DEFAULT_BATCH_SIZE``).
        device: ``cpu``, ``cuda``, ``cuda:1`` (``_device``).
        greedy: compute ``is_greedy`` (a second pass over each sentence, with the full
            next-token distributions); False returns False for every request. A transition
            LM (an RNNG) has no next-word distribution but a word's beam probability: its
            ``is_greedy`` is always False.
        beam_size: a transition LM's word-synchronous beam search (``BeamSettings``;
            unset: the checkpoint's, the reference's 100).
        word_beam_size: likewise (10).
        shift_size: likewise (1).
        search_convention: likewise (``renormalised_given_length`` or ``all_actions``;
            unset: the model's released one).
        search: ``beam`` (the default) or ``particles``: a transition LM's particle
            filtering (``synlm.transition.particles``), which takes ``particles``, not the
            beam's sizes.
        particles: ``search=particles``: particles a sentence (unset: the released 10,000).
        max_memory_mb: a transition LM's search memory besides the model (``SearchSettings``;
            unset: the checkpoint's, 2048).
    """

    def __init__(self, ckpt_path: str | None = None, model: Any = None,
                 batch_size: int | str = DEFAULT_BATCH_SIZE, device: str | None = None,
                 greedy: bool = True, beam_size: int | None = None,
                 word_beam_size: int | None = None, shift_size: int | None = None,
                 search_convention: str | None = None, search: str | None = None,
                 particles: int | None = None, max_memory_mb: float | None = None) -> None:
        super().__init__()
        if (ckpt_path is None) == (model is None):
            raise InputError("the synlm model of lm-eval needs ckpt_path=RUN (a checkpoint "
                             "or run folder), or a loaded model")
        if model is None:
            from synlm.loading import load_model

            model = load_model(str(ckpt_path), "ckpt_path")
        sizes = {"beam_size": beam_size, "word_beam_size": word_beam_size,
                 "shift_size": shift_size}
        settings = {**sizes, "search_convention": search_convention, "search": search,
                    "particles": particles, "max_memory_mb": max_memory_mb}
        given = next((name for name, value in settings.items() if value is not None), None)
        searches = isinstance(model, Searches)
        if not searches and given:
            raise InputError(f"{given}: the model has no search; it is a setting of "
                             "transition LMs (RNNG, PLM, PLM-mask, TG)")
        if search not in (None, "beam", "particles"):
            raise InputError(f"search={search}: expected beam or particles")
        given_size = next((name for name, value in sizes.items() if value is not None), None)
        if search == "particles" and given_size:
            raise InputError(f"{given_size}: a beam size; particle filtering takes particles=K")
        if particles is not None and search != "particles":
            raise InputError("particles: the particles of particle filtering; add "
                             "search=particles")
        if search == "particles":
            from synlm.transition.particles import use_particles

            use_particles(model, particles, search_convention, max_memory_mb)
        elif searches:
            model.use_beam(beam_size, word_beam_size, shift_size, search_convention,
                           max_memory_mb)
        from synlm.tse.scoring import ModelScorer

        self.scorer = ModelScorer(model, _batch_size(batch_size), _device(device))
        self.greedy = greedy and not searches
        #: The surprisal convention of the model's search (None: a model without one).
        self.convention = self.scorer.convention
        if self.convention is not None:
            log.info("synlm: scored by %s, surprisal convention %s", model.beam.describe(),
                     self.convention)
        #: Requests whose text had no parse within the beam (log-likelihood -inf).
        self.no_parse = 0

    @classmethod
    def create_from_arg_string(cls, arg_string: str,
                               additional_config: dict[str, Any] | None = None) -> SynlmLM:
        """``model_args`` (``ckpt_path=RUN,batch_size=N``), then lm-eval's own settings
        (``--batch_size``, ``--device``) for what they leave unset."""
        return cls.create_from_arg_obj(simple_parse_args_string(arg_string), additional_config)

    @classmethod
    def create_from_arg_obj(cls, arg_dict: dict[str, Any],
                            additional_config: dict[str, Any] | None = None) -> SynlmLM:
        """``create_from_arg_string`` for ``model_args`` given as a dict."""
        unset = {k: v for k, v in (additional_config or {}).items()
                 if v is not None and k not in arg_dict}
        return cls(**arg_dict, **unset)

    @property
    def device(self) -> torch.device:
        return self.scorer.device

    def _score(self, sentences: Sequence[tuple[str, ...]]) -> dict[tuple[str, ...], ScoredSentence]:
        """Each distinct word sequence of ``sentences`` scored once."""
        unique = list(dict.fromkeys(sentences))
        return dict(zip(unique, self.scorer.score([list(words) for words in unique])))

    def _log_likelihood(self, sentence: ScoredSentence, first: int = 0) -> float:
        """The summed log-probabilities of ``sentence``'s words from ``first`` on; -inf,
        counted in ``no_parse``, for a sentence with no parse within the beam."""
        if not sentence.parsed:
            self.no_parse += 1
            return float("-inf")
        return float(sum(sentence.word_log_probs[first:]))  # type: ignore[index]

    def _warn_no_parse(self, before: int, requests: int) -> None:
        if self.no_parse > before:
            log.warning("synlm: %d of %d requests have no parse within the beam (even with "
                        "no stack bound): log-likelihood -inf", self.no_parse - before,
                        requests)

    def loglikelihood(self, requests: list[Any]) -> list[tuple[float, bool]]:
        """For each ``(context, continuation)``: log p(continuation words | <eos>, context
        words) and whether the continuation is the model's greedy choice (class
        docstring)."""
        words = self.scorer.words
        parts = [(tuple(words(context)), tuple(words(continuation)))
                 for context, continuation in (request.args for request in requests)]
        scored = self._score([context + continuation for context, continuation in parts])
        greedy = self._greedy([(context + continuation, len(context))
                               for context, continuation in parts]) if self.greedy else \
            [False] * len(parts)
        before = self.no_parse
        results = [(self._log_likelihood(scored[context + continuation], len(context)),
                    is_greedy) for (context, continuation), is_greedy in zip(parts, greedy)]
        self._warn_no_parse(before, len(parts))
        return results

    def loglikelihood_rolling(self, requests: list[Any]) -> list[float]:
        """Each text's log-probability: its words' (class docstring), without the end."""
        texts = [tuple(self.scorer.words(request.args[0])) for request in requests]
        scored = self._score(texts)
        before = self.no_parse
        results = [self._log_likelihood(scored[words]) for words in texts]
        self._warn_no_parse(before, len(texts))
        return results

    def generate_until(self, requests: list[Any]) -> list[str]:
        raise NotImplementedError(
            "the synlm model of lm-eval scores text (loglikelihood tasks); for generation, "
            "export the checkpoint (synlm export-hf) and run lm-eval's hf model on it")

    def _greedy(self, items: Sequence[tuple[tuple[str, ...], int]]) -> list[bool]:
        """For each (words, n): whether every token of ``words[n:]`` is the model's most
        likely next token after ``<eos>`` and the tokens before it."""
        import torch

        scorer = self.scorer
        encoded = [scorer.encode(list(words)) for words, _ in items]
        eos = scorer.vocab.eos_id
        found: list[bool] = []
        for start in range(0, len(items), scorer.batch_size):
            chunk = encoded[start:start + scorer.batch_size]
            width = max(2, *(len(ids) + 1 for ids, _, _ in chunk))  # <eos> and a target
            tokens = torch.full((len(chunk), width), eos, dtype=torch.long)
            for b, (ids, _, _) in enumerate(chunk):
                tokens[b, 1:len(ids) + 1] = torch.tensor(ids, dtype=torch.long)
            tokens = tokens.to(scorer.device)
            with torch.no_grad():
                predicted = scorer.model.log_probs(tokens[:, :-1]).argmax(-1)
            hits = (predicted == tokens[:, 1:]).cpu()
            for b, (_, word_index, _) in enumerate(chunk):
                first = items[start + b][1]
                found.append(all(bool(hits[b, i]) for i, w in enumerate(word_index)
                                 if w >= first))
        return found


def write_blimp_tasks(out_dir: str | Path, paradigms: Sequence[str] | None = None,
                      subset: int | None = None, path: str | Path | None = None,
                      data_dir: str | Path | None = None) -> list[str]:
    """BLiMP (``synlm.tse.blimp.read_blimp``) as lm-eval tasks in ``out_dir``, for
    ``--include_path``: for each paradigm its pairs (``<UID>.jsonl``) and a task
    ``synlm_blimp_<UID>`` (``BLIMP_TASK``) reading them, a ``multiple_choice`` between
    ``sentence_good`` (the target) and ``sentence_bad`` without context, scored by ``acc``
    as lm-eval's ``blimp`` tasks are; and the group ``synlm_blimp`` whose ``acc`` is the
    unweighted mean over its paradigms (the paper's overall accuracy).

    lm-eval takes the argmax of the two log-likelihoods, so a tie counts as right (choice
    0), where synlm (``evaluate_pairs``) counts it wrong.

    Args:
        out_dir: the folder to write (created).
        paradigms: these UIDs only (default all 67).
        subset: the first ``subset`` pairs of each paradigm.
        path: ``BLiMP.zip`` or a folder of ``<UID>.jsonl`` (``read_blimp``'s).
        data_dir: the data folder (default ``$SYNLM_DATA_DIR``).

    Returns:
        The task names, sorted by UID.
    """
    pairs = read_blimp(path, data_dir, subset)
    by_uid: dict[str, list[Any]] = {}
    for pair in pairs:
        by_uid.setdefault(str(pair.ids["UID"]), []).append(pair)
    if paradigms is not None:
        unknown = sorted(set(paradigms) - set(by_uid))
        if unknown:
            raise InputError(f"BLiMP has no paradigm {', '.join(unknown)}; it has: "
                             f"{', '.join(sorted(by_uid))}")
        by_uid = {uid: by_uid[uid] for uid in sorted(set(paradigms))}
    out = Path(out_dir).resolve()
    out.mkdir(parents=True, exist_ok=True)
    names = []
    for uid, group in by_uid.items():
        data = out / f"{uid}.jsonl"
        data.write_text("".join(json.dumps({**pair.ids, "sentence_good": pair.good,
                                            "sentence_bad": pair.bad[0]}) + "\n"
                                for pair in group), encoding="utf-8")
        names.append(BLIMP_TASK.format(uid))
        (out / f"{names[-1]}.yaml").write_text(_task_yaml(names[-1], data), encoding="utf-8")
    (out / f"{BLIMP_GROUP}.yaml").write_text(
        f"group: {BLIMP_GROUP}\ntask:\n" + "".join(f"  - {name}\n" for name in names)
        + "aggregate_metric_list:\n  - metric: acc\n    aggregation: mean\n"
        "    weight_by_size: false\nmetadata:\n  version: 1.0\n", encoding="utf-8")
    return names


def _task_yaml(name: str, data: Path) -> str:
    """An lm-eval task: BLiMP's multiple choice over the pairs in ``data`` (JSON lines)."""
    return (f"task: {name}\n"
            "dataset_path: json\n"
            f"dataset_kwargs:\n  data_files:\n    test: {json.dumps(str(data))}\n"
            "test_split: test\n"
            "output_type: multiple_choice\n"
            'doc_to_text: ""\n'
            'doc_to_choice: "{{[sentence_good, sentence_bad]}}"\n'
            "doc_to_target: 0\n"
            "num_fewshot: 0\n"
            "metric_list:\n  - metric: acc\n    aggregation: mean\n    higher_is_better: true\n"
            "metadata:\n  version: 1.0\n")


def main(argv: list[str]) -> int:
    """``synlm lm-eval ARGS``: lm-eval's command line (what ``lm_eval.__main__.cli_evaluate``
    runs: its ``HarnessCLI`` parses, then executes) with the ``synlm`` model registered, and
    torch's thread count set once the arguments are parsed (``--help`` and a wrong flag
    answer before torch loads); returns its exit code. synlm's own errors (a missing
    checkpoint) and a task lm-eval does not find are one line, exit code 2 (what needs no
    task index is checked before lm-eval is imported: ``synlm.runtime.inputs``)."""
    from lm_eval._cli import HarnessCLI
    from lm_eval.utils import setup_logging

    from synlm.runtime.threads import configure_threads

    saved = sys.argv
    sys.argv = [PROG, *argv]  # lm-eval reads its arguments from sys.argv
    try:
        setup_logging()
        cli = HarnessCLI()
        args = cli.parse_args()
        if getattr(args, "command", None) == "run":  # ls and validate read no model
            configure_threads()
        cli.execute(args)
    except SystemExit as exit_:  # --help, argument errors
        return exit_.code if isinstance(exit_.code, int) else int(exit_.code is not None)
    except SynLMError as err:
        return report(err, PROG)
    except ValueError as err:  # lm-eval's index has no such task: its own message
        if not str(err).startswith("Tasks not found"):
            raise
        return report(InputError(f"--tasks: {err} ({PROG} ls tasks lists lm-eval's; "
                                 "--include_path DIR adds a folder's)"), PROG)
    finally:
        sys.argv = saved
    return 0
