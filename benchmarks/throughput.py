"""Training throughput (tokens/s) and peak memory of a config, beside a baseline in one run,
on one device.

    python benchmarks/throughput.py --config configs/awd_lstm.yaml [--steps N] [--json]
    python benchmarks/throughput.py --config configs/onlstm.yaml \
        --baseline-config configs/awd_lstm.yaml
    python benchmarks/throughput.py --config configs/prpn.yaml \
        --baseline-override=--model.backbone.init_args.kernel=reference
    python benchmarks/throughput.py --config configs/transformer.yaml \
        --override=--data.max_tokens=2048
    python benchmarks/throughput.py --table [--device cuda] [--steps 50]   # the GPU-speed table

The config is trained by the real Lightning loop (``trainer.fit``) for ``warmup + steps``
windows; only the last ``steps`` are timed. For an AWDLSTM config the default baseline is
a plain ``nn.LSTM`` language model of the same sizes with no regularisation (cuDNN's on a
GPU), run by a bare PyTorch loop on the same windows: the ratio shows what weight drop, the
dropouts, AR/TAR and Lightning cost. For any other backbone (Transformer, GPT-2) the default
baseline is a bare PyTorch loop over the same layers (a copy of the backbone, an embedding,
the tied decoder, the config's optimiser): the ratio shows what ``SyntaxLM`` and Lightning
cost. With ``--baseline-config``/``--baseline-override`` the baseline is another config
trained the same way.

Both run on ``--device`` (default: the GPU when there is one) at ``--precision``; on a GPU
every timed step is bracketed by ``torch.cuda.synchronize`` and peak memory is reset before
each measurement. ``--table`` measures every row of the GPU-speed table (AWD-LSTM, ON-LSTM,
ONLSTM-SYD against the plain LSTM at B 20 x T 70; PRPN and PRPN-SYD against it at B 64 x
T 35; each backbone in bf16-mixed against itself in fp32) and prints it as Markdown;
``--small`` shrinks every model and uses the synthetic treebank (a smoke run on a CPU).
Needs the configs' corpora (``SYNLM_DATA_DIR``) otherwise.
"""

from __future__ import annotations

import argparse
import copy
import json
import resource
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from itertools import pairwise
from pathlib import Path

import lightning.pytorch as pl
import torch
import torch.nn.functional as F
from torch import nn

import synlm
from synlm.backbones import AWDLSTM
from synlm.lm import SyntaxLM
from synlm.optim import optimizer_class
from synlm.outputs import Batch

PRECISIONS = ("32-true", "bf16-mixed")


def synchronize(device: torch.device) -> None:
    """Wait for the device's queued work (a GPU runs asynchronously to the host)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def describe(device: torch.device) -> str:
    if device.type == "cuda":
        return f"{torch.cuda.get_device_name(device)} (torch {torch.__version__})"
    return f"cpu, {torch.get_num_threads()} threads (torch {torch.__version__})"


def reset_peak_memory(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)


def peak_memory_mb(device: torch.device) -> float:
    """The device's peak allocated memory since the last reset; on the CPU, the process's
    peak resident memory (which cannot be reset: it only grows from one run to the next)."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**10


def autocast(device: torch.device, precision: str) -> AbstractContextManager:
    """What Lightning's ``precision`` does to a bare loop's forward: bf16 autocast or none."""
    if precision == "bf16-mixed":
        return torch.autocast(device.type, dtype=torch.bfloat16)
    return nullcontext()


class StepTimer(pl.Callback):
    """Wall time and tokens of every training step after the first ``warmup``, the device
    synchronised at both ends of each timed step."""

    def __init__(self, warmup: int, device: torch.device) -> None:
        self.warmup, self.device = warmup, device
        self.seconds = 0.0
        self.tokens = 0

    def on_train_batch_start(self, trainer, module, batch, batch_idx) -> None:
        synchronize(self.device)
        self._start = time.perf_counter()

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx) -> None:
        synchronize(self.device)
        if batch_idx >= self.warmup:
            self.seconds += time.perf_counter() - self._start
            self.tokens += batch.n_targets


