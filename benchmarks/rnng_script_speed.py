"""The released RNNG search script beside synlm's, as a user runs them: aistairc/rnng-pytorch's
``beam_search.py`` and ``synlm evaluate-syntax --sentences`` on the same ``train.py``
checkpoint (converted with ``synlm convert --from rnng-pytorch``) and the same sentences, each
a process of its own, timed in CPU time; then their per-word surprisals compared.

    SYNLM_DATA_DIR=/path/to/data OMP_NUM_THREADS=1 python benchmarks/rnng_script_speed.py \\
        --reference PATH/TO/rnng-pytorch [--model MODEL.pt] [--sentences FILE | --blimp-subset 1] \\
        [--beam 100/10/1] [--batch-size 16] [--out result.json]

``--reference`` is a checkout of aistairc/rnng-pytorch (f30c0ed; tests/fixtures/rnng/README.md),
whose scripts this one runs in a temporary folder (``--work`` keeps it) and contains none of
their code. ``--model``: a ``train.py`` checkpoint; without it, the released scripts make one
of PTB size (w = h = 256, two layers, dropout 0.3, ``--fixed_stack``) after one training step
on the NLTK WSJ sample (``nltk_treebank/treebank.zip`` under ``SYNLM_DATA_DIR``, split and
cleaned as synlm's ``Treebank`` does: wsj_0001-0179 train, 0180-0189 validation):
``preprocess.py --unkmethod berkeleyrule --vocabminfreq 2`` on the three splits makes the
vocabulary (5,541 words and classes) and the labels, and ``train.py --batch_size 16
--num_epochs 1 --max_group_length_diff 1000`` takes one Adam step on the first 16 sentences of
its training file (the file cut there, its closing vocabulary and label records kept), in
one batch (its default seed; the checkpoint is the one it saves
after validating). The released ``train.py`` runs behind
``benchmarks/rnng_pytorch_checkpoints.py``'s two shims, which change no number (a stand-in for
``torch.utils.tensorboard``; ``np.random.permutation`` of a list of unequal batches).

Sentences: ``--sentences FILE`` (pre-tokenised, a sentence a line) or ``--blimp-subset N`` (the
default, 1): the first N pairs of every BLiMP paradigm, good sentence then bad, written as the
words synlm's scorer reads for the converted model (``ModelScorer.words``: NLTK's Treebank
tokenizer), the words ``synlm evaluate-syntax --benchmark blimp --subset N`` scores. Both
codes read that file split at spaces: ``beam_search.py --test_file FILE --beam_size B
--word_beam_size W --shift_size S --batch_size --batch-size --stack_size_bound 100 --device
cpu`` (100: synlm's ``max_stack``; the released default lets the stack grow to the sentence's
length + 10) and ``synlm evaluate-syntax --ckpt_path CONVERTED --sentences FILE --surprisals
TABLE --batch-size --beam-size B --word-beam-size W --shift-size S``. An unknown word becomes
its Berkeley class in both (the converted vocabulary keeps the released rules).

Each code runs ``--repeats`` times, alternating (released, synlm, synlm, released, ...). A
run's CPU time is the user + system time of the process and its children
(``resource.getrusage(RUSAGE_CHILDREN)``), start-up and model loading included, as
``/usr/bin/time`` reports it: on a machine that other jobs share, it is what one free core
would take, where the wall time depends on the load (printed with the 1-minute load average
before and after). ``OMP_NUM_THREADS`` passes to both; set it to 1 for one core each. The
released script runs with ``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1``: its ``torch.load`` of its own
checkpoint (pickled vocabulary and action classes) needs the full unpickler since torch 2.6.
The surprisals: the released ``--lm_output_file`` (nats, a row a word) against synlm's table
(bits to 6 places, so agreement is measured to about 4e-7 nats a word), per word and per
sentence.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from rnng_pytorch_checkpoints import SHIMS  # noqa: E402

#: The released ``train.py`` flags of the made model (module docstring).
TRAIN = ["--fixed_stack", "--strategy", "top_down", "--w_dim", "256", "--h_dim", "256",
         "--num_layers", "2", "--dropout", "0.3", "--batch_size", "16", "--num_epochs", "1",
         "--max_group_length_diff", "1000", "--device", "cpu"]
VOCAB = ["--unkmethod", "berkeleyrule", "--vocabminfreq", "2"]
#: The stack bound of the released search: synlm's ``max_stack``.
STACK_BOUND = 100


def load_average() -> float:
    return os.getloadavg()[0]


def timed_process(name: str, command: list[str], cwd: Path,
                  env: dict[str, str]) -> dict[str, float]:
    """Run ``command`` (stdout and stderr to ``name.out``, ``name.err`` in ``cwd``); its CPU
    time (user + system of it and its children), wall time and the 1-minute load average
    before and after."""
    before, load, start = resource.getrusage(resource.RUSAGE_CHILDREN), load_average(), \
        time.perf_counter()
    with open(cwd / f"{name}.out", "w") as out, open(cwd / f"{name}.err", "w") as err:
        done = subprocess.run(command, cwd=cwd, env=env, stdout=out, stderr=err)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode:
        raise SystemExit(f"{' '.join(command[:4])} ... failed ({done.returncode}); see "
                         f"{cwd / (name + '.err')}")
    user, system = after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime
    return {"cpu_s": user + system, "user_s": user, "system_s": system, "wall_s": wall,
            "load_before": load, "load_after": load_average()}


def make_model(reference: Path, work: Path) -> Path:
    """A PTB-size ``train.py`` checkpoint after one step on the NLTK sample (module
    docstring)."""
    from synlm.data.treebanks import Treebank
    from synlm.syntax.trees import to_bracket

    treebank = Treebank()
    lines = {split: [to_bracket(s.tree) + "\n" for s in treebank.sentences(split)]
             for split in ("train", "valid", "test")}
    for split, trees in lines.items():
        (work / f"{split}.txt").write_text("".join(trees))
    env = {**os.environ, "PYTHONPATH": str(reference)}
    subprocess.run([sys.executable, str(reference / "preprocess.py"), "--trainfile", "train.txt",
                    "--valfile", "valid.txt", "--testfile", "test.txt", "--outputfile", "nltk",
                    "--jobs", "1", *VOCAB], cwd=work, env=env, check=True,
                   stdout=subprocess.DEVNULL)
    # the first 16 training sentences, then the file's closing records (vocabulary, labels)
    rows = (work / "nltk-train.json").read_text().splitlines(keepends=True)
    sentences = [row for row in rows if not row.startswith('{"key"')]
    (work / "one-train.json").write_text(
        "".join(sentences[:16] + [row for row in rows if row.startswith('{"key"')]))
    subprocess.run([sys.executable, "-c", SHIMS, str(reference / "train.py"), "--train_file",
                    "one-train.json", "--val_file", "nltk-val.json", "--save_path", "model.pt",
                    *TRAIN], cwd=work, env=env, check=True, stderr=subprocess.DEVNULL)
    return work / "model.pt"


def blimp_sentences(converted: Path, subset: int, out: Path) -> None:
    """The first ``subset`` pairs of each BLiMP paradigm, good then bad, as the words the
    converted model's scorer reads, a sentence a line."""
    from synlm.loading import load_model
    from synlm.tse.blimp import read_blimp
    from synlm.tse.scoring import ModelScorer

    scorer = ModelScorer(load_model(str(converted)), 1)
    texts = [text for pair in read_blimp(subset=subset) for text in (pair.good, *pair.bad)]
    out.write_text("".join(" ".join(scorer.words(text)) + "\n" for text in texts))


