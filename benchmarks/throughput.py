"""Training throughput (tokens/s) and peak memory of a config, beside a baseline in one run.

    python benchmarks/throughput.py --config configs/awd_lstm.yaml [--steps N] [--json]
    python benchmarks/throughput.py --config configs/onlstm.yaml \
        --baseline-config configs/awd_lstm.yaml
    python benchmarks/throughput.py --config configs/prpn.yaml \
        --baseline-override=--model.backbone.class_path=prpn_naive.NaivePRPN
    python benchmarks/throughput.py --config configs/transformer.yaml \
        --override=--data.max_tokens=2048

The config is trained by the real Lightning loop (``trainer.fit``) for ``warmup + steps``
windows; only the last ``steps`` are timed. For an AWDLSTM config the default baseline is
a plain ``nn.LSTM`` language model of the same sizes with no regularisation, run by a
bare PyTorch loop on the same windows: the ratio shows what weight drop, the dropouts,
AR/TAR and Lightning cost. For any other backbone (Transformer, GPT-2) the default baseline
is a bare PyTorch loop over the same layers (a copy of the backbone, an embedding, the
tied decoder, the config's optimiser): the ratio shows what ``SyntaxLM`` and Lightning
cost. With ``--baseline-config``/``--baseline-override`` the
baseline is another config trained the same way. Needs the config's corpus
(``SYNLM_DATA_DIR``); ``--override=--data.corpus=SyntheticTreebank`` runs without one.
"""

from __future__ import annotations

import argparse
import copy
import json
import resource
import sys
import time
from collections.abc import Callable
from itertools import pairwise
from pathlib import Path

import lightning.pytorch as pl
import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))  # baselines beside this file

import synlm
from synlm.backbones import AWDLSTM
from synlm.lm import SyntaxLM
from synlm.optim import optimizer_class
from synlm.outputs import Batch


class StepTimer(pl.Callback):
    """Wall time and tokens of every training step after the first ``warmup``."""

    def __init__(self, warmup: int) -> None:
        self.warmup = warmup
        self.seconds = 0.0
        self.tokens = 0

    def on_train_batch_start(self, trainer, module, batch, batch_idx) -> None:
        self._start = time.perf_counter()

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx) -> None:
        if batch_idx >= self.warmup:
            self.seconds += time.perf_counter() - self._start
            self.tokens += int(batch.mask.sum())


def peak_memory_mb() -> float:
    if torch.cuda.is_available():
        return torch.cuda.max_memory_allocated() / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**10  # process peak RSS


def measure_config(config: str, overrides: list[str], steps: int, warmup: int) -> dict:
    model = synlm.from_config(config, overrides)
    datamodule = model.datamodule
    timer = StepTimer(warmup)
    trainer = pl.Trainer(max_steps=warmup + steps, limit_val_batches=0, logger=False,
                         enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False, num_sanity_val_steps=0,
                         gradient_clip_val=0.25, callbacks=[timer])
    trainer.fit(model, datamodule)
    return {"config": config, "overrides": overrides,
            "backbone": type(model.backbone).__name__,
            "params": sum(p.numel() for p in model.parameters()),
            "tokens_per_s": timer.tokens / timer.seconds, "peak_memory_mb": peak_memory_mb(),
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
                           loss: Callable[[Batch], torch.Tensor]) -> float:
    """Tokens/s of a bare PyTorch loop minimising ``loss(batch)`` over ``params`` on the
    training batches (clipped at 0.25 as the Lightning run), timing the steps after
    ``warmup``."""
    seconds, tokens = 0.0, 0
    for i, batch in enumerate(datamodule.train_dataloader()):
        if i == warmup + steps:
            break
        start = time.perf_counter()
        optimizer.zero_grad()
        loss(batch).backward()
        nn.utils.clip_grad_norm_(params, 0.25)
        optimizer.step()
        if i >= warmup:
            seconds += time.perf_counter() - start
            tokens += int(batch.mask.sum())
    return tokens / seconds


def measure_plain_lstm(model: SyntaxLM, datamodule, steps: int, warmup: int) -> dict:
    plain = PlainLSTMLM(model.backbone, model.hparams.vocab_size)
    params = list(plain.parameters())
    optimizer = torch.optim.SGD(params, lr=model.hparams.optimizer["init_args"]["lr"])
    state = None

    def loss(batch: Batch) -> torch.Tensor:
        nonlocal state
        logits, state = plain(batch.tokens, state)
        return F.cross_entropy(logits.flatten(0, 1), batch.targets.flatten())

    return {"baseline": "plain nn.LSTM LM (no regularisation, bare loop)",
            "params": sum(p.numel() for p in params),
            "tokens_per_s": bare_loop_tokens_per_s(datamodule, steps, warmup, params,
                                                   optimizer, loss)}


def measure_bare_loop(model: SyntaxLM, datamodule, steps: int, warmup: int) -> dict:
    """The same layers (a copy of ``model``'s backbone), embedding and tied decoder trained
    by a bare loop on the same batches with the config's optimiser and the same clipping."""
    backbone = copy.deepcopy(model.backbone).train()
    embedding = copy.deepcopy(model.embedding)
    params = [*backbone.parameters(), *embedding.parameters()]
    config = model.hparams.optimizer
    optimizer = optimizer_class(config["class_path"])(params, **config.get("init_args", {}))

    def loss(batch: Batch) -> torch.Tensor:
        hidden = backbone(embedding(batch.tokens)).hidden  # (B, T, E)
        logits = F.linear(hidden, embedding.weight)  # (B, T, V)
        nll = F.cross_entropy(logits.flatten(0, 1), batch.targets.flatten(), reduction="none")
        return nll[batch.mask.flatten()].mean()

    return {"baseline": f"the same {type(backbone).__name__} layers in a bare loop",
            "params": sum(p.numel() for p in params),
            "tokens_per_s": bare_loop_tokens_per_s(datamodule, steps, warmup, params,
                                                   optimizer, loss)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", required=True)
    parser.add_argument("--override", action="append", default=[],
                        help="a CLI override for the config, e.g. --override=--data.bptt=35")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--baseline-config", help="time this config too and print the ratio")
    parser.add_argument("--baseline-override", action="append", default=[],
                        help="overrides for the baseline (default config: --config's)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()

    torch.manual_seed(0)
    result = measure_config(args.config, args.override, args.steps, args.warmup)
    model, datamodule = result.pop("model"), result.pop("datamodule")
    baseline = None
    if args.baseline_config or args.baseline_override:
        baseline = measure_config(args.baseline_config or args.config,
                                  args.override + args.baseline_override, args.steps,
                                  args.warmup)
        del baseline["model"], baseline["datamodule"]
    elif isinstance(model.backbone, AWDLSTM):
        baseline = measure_plain_lstm(model, datamodule, args.steps, args.warmup)
    else:
        baseline = measure_bare_loop(model, datamodule, args.steps, args.warmup)
    if baseline is not None:
        result["baseline"] = baseline
        result["ratio"] = result["tokens_per_s"] / baseline["tokens_per_s"]
    result["torch_threads"] = torch.get_num_threads()
    if args.json:
        print(json.dumps(result))
        return
    print(f"{result['backbone']} ({result['params']:,} params): "
          f"{result['tokens_per_s']:,.0f} tokens/s, peak memory {result['peak_memory_mb']:,.0f} MB")
    if baseline is not None:
        name = baseline.get("baseline") or baseline["backbone"]
        print(f"baseline {name}: {baseline['tokens_per_s']:,.0f} tokens/s")
        print(f"ratio (config / baseline throughput): {result['ratio']:.3f}")


if __name__ == "__main__":
    main()