def measure_config(config: str, overrides: list[str], steps: int, warmup: int,
                   device: torch.device, precision: str = "32-true") -> dict:
    model = synlm.from_config(config, overrides)
    datamodule = model.datamodule
    timer = StepTimer(warmup, device)
    reset_peak_memory(device)
    trainer = pl.Trainer(max_steps=warmup + steps, limit_val_batches=0, logger=False,
                         enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False, num_sanity_val_steps=0,
                         gradient_clip_val=0.25, callbacks=[timer], precision=precision,
                         accelerator="gpu" if device.type == "cuda" else "cpu",
                         devices=[device.index or 0] if device.type == "cuda" else 1)
    trainer.fit(model, datamodule)
    return {"config": config, "overrides": overrides, "precision": precision,
            "backbone": type(model.backbone).__name__,
            "params": sum(p.numel() for p in model.parameters()),
            "tokens_per_s": timer.tokens / timer.seconds,
            "peak_memory_mb": peak_memory_mb(device),
            "model": model, "datamodule": datamodule}


class PlainLSTMLM(nn.Module):
    """Embedding, stacked ``nn.LSTM`` layers of the same sizes, tied decoder; nothing else."""

    def __init__(self, backbone: AWDLSTM, vocab_size: int) -> None:
        super().__init__()
        sizes = [backbone.spec.input_size, *backbone.spec.layer_sizes]
        self.embedding = nn.Embedding(vocab_size, sizes[0])
        self.rnns = nn.ModuleList(nn.LSTM(a, b, batch_first=True)
                                  for a, b in pairwise(sizes))
        self.decoder = nn.Linear(sizes[-1], vocab_size)
        self.decoder.weight = self.embedding.weight

    def forward(self, tokens: torch.Tensor, state: list | None) -> tuple[torch.Tensor, list]:
        h, new_state = self.embedding(tokens), []
        for i, rnn in enumerate(self.rnns):
            h, layer_state = rnn(h, None if state is None else state[i])
            new_state.append(tuple(s.detach() for s in layer_state))
        return self.decoder(h), new_state


def bare_loop_tokens_per_s(datamodule, steps: int, warmup: int, params: list,
                           optimizer: torch.optim.Optimizer,
                           loss: Callable[[Batch], torch.Tensor], device: torch.device,
                           precision: str) -> float:
    """Tokens/s of a bare PyTorch loop minimising ``loss(batch)`` over ``params`` on the
    training batches moved to ``device`` (clipped at 0.25 as the Lightning run, autocast
    as ``precision``), timing the steps after ``warmup``, synchronised as ``StepTimer``."""
    seconds, tokens = 0.0, 0
    for i, batch in enumerate(datamodule.train_dataloader()):
        if i == warmup + steps:
            break
        batch = batch.to(device)
        synchronize(device)
        start = time.perf_counter()
        optimizer.zero_grad()
        with autocast(device, precision):
            value = loss(batch)
        value.backward()
        nn.utils.clip_grad_norm_(params, 0.25)
        optimizer.step()
        synchronize(device)
        if i >= warmup:
            seconds += time.perf_counter() - start
            tokens += batch.n_targets
    return tokens / seconds


def measure_plain_lstm(model: SyntaxLM, datamodule, steps: int, warmup: int,
                       device: torch.device, precision: str = "32-true") -> dict:
    plain = PlainLSTMLM(model.backbone, model.hparams.vocab_size).to(device)
    params = list(plain.parameters())
    optimizer = torch.optim.SGD(params, lr=model.hparams.optimizer["init_args"]["lr"])
    state = None

    def loss(batch: Batch) -> torch.Tensor:
        nonlocal state
        logits, state = plain(batch.tokens, state)
        return F.cross_entropy(logits.flatten(0, 1), batch.targets.flatten())

    reset_peak_memory(device)
    return {"baseline": "plain nn.LSTM LM (no regularisation, bare loop)",
            "params": sum(p.numel() for p in params), "precision": precision,
            "tokens_per_s": bare_loop_tokens_per_s(datamodule, steps, warmup, params,
                                                   optimizer, loss, device, precision),
            "peak_memory_mb": peak_memory_mb(device)}