def released_surprisals(path: Path) -> list[list[float]]:
    """Each sentence's word surprisals (nats) from ``beam_search.py``'s ``--lm_output_file``:
    a row a word (sentence, word, token, pieces, surprisal, piece surprisals), then a rule."""
    out: list[list[float]] = []
    for line in path.read_text().splitlines():
        if line.startswith("---"):
            break
        sentence, word, *_, surprisal, _ = line.split("\t")
        if int(word) == 0:
            out.append([])
        if int(sentence) != len(out) - 1:
            raise SystemExit(f"{path}: row {line!r} out of order")
        out[-1].append(float(surprisal))
    return out


def synlm_surprisals(path: Path, lengths: list[int]) -> list[list[float] | None]:
    """Each sentence's word surprisals (nats) from synlm's ``--surprisals`` table (bits; a
    sentence's words, then its end-of-sentence row, dropped; no rows: no parse, None)."""
    rows: dict[int, list[float]] = {}
    for line in path.read_text().splitlines()[1:]:
        sentence, token, _, bits = line.split("\t")
        if int(token) <= lengths[int(sentence) - 1]:
            rows.setdefault(int(sentence) - 1, []).append(float(bits) * math.log(2))
    return [rows.get(i) for i in range(len(lengths))]


def compare(theirs: list[list[float]], ours: list[list[float] | None]) -> dict[str, Any]:
    """The largest difference of a word's and of a sentence's surprisal, over the sentences
    both parsed."""
    pairs = [(t, o) for t, o in zip(theirs, ours, strict=True) if o is not None]
    return {"sentences_compared": len(pairs), "synlm_unparsed": len(ours) - len(pairs),
            "max_abs_word_difference": max(abs(a - b) for t, o in pairs
                                           for a, b in zip(t, o, strict=True)),
            "max_abs_sentence_difference": max(abs(sum(t) - sum(o)) for t, o in pairs)}


