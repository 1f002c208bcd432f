"""The GPU report in one command: the kernel tests on the device, the kernels' self-check,
the throughput table in fp32 and bf16-mixed with peak memory (``throughput.py --table``, then
this script's ``--more-rows``: PaLM-U, PaLM-S, DM-LSTM phase 2, the Transformer and GPT-2),
the kernel step benchmark (PyTorch loop against the fused kernels) for ON-LSTM and PRPN, the
quickstart trained on the device, then the structure models: the syntactic Transformers'
training step per input token against a plain Transformer LM (unfused and fused attention,
fp32 and bf16-mixed: ``action_transformer_speed.py train``), the RNNG's batched beam search
(beside rnng-pytorch's with ``--reference``: ``rnng_speed.py beam``) and the action
Transformers' beside it (``action_transformer_speed.py beam``); one markdown report whose
figures go into docs/performance.md.

    python benchmarks/gpu_report.py --out gpu_report.md [--reference PATH/TO/rnng-pytorch]
    python benchmarks/gpu_report.py --device cpu --small --out r.md    # the smoke run (CI)
    python benchmarks/gpu_report.py --more-rows [--small] [--json]     # those rows alone

Each step runs in its own process with its own time limit (``steps``, scaled by
``--budget``), so one that hangs or fails costs only its share: the report says, per step,
the command, its wall time, its exit status and its output (the tail when long); the steps
done so far are in ``gpu_report.md.partial`` while it runs, so a run cut off keeps them (the
LSTM steps, first, took 140 s on an H100). Needs synlm with its dependencies, pytest and
triton (``pip install -e ".[dev]"`` installs them on Linux), and ``SYNLM_DATA_DIR`` set to the
folder holding ``ptb/`` (the full-size throughput table) and ``nltk_treebank/`` (the
syntactic Transformers' batches).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[1]
#: Lines of a step's stderr kept in the report.
TAIL = 60


@dataclass(frozen=True)
class Step:
    """One section of the report: a title, the command (full size, then the smoke run's) and
    its share of the time budget, in seconds."""

    title: str
    full: tuple[str, ...]
    small: tuple[str, ...]
    seconds: int


#: The smoke run's corpus: 600 synthetic training sentences instead of 4000 (which every
#: row would build), enough for the warm-up and timed batch of the largest row, B64 T35.
SMALL_CORPUS = tuple(f"--override=--data.corpus.init_args.{split}={n}"
                     for split, n in (("n_train", 600), ("n_valid", 20), ("n_test", 20)))


#: The throughput rows ``throughput.py --table`` lacks, measured in one process by
#: ``--more-rows``, each beside its baseline from the same run: (row, what, config, overrides,
#: precision, the row it is compared with). ``what``: "config" trains the config with
#: Lightning, as the table's rows; "plain" is a plain ``nn.LSTM`` LM of the config's sizes on
#: its windows (cuDNN's on a GPU), "bare" the config's own layers, embedding and tied decoder
#: in a bare PyTorch loop (``throughput.py``'s baselines). DM-LSTM phase 2 starts from random
#: weights instead of phase 1's checkpoint; GPT-2 is ``local_gpt2``'s random GPT-2 base.
MORE_ROWS: list[tuple[str, str, str, list[str], str, str | None]] = [
    ("plain LSTM LM, PaLM sizes", "plain", "palm_u.yaml", [], "32-true", None),
    ("PaLM-U", "config", "palm_u.yaml", [], "32-true", "plain LSTM LM, PaLM sizes"),
    ("PaLM-S", "config", "palm_s.yaml", [], "32-true", "plain LSTM LM, PaLM sizes"),
    ("plain LSTM LM, DM-LSTM sizes", "plain", "dm_lstm.yaml", [], "32-true", None),
    ("DM-LSTM phase 2", "config", "dm_lstm.yaml", ["--model.init_from=null"], "32-true",
     "plain LSTM LM, DM-LSTM sizes"),
    ("Transformer, bare loop", "bare", "transformer.yaml", [], "32-true", None),
    ("Transformer", "config", "transformer.yaml", [], "32-true", "Transformer, bare loop"),
    ("Transformer bf16", "config", "transformer.yaml", [], "bf16-mixed", "Transformer"),
    ("GPT-2, bare loop", "bare", "gpt2.yaml", [], "32-true", None),
    ("GPT-2", "config", "gpt2.yaml", [], "32-true", "GPT-2, bare loop"),
    ("GPT-2 bf16", "config", "gpt2.yaml", [], "bf16-mixed", "GPT-2"),
]
#: ``--more-rows --small``: each config shrunk (PaLM's span attention too), on 600 synthetic
#: training sentences; GPT-2 is ``local_gpt2``'s tiny one.
SMALL_DATA = ["--data.corpus=SyntheticTreebank", "--data.corpus.init_args.n_train=600",
              "--data.corpus.init_args.n_valid=20", "--data.corpus.init_args.n_test=20"]
SMALL_LSTM = ["--model.backbone.init_args.input_size=20",
              "--model.backbone.init_args.hidden_size=40"]
SMALL_PALM = [*SMALL_LSTM, '--model.backbone.init_args.inserts=[{"class_path": "SpanAttention", '
              '"init_args": {"after": 1, "window": 4, "rrnn_size": 8, "parser_size": 8}}]']
SMALL_MORE = {
    "palm_u.yaml": SMALL_PALM, "palm_s.yaml": SMALL_PALM, "dm_lstm.yaml": SMALL_LSTM,
    "transformer.yaml": ["--model.backbone.init_args.input_size=32",
                         "--model.backbone.init_args.num_layers=2",
                         "--model.backbone.init_args.num_heads=2",
                         "--model.backbone.init_args.ffn_size=64"],
    "gpt2.yaml": [],
}
#: GPT-2 base (Radford et al. 2019): 12 layers, 12 heads, width 768, 1024 positions and its
#: 50,257-token vocabulary; ``--small``: the tests' tiny one (tests/conftest.py).
GPT2_BASE = {"n_layer": 12, "n_head": 12, "n_embd": 768, "n_positions": 1024}
GPT2_TINY = {"n_layer": 2, "n_head": 2, "n_embd": 32, "n_positions": 128}
GPT2_VOCAB = 50257


def local_gpt2(root: Path, train: list[list[str]], small: bool) -> Path:
    """A randomly initialised GPT-2 and its tokenizer written to ``root`` with
    ``save_pretrained``, as ``configs/gpt2.yaml``'s ``pretrained`` reads a hub checkpoint:
    a byte-level BPE trained on ``train`` (the corpus's training words), padded with unused
    tokens to GPT-2's vocabulary size so that the embedding and the softmax have GPT-2's
    shapes (PTB's words give about 15k merges); ``small``: 300 tokens, the tiny sizes."""
    from transformers import GPT2Config, GPT2LMHeadModel, GPT2TokenizerFast

    from synlm.data.subwords import TrainedBPE

    bpe = TrainedBPE(vocab_size=300 if small else GPT2_VOCAB).vocab(train, root)
    tokenizer = GPT2TokenizerFast(tokenizer_object=bpe.tokenizer, eos_token="<eos>")
    if not small:
        tokenizer.add_tokens([f"<unused{i}>" for i in range(GPT2_VOCAB - len(tokenizer))])
    path = root / "gpt2-random"
    tokenizer.save_pretrained(path)
    torch.manual_seed(0)
    eos = tokenizer.eos_token_id
    GPT2LMHeadModel(GPT2Config(vocab_size=len(tokenizer), bos_token_id=eos, eos_token_id=eos,
                               **(GPT2_TINY if small else GPT2_BASE))).save_pretrained(path)
    return path


def more_rows(device: torch.device, small: bool, steps: int, warmup: int) -> list[dict]:
    """Every ``MORE_ROWS`` row measured on ``device`` by ``throughput.py``'s functions, with
    its ratio to the row it is compared with."""
    import throughput

    import synlm
    from synlm.data.corpora import PTB
    from synlm.data.synthetic import SyntheticTreebank

    configs = ROOT / "synlm" / "configs"
    corpus = SyntheticTreebank(n_train=600) if small else PTB()
    rows: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="synlm-gpt2-") as tmp:
        gpt2 = local_gpt2(Path(tmp), [s.words for s in corpus.sentences("train")], small)
        for name, what, config, overrides, precision, against in MORE_ROWS:
            torch.manual_seed(0)
            overrides = [*(SMALL_MORE[config] + SMALL_DATA if small else []), *overrides]
            if config == "gpt2.yaml":
                overrides.append(f"--model.backbone.init_args.pretrained={gpt2}")
            if what == "config":
                row = throughput.measure_config(str(configs / config), overrides, steps,
                                                warmup, device, precision)
                del row["model"], row["datamodule"]
            else:
                model = synlm.from_config(str(configs / config), overrides)
                datamodule = model.datamodule
                datamodule.prepare_data()
                datamodule.setup("fit")
                measure = (throughput.measure_plain_lstm if what == "plain"
                           else throughput.measure_bare_loop)
                row = measure(model, datamodule, steps, warmup, device, precision)
            row.update(name=name, against=against)
            if against is not None:
                row["ratio"] = row["tokens_per_s"] / rows[against]["tokens_per_s"]
            rows[name] = row
    return list(rows.values())


def steps(device: str, runs: str, reference: Path | None = None) -> list[Step]:
    """The report's steps on ``device``, the quickstart's run under ``runs``; with
    ``reference`` (an rnng-pytorch checkout) the RNNG's beam search beside the released one."""
    py, bench = sys.executable, str(ROOT / "benchmarks")
    kernels = "unfused,fused" if device.startswith("cuda") else "unfused"  # fused: no CPU backward
    released = () if reference is None else ("--reference", str(reference))
    tiny_beams = ("--sentences", "2", "--repeats", "1", "--vocab-size", "100")
    tests = ("tests/test_kernels_on_lstm.py", "tests/test_kernels_prpn.py",
             "tests/test_kernel_self_check.py")
    pytest = (py, "-m", "pytest", "-q", "-p", "no:cacheprovider")
    cli = (py, "-c", "import sys; from synlm.cli import main; sys.exit(main())")
    accelerator = "gpu" if device.startswith("cuda") else "cpu"
    return [
        Step("Kernel tests on the device", (*pytest, *tests), (*pytest, tests[-1]), 110),
        Step("Throughput table, fp32 and bf16-mixed, peak memory",
             (py, f"{bench}/throughput.py", "--table", "--device", device),
             (py, f"{bench}/throughput.py", "--table", "--small", "--steps", "1", "--warmup",
              "1", "--device", device, "--json", *SMALL_CORPUS), 170),
        Step("Throughput, more rows: PaLM, DM-LSTM phase 2, Transformer, GPT-2",
             (py, f"{bench}/gpu_report.py", "--more-rows", "--device", device),
             (py, f"{bench}/gpu_report.py", "--more-rows", "--small", "--steps", "1",
              "--warmup", "1", "--device", device, "--json"), 130),
        Step("ON-LSTM step: PyTorch loop vs fused kernels",
             (py, f"{bench}/kernel_step.py", "--backbone", "onlstm", "--device", device),
             (py, f"{bench}/kernel_step.py", "--backbone", "onlstm", "--device", device,
              "--batch", "2", "--bptt", "4", "--input", "8", "--hidden", "12", "--chunk", "4",
              "--repeats", "1"), 45),
        Step("PRPN step: PyTorch loop vs fused kernels",
             (py, f"{bench}/kernel_step.py", "--backbone", "prpn", "--device", device,
              "--batch", "64", "--bptt", "35", "--input", "800", "--hidden", "1200",
              "--layers", "2"),
             (py, f"{bench}/kernel_step.py", "--backbone", "prpn", "--device", device,
              "--batch", "2", "--bptt", "4", "--input", "8", "--hidden", "12", "--layers", "2",
              "--repeats", "1"), 45),
        Step("Quickstart on the device",
             (*cli, "fit", "--config", "configs/quickstart.yaml",
              f"--trainer.accelerator={accelerator}", "--trainer.enable_progress_bar=false",
              f"--trainer.default_root_dir={runs}"),
             (*cli, "fit", "--config", "configs/quickstart.yaml",
              f"--trainer.accelerator={accelerator}", "--trainer.enable_progress_bar=false",
              "--trainer.max_epochs=1", "--trainer.limit_train_batches=2",
              "--trainer.limit_val_batches=1",
              f"--trainer.default_root_dir={runs}"), 60),
        Step("Syntactic Transformers: a training step per input token against a plain "
             "Transformer LM, unfused and fused attention, fp32 and bf16-mixed",
             (py, f"{bench}/action_transformer_speed.py", "train", "--device", device,
              "--kernels", kernels, "--dropout", "0", "--precisions", "32,bf16-mixed"),
             (py, f"{bench}/action_transformer_speed.py", "train", "--device", device,
              "--kernels", "unfused", "--dropout", "0", "--precisions", "32,bf16-mixed",
              "--batch", "2", "--warmup", "1", "--steps", "1",
              "--trees", "tests/fixtures/syntax/sample.mrg"), 150),
        Step("RNNG beam search: synlm's batched search"
             + ("" if reference is None else " beside rnng-pytorch's"),
             (py, f"{bench}/rnng_speed.py", "beam", "--device", device, "--repeats", "2",
              *released),
             (py, f"{bench}/rnng_speed.py", "beam", "--device", device, *tiny_beams,
              *released), 60),
        Step("Action Transformers' beam search against the RNNG's",
             (py, f"{bench}/action_transformer_speed.py", "beam", "--device", device,
              "--repeats", "2"),
             (py, f"{bench}/action_transformer_speed.py", "beam", "--device", device,
              *tiny_beams, "--beams", "10/5/1"), 90),
    ]


def describe(device: str) -> str:
    parts = [f"python {platform.python_version()}", f"torch {torch.__version__}"]
    try:
        import triton
        parts.append(f"triton {triton.__version__}")
    except ImportError:
        parts.append("no triton")
    if device.startswith("cuda") and torch.cuda.is_available():
        index = torch.device(device).index or 0
        parts.insert(0, f"{torch.cuda.get_device_name(index)} (CUDA {torch.version.cuda})")
    else:
        parts.insert(0, f"{platform.processor() or platform.machine()}, "
                        f"{os.cpu_count()} cores")
    return ", ".join(parts)


def run_step(step: Step, small: bool, budget: float, env: dict[str, str]) -> str:
    """The step's section: command, wall time, exit status, its stdout (the result) and the
    last ``TAIL`` lines of its stderr (logs and tracebacks)."""
    command = step.small if small else step.full
    limit = step.seconds * budget
    start = time.perf_counter()
    try:
        done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=limit)
        status, out, err = f"exit {done.returncode}", done.stdout, done.stderr
    except subprocess.TimeoutExpired as expired:
        status = f"stopped after its {limit:.0f} s"
        out, err = (part.decode() if isinstance(part, bytes) else (part or "")
                    for part in (expired.stdout, expired.stderr))
    elapsed = time.perf_counter() - start
    shown = " ".join(c if " " not in c else repr(c) for c in command)
    section = [f"## {step.title}", "", f"`{shown.replace(str(ROOT) + '/', '')}`: {status}, "
               f"{elapsed:.1f} s", ""]
    if out.strip():
        section += ["```", out.strip(), "```", ""]
    lines = [line for line in err.splitlines() if line.strip()]
    if lines:
        section += [f"stderr, the last {min(TAIL, len(lines))} of {len(lines)} lines:", "",
                    "```", *lines[-TAIL:], "```", ""]
    return "\n".join(section)


def last_validation(runs: Path) -> str:
    """The last validation row of the newest ``metrics.csv`` under ``runs``, as markdown."""
    files = sorted(runs.rglob("metrics.csv"), key=lambda p: p.stat().st_mtime)
    if not files:
        return "no metrics.csv was written\n"
    rows = [r for r in csv.DictReader(files[-1].open()) if r.get("val/ppl")]
    if not rows:
        return f"{files[-1]}: no validation row\n"
    keys = [k for k in ("epoch", "step", "val/ppl", "val/uf1") if rows[-1].get(k)]
    return (f"last validation ({files[-1]}): "
            + ", ".join(f"{k} {rows[-1][k]}" for k in keys) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--small", action="store_true", help="the smoke run: tiny sizes")
    parser.add_argument("--budget", type=float, default=1.0,
                        help="scales every step's time limit (1: 860 s in all)")
    parser.add_argument("--out", default=os.path.join(os.environ.get("OUT", "."),
                                                      "gpu_report.md"))
    parser.add_argument("--runs", default="runs/gpu_report", help="the quickstart's run folder")
    parser.add_argument("--more-rows", action="store_true",
                        help="only measure MORE_ROWS and print them (the report's step)")
    parser.add_argument("--steps", type=int, default=20, help="--more-rows: timed steps")
    parser.add_argument("--warmup", type=int, default=3, help="--more-rows: untimed steps")
    parser.add_argument("--json", action="store_true", help="--more-rows: one JSON row a line")
    parser.add_argument("--reference", type=Path,
                        help="an aistairc/rnng-pytorch checkout (f30c0ed, patched as "
                             "tests/fixtures/rnng/README.md says): the RNNG's beam search "
                             "runs beside its")
    args = parser.parse_args()
    if args.more_rows:
        import throughput

        device = torch.device(args.device)
        rows = more_rows(device, args.small, args.steps, args.warmup)
        if args.json:
            for row in rows:
                print(json.dumps({"device": throughput.describe(device), **row}))
        else:
            print(throughput.markdown(rows, device))
        return
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    if not args.device.startswith("cuda"):
        env["TRITON_INTERPRET"] = "1"  # kernels run interpreted on the CPU
    sections = [f"# GPU report ({'smoke run' if args.small else 'full'})", "",
                f"device: {describe(args.device)}", ""]
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)  # before the first step, not after it
    partial = out.with_name(out.name + ".partial")  # what a cut-off run leaves, so named
    for step in steps(args.device, args.runs, args.reference):
        section = run_step(step, args.small, args.budget, env)
        print(section.splitlines()[2], flush=True)  # the command, its status and time
        if step.title.startswith("Quickstart"):
            section += last_validation(Path(args.runs))
        sections.append(section)
        partial.write_text("\n".join(sections), encoding="utf-8")
    partial.replace(out)
    print(f"report: {out}")


if __name__ == "__main__":
    main()