def measure_bare_loop(model: SyntaxLM, datamodule, steps: int, warmup: int,
                      device: torch.device, precision: str = "32-true") -> dict:
    """The same layers (a copy of ``model``'s backbone), embedding and tied decoder trained
    by a bare loop on the same batches with the config's optimiser and the same clipping."""
    backbone = copy.deepcopy(model.backbone).train().to(device)
    embedding = copy.deepcopy(model.embedding).to(device)
    params = [*backbone.parameters(), *embedding.parameters()]
    config = model.hparams.optimizer
    optimizer = optimizer_class(config["class_path"])(params, **config.get("init_args", {}))

    def loss(batch: Batch) -> torch.Tensor:
        hidden = backbone(embedding(batch.tokens)).hidden  # (B, T, E)
        logits = F.linear(hidden, embedding.weight)  # (B, T, V)
        nll = F.cross_entropy(logits.flatten(0, 1), batch.targets.flatten(), reduction="none")
        return nll[batch.mask.flatten()].mean()

    reset_peak_memory(device)
    return {"baseline": f"the same {type(backbone).__name__} layers in a bare loop",
            "params": sum(p.numel() for p in params), "precision": precision,
            "tokens_per_s": bare_loop_tokens_per_s(datamodule, steps, warmup, params,
                                                   optimizer, loss, device, precision),
            "peak_memory_mb": peak_memory_mb(device)}


#: ``--small``: every model shrunk, on the synthetic treebank (a smoke run of the table).
SMALL = ["--model.backbone.init_args.input_size=20", "--model.backbone.init_args.hidden_size=40",
         "--data.corpus=SyntheticTreebank"]
#: PRPN's batch geometry (its config's), for the plain LSTM it is compared with.
B64_T35 = ["--data.batch_size=64", "--data.bptt=35", "--data.variable_bptt=false"]
#: The backbones' PyTorch time loop instead of the fused kernels ("auto" picks them on a GPU).
TORCH_LOOP = ["--model.backbone.init_args.kernel=torch"]
#: The GPU-speed table: (row, config, overrides, precision, the row it is compared with).
TABLE = [
    ("plain LSTM LM, B20 T70", None, [], "32-true", None),
    ("AWD-LSTM", "awd_lstm.yaml", [], "32-true", "plain LSTM LM, B20 T70"),
    ("ON-LSTM", "onlstm.yaml", [], "32-true", "plain LSTM LM, B20 T70"),
    ("ONLSTM-SYD", "onlstm_syd.yaml", [], "32-true", "plain LSTM LM, B20 T70"),
    ("ONLSTM-SYD, PyTorch loop", "onlstm_syd.yaml", TORCH_LOOP, "32-true",
     "plain LSTM LM, B20 T70"),
    ("plain LSTM LM, B64 T35", None, B64_T35, "32-true", None),
    ("PRPN", "prpn.yaml", [], "32-true", "plain LSTM LM, B64 T35"),
    ("PRPN, PyTorch loop", "prpn.yaml", TORCH_LOOP, "32-true", "plain LSTM LM, B64 T35"),
    ("PRPN-SYD", "prpn_syd.yaml", [], "32-true", "plain LSTM LM, B64 T35"),
    ("AWD-LSTM bf16", "awd_lstm.yaml", [], "bf16-mixed", "AWD-LSTM"),
    ("ONLSTM-SYD bf16", "onlstm_syd.yaml", [], "bf16-mixed", "ONLSTM-SYD"),
    ("PRPN bf16", "prpn.yaml", [], "bf16-mixed", "PRPN"),
]