def measure(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    reference = args.reference.resolve()
    model = args.model.resolve() if args.model else make_model(reference, work)
    converted = work / "converted"
    subprocess.run([sys.executable, "-m", "synlm.cli", "convert", "--from", "rnng-pytorch",
                    str(model), "--out", str(converted)], check=True, stdout=subprocess.DEVNULL)
    sentences = work / "sentences.txt"
    if args.sentences:
        shutil.copyfile(args.sentences, sentences)
    else:
        blimp_sentences(converted, args.blimp_subset, sentences)
    lengths = [len(line.split()) for line in sentences.read_text().splitlines()]
    beam, word_beam, shift = args.beam
    envs = {"released": {**os.environ, "PYTHONPATH": str(reference),
                         "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1"}, "synlm": dict(os.environ)}
    commands = {
        "released": [sys.executable, "-c", SHIMS, str(reference / "beam_search.py"),
                     "--test_file", str(sentences), "--model_file", str(model),
                     "--beam_size", str(beam), "--word_beam_size", str(word_beam),
                     "--shift_size", str(shift), "--batch_size", str(args.batch_size),
                     "--stack_size_bound", str(STACK_BOUND), "--device", "cpu",
                     "--lm_output_file", str(work / "released.tsv")],
        "synlm": [sys.executable, "-m", "synlm.cli", "evaluate-syntax", "--ckpt_path",
                  str(converted), "--sentences", str(sentences), "--surprisals",
                  str(work / "synlm.tsv"), "--batch-size", str(args.batch_size),
                  "--beam-size", str(beam), "--word-beam-size", str(word_beam),
                  "--shift-size", str(shift), "--device", "cpu", "--no-progress"]}
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in commands}
    for round_ in range(args.repeats):  # the order flips every round
        for name in (list(commands) if round_ % 2 == 0 else list(commands)[::-1]):
            runs[name].append(timed_process(name, commands[name], work, envs[name]))
            print(f"  round {round_ + 1} {name}: {runs[name][-1]['cpu_s']:.1f} s CPU, "
                  f"{runs[name][-1]['wall_s']:.1f} s wall", flush=True)
    codes = {name: {"runs": r, "cpu_s": statistics.median(x["cpu_s"] for x in r),
                    "cpu_s_a_sentence": statistics.median(x["cpu_s"] for x in r) / len(lengths)}
             for name, r in runs.items()}
    return {"model": str(model), "sentences": len(lengths), "words": sum(lengths),
            "beam": "/".join(map(str, args.beam)), "batch_size": args.batch_size,
            "omp_num_threads": os.environ.get("OMP_NUM_THREADS", "unset"), "codes": codes,
            "cpu_ratio_released_over_synlm": codes["released"]["cpu_s"] / codes["synlm"]["cpu_s"],
            "surprisals": compare(released_surprisals(work / "released.tsv"),
                                  synlm_surprisals(work / "synlm.tsv", lengths))}


def show(r: dict[str, Any]) -> None:
    print(f"{r['sentences']} sentences ({r['words']} words), {r['beam']}, batches of "
          f"{r['batch_size']}, OMP_NUM_THREADS={r['omp_num_threads']}")
    print("\n| code | CPU time (median) | CPU s a sentence | wall (each run) | load (1 min) |"
          "\n|---|---:|---:|---|---|")
    for name, code in r["codes"].items():
        walls = ", ".join(f"{x['wall_s']:.0f} s" for x in code["runs"])
        loads = ", ".join(f"{x['load_before']:.1f}-{x['load_after']:.1f}" for x in code["runs"])
        print(f"| {name} | {code['cpu_s']:.1f} s | {code['cpu_s_a_sentence']:.2f} | {walls} | "
              f"{loads} |")
    s = r["surprisals"]
    print(f"\nreleased / synlm CPU time: {r['cpu_ratio_released_over_synlm']:.2f}; surprisals "
          f"of {s['sentences_compared']} sentences differ by at most "
          f"{s['max_abs_word_difference']:.1e} a word, {s['max_abs_sentence_difference']:.1e} a "
          f"sentence (nats; synlm found no parse for {s['synlm_unparsed']})")


def beam_setting(text: str) -> tuple[int, int, int]:
    parts = text.split("/")
    if len(parts) != 3 or not all(p.isdigit() and int(p) > 0 for p in parts):
        raise argparse.ArgumentTypeError(f"--beam: expected BEAM/WORD_BEAM/SHIFT such as "
                                         f"100/10/1, got {text!r}")
    return int(parts[0]), int(parts[1]), int(parts[2])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reference", type=Path, required=True,
                        help="the aistairc/rnng-pytorch checkout (its code folder)")
    parser.add_argument("--model", type=Path,
                        help="its train.py checkpoint (default: make a PTB-size one)")
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--sentences", type=Path, help="pre-tokenised sentences, one a line")
    which.add_argument("--blimp-subset", type=int, default=1,
                       help="the first N pairs of each BLiMP paradigm (default: 1)")
    parser.add_argument("--beam", type=beam_setting, default=(100, 10, 1),
                        help="beam/word beam/shift (default: the released 100/10/1)")
    parser.add_argument("--batch-size", type=int, default=16, help="sentences a batch")
    parser.add_argument("--repeats", type=int, default=1, help="runs of each code")
    parser.add_argument("--work", type=Path, help="keep the files here (default: a "
                                                  "temporary folder)")
    parser.add_argument("--out", type=Path, help="write the results here as JSON")
    args = parser.parse_args(argv)
    for flag, path in (("--reference", args.reference / "beam_search.py"),
                       ("--model", args.model), ("--sentences", args.sentences)):
        if path is not None and not path.is_file():
            raise SystemExit(f"{flag}: no such file {path}")
    with tempfile.TemporaryDirectory() as temporary:
        work = args.work or Path(temporary)
        work.mkdir(parents=True, exist_ok=True)
        result = measure(args, work.resolve())
    show(result)
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n")
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