def measure_table(configs: Path, steps: int, warmup: int, device: torch.device,
                  extra: list[str]) -> list[dict]:
    """Every ``TABLE`` row measured on ``device`` (``extra``: overrides for every row), with
    its ratio to the row it is compared with."""
    rows: dict[str, dict] = {}
    for name, config, overrides, precision, against in TABLE:
        torch.manual_seed(0)
        if config is None:  # the plain LSTM of AWD-LSTM's sizes, on AWD-LSTM's windows
            model = synlm.from_config(str(configs / "awd_lstm.yaml"), [*extra, *overrides])
            datamodule = model.datamodule
            datamodule.prepare_data()
            datamodule.setup("fit")
            row = measure_plain_lstm(model, datamodule, steps, warmup, device, precision)
        else:
            row = measure_config(str(configs / config), [*extra, *overrides], steps, warmup,
                                 device, precision)
            del row["model"], row["datamodule"]
        row.update(name=name, against=against)
        if against is not None:
            row["ratio"] = row["tokens_per_s"] / rows[against]["tokens_per_s"]
        rows[name] = row
    return list(rows.values())


def markdown(rows: list[dict], device: torch.device) -> str:
    lines = [f"device: {describe(device)}", "",
             "| row | precision | tokens/s | ratio | to | peak memory (MB) |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        ratio = f"{r['ratio']:.3f}" if "ratio" in r else "1"
        lines.append(f"| {r['name']} | {r['precision']} | {r['tokens_per_s']:,.0f} | {ratio} "
                     f"| {r['against'] or '-'} | {r['peak_memory_mb']:,.0f} |")
    if device.type == "cpu":
        lines.append("\n(on the CPU, peak memory is the process's peak resident memory so "
                     "far: it only grows down the table)")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", help="the config to measure (or --table)")
    parser.add_argument("--table", action="store_true", help="every row of the GPU-speed "
                        "table, as Markdown (or one JSON object per row with --json)")
    parser.add_argument("--small", action="store_true",
                        help="--table with small models on the synthetic treebank")
    parser.add_argument("--override", action="append", default=[],
                        help="a CLI override for the config, e.g. --override=--data.bptt=35")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--device", help="cpu, cuda, cuda:1 (default: cuda when available)")
    parser.add_argument("--precision", choices=PRECISIONS, default="32-true",
                        help="of the config and of the baseline")
    parser.add_argument("--baseline-config", help="time this config too and print the ratio")
    parser.add_argument("--baseline-override", action="append", default=[],
                        help="overrides for the baseline (default config: --config's)")
    parser.add_argument("--json", action="store_true", help="print JSON")
    args = parser.parse_args()
    if not (args.config or args.table):
        parser.error("give --config FILE or --table")
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))

    if args.table:
        configs = Path(__file__).resolve().parents[1] / "synlm" / "configs"
        extra = [*(SMALL if args.small else []), *args.override]
        rows = measure_table(configs, args.steps, args.warmup, device, extra)
        if args.json:
            for row in rows:
                print(json.dumps({"device": describe(device), **row}))
        else:
            print(markdown(rows, device))
        return

    torch.manual_seed(0)
    result = measure_config(args.config, args.override, args.steps, args.warmup, device,
                            args.precision)
    model, datamodule = result.pop("model"), result.pop("datamodule")
    if args.baseline_config or args.baseline_override:
        baseline = measure_config(args.baseline_config or args.config,
                                  args.override + args.baseline_override, args.steps,
                                  args.warmup, device, args.precision)
        del baseline["model"], baseline["datamodule"]
    elif isinstance(model.backbone, AWDLSTM):
        baseline = measure_plain_lstm(model, datamodule, args.steps, args.warmup, device,
                                      args.precision)
    else:
        baseline = measure_bare_loop(model, datamodule, args.steps, args.warmup, device,
                                     args.precision)
    result["baseline"] = baseline
    result["ratio"] = result["tokens_per_s"] / baseline["tokens_per_s"]
    result["device"] = describe(device)
    result["torch_threads"] = torch.get_num_threads()
    if args.json:
        print(json.dumps(result))
        return
    print(f"device: {result['device']}, precision {args.precision}")
    print(f"{result['backbone']} ({result['params']:,} params): "
          f"{result['tokens_per_s']:,.0f} tokens/s, peak memory {result['peak_memory_mb']:,.0f} MB")
    name = baseline.get("baseline") or baseline["backbone"]
    print(f"baseline {name}: {baseline['tokens_per_s']:,.0f} tokens/s")
    print(f"ratio (config / baseline throughput): {result['ratio']:.3f}")


if __name__ == "__main__":
    main()
