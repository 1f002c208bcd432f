"""Where an AWD-LSTM training step's time goes, beside a plain ``nn.LSTM`` LM of its sizes in
the same run: a CPU profile (the GPU's split differs: docs/performance.md says what carries).

    SYNLM_DATA_DIR=/path/to/data OMP_NUM_THREADS=1 python benchmarks/profile_awd_lstm.py
    OMP_NUM_THREADS=1 python benchmarks/profile_awd_lstm.py --tiny

``configs/awd_lstm.yaml`` (fixed windows of ``bptt``) is trained by ``trainer.fit``; after each
Lightning step, the same window also trains, in a bare loop (forward, loss, backward,
clipping at 0.25, the configured optimiser), a copy of the model with the whole recipe, and
copies with one part of it off: weight drop, AR/TAR, the locked and embedding dropouts. So
Lightning's share is the Lightning step less the recipe's, and each part's is the recipe
less the copy without it. On the same window the script also times throughput.py's plain
LSTM LM, the plain LM's LSTM stack alone (forward + backward) and the decoder with softmax
and cross-entropy alone. Torch runs on one thread and every time is the process's CPU time
(``time.process_time``: on a machine shared with other work, waiting for a core does not
count), the median over ``--steps`` interleaved rounds; each share is a fraction of the
Lightning step.

``--tiny`` shrinks the layers to 16 wide and trains on the synthetic treebank (a vocabulary of
a few hundred words): the arithmetic vanishes and what is left is each part's host time per
step (Python, the dispatcher, small tensors), which a GPU pays too. Each part's count of
ATen operators per step (views and allocations left out; on a GPU, roughly one kernel launch
each) is the difference of two steps' counts, the Lightning step's taken in one more round.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time
from collections import defaultdict
from collections.abc import Callable

import lightning.pytorch as pl
import torch
import torch.nn.functional as F
from throughput import PlainLSTMLM
from torch import Tensor, nn
from torch.utils._python_dispatch import TorchDispatchMode

import synlm
from synlm.lm import SyntaxLM
from synlm.outputs import Batch


def no_weight_drop(model: SyntaxLM) -> None:
    """DropConnect on every layer's ``W_hh`` off."""
    for rnn in model.backbone.rnns:
        rnn.weight_drop = 0.0


def no_ar_tar(model: SyntaxLM) -> None:
    """Activation and temporal activation regularisation off."""
    model.hparams.update(alpha=0.0, beta=0.0)


def no_dropout(model: SyntaxLM) -> None:
    """The locked dropouts (input, between layers, output) and the embedding dropout off."""
    backbone = model.backbone
    for dropout in (backbone.drop_input, backbone.drop_hidden, backbone.drop_output):
        dropout.p = 0.0
    model.model.embedding_dropout = 0.0


#: The recipe's copies with one part off: (name, how to turn it off).
ABLATIONS: list[tuple[str, Callable[[SyntaxLM], None]]] = [
    ("no weight drop", no_weight_drop), ("no AR/TAR", no_ar_tar), ("no dropout", no_dropout),
]
#: Operators that launch no kernel: allocations, metadata, the profiler's markers.
NO_KERNEL = {"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided",
             "detach", "lift_fresh", "set_", "resize_", "_record_function_enter_new",
             "_record_function_exit"}


class OpCounter(TorchDispatchMode):
    """Counts the ATen operators called under it (backward included), views and
    allocations left out."""

    def __init__(self) -> None:
        super().__init__()
        self.counts: dict[str, int] = defaultdict(int)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__
        if not func.is_view and name not in NO_KERNEL:
            self.counts[name] += 1
        return func(*args, **(kwargs or {}))


class RecipeStep:
    """One training step of a ``SyntaxLM`` in a bare loop: its own copy of the model and of
    the configured optimiser, the loss of ``training_step`` (carried state, AR/TAR, logging
    calls that find no trainer), clipping by norm at 0.25."""

    def __init__(self, model: SyntaxLM, turn_off: Callable[[SyntaxLM], None] | None) -> None:
        self.model = copy.deepcopy(model)
        if turn_off is not None:
            turn_off(self.model)
        optimizer = self.model.configure_optimizers()
        self.optimizer = optimizer["optimizer"] if isinstance(optimizer, dict) else optimizer
        self.params = list(self.model.parameters())

    def __call__(self, batch: Batch) -> None:
        loss, _ = self.model._step(batch, "train")
        loss.backward()
        nn.utils.clip_grad_norm_(self.params, 0.25)
        self.optimizer.step()
        self.optimizer.zero_grad()


class PlainStep:
    """throughput.py's baseline step: a plain nn.LSTM LM, mean cross-entropy, clipping, SGD."""

    def __init__(self, model: SyntaxLM) -> None:
        self.model = PlainLSTMLM(model.backbone, model.hparams.vocab_size)
        self.params = list(self.model.parameters())
        self.optimizer = torch.optim.SGD(self.params, lr=model.hparams.optimizer["init_args"]["lr"])
        self.state = None

    def __call__(self, batch: Batch) -> None:
        logits, self.state = self.model(batch.tokens, self.state)  # (B, T, V)
        F.cross_entropy(logits.flatten(0, 1), batch.targets.flatten()).backward()
        nn.utils.clip_grad_norm_(self.params, 0.25)
        self.optimizer.step()
        self.optimizer.zero_grad()


def lstm_stack_step(plain: PlainLSTMLM) -> Callable[[Batch], None]:
    """The plain LM's LSTM layers alone, forward + backward, on random embeddings."""

    def step(batch: Batch) -> None:
        h = torch.randn(*batch.tokens.shape, plain.embedding.embedding_dim, requires_grad=True)
        for rnn in plain.rnns:
            h, _ = rnn(h)  # (B, T, H_l)
        h.sum().backward()

    return step


def decoder_step(weight: Tensor) -> Callable[[Batch], None]:
    """The tied decoder, softmax and cross-entropy alone, forward + backward, as
    ``SyntaxModel`` and ``SyntaxLM`` compute them (per-token losses, then their mean)."""
    weight = weight.detach().requires_grad_()
    bias = torch.zeros(weight.size(0), requires_grad=True)

    def step(batch: Batch) -> None:
        hidden = torch.randn(*batch.tokens.shape, weight.size(1), requires_grad=True)
        logits = F.linear(hidden, weight, bias)  # (B, T, V)
        nll = F.cross_entropy(logits.flatten(0, 1).float(), batch.targets.flatten(),
                              reduction="none").view_as(batch.targets)
        nll.mean().backward()

    return step


class Rounds(pl.Callback):
    """Times each Lightning step (start of the batch to its end, optimiser step included),
    then every bare step on the same window; ``warmup`` rounds are not kept."""

    def __init__(self, steps: dict[str, Callable[[Batch], None]], warmup: int) -> None:
        self.steps, self.warmup = steps, warmup
        self.seconds: dict[str, list[float]] = defaultdict(list)

    def on_train_batch_start(self, trainer, module, batch, batch_idx) -> None:
        self._round = trainer.global_step  # counted over epochs, unlike batch_idx
        if self._round == trainer.max_steps - 1:  # the last round counts operators instead
            self.lightning_ops = OpCounter()
            self.lightning_ops.__enter__()
        self._start = time.process_time()

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx) -> None:
        lightning = time.process_time() - self._start
        if self._round == trainer.max_steps - 1:
            self.lightning_ops.__exit__(None, None, None)
            return
        keep = self._round >= self.warmup
        if keep:
            self.seconds["Lightning step"].append(lightning)
        for name, step in self.steps.items():
            start = time.process_time()
            step(batch)
            if keep:
                self.seconds[name].append(time.process_time() - start)


def count_ops(step: Callable[[Batch], None], batch: Batch) -> int:
    """ATen operators one call of ``step`` runs (``OpCounter``)."""
    with OpCounter() as counter:
        step(batch)
    return sum(counter.counts.values())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="configs/awd_lstm.yaml")
    parser.add_argument("--steps", type=int, default=5, help="timed rounds")
    parser.add_argument("--warmup", type=int, default=1, help="untimed rounds first")
    parser.add_argument("--tiny", action="store_true",
                        help="16-wide layers, the synthetic treebank: the host time per step")
    parser.add_argument("--top", type=int, default=12,
                        help="how many of the Lightning step's most called operators to list")
    args = parser.parse_args()

    overrides = ["--data.variable_bptt=false"]
    if args.tiny:
        overrides += ["--model.backbone.init_args.input_size=16",
                      "--model.backbone.init_args.hidden_size=16",
                      "--data.corpus=SyntheticTreebank"]
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = synlm.from_config(args.config, overrides)
    datamodule = model.datamodule
    datamodule.prepare_data()
    datamodule.setup("fit")
    plain = PlainStep(model)
    recipe = RecipeStep(model, None)
    steps = {"recipe, bare loop": recipe,
             **{name: RecipeStep(model, off) for name, off in ABLATIONS},
             "plain nn.LSTM LM": plain,
             "LSTM stack alone": lstm_stack_step(plain.model),
             "decoder + softmax alone": decoder_step(model.model.embedding.weight)}
    rounds = Rounds(steps, args.warmup)
    trainer = pl.Trainer(max_steps=args.warmup + args.steps + 1, limit_val_batches=0,
                         logger=False, enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False, num_sanity_val_steps=0,
                         gradient_clip_val=0.25, callbacks=[rounds], accelerator="cpu",
                         devices=1)
    trainer.fit(model, datamodule)

    ms = {name: statistics.median(times) * 1e3 for name, times in rounds.seconds.items()}
    batch = next(iter(datamodule.train_dataloader()))
    ops = {"Lightning step": sum(rounds.lightning_ops.counts.values()),
           **{name: count_ops(step, batch) for name, step in steps.items()}}
    total = ms["Lightning step"]
    print(f"{args.config}, B {batch.tokens.size(0)} x T {batch.tokens.size(1)}"
          f"{', tiny layers' if args.tiny else ''}, 1 thread, CPU time, median of "
          f"{args.steps} rounds")
    print("\n| step | ms | of the Lightning step | ATen operators |\n|---|---|---|---|")
    for name, value in ms.items():
        print(f"| {name} | {value:.1f} | {value / total:.3f} | {ops[name]} |")
    bare = "recipe, bare loop"
    parts = {"Lightning (its step less the bare loop's)": ("Lightning step", bare),
             **{name.replace("no ", ""): (bare, name) for name, _ in ABLATIONS}}
    print("\n| part | ms | share of the Lightning step | ATen operators |\n|---|---|---|---|")
    for part, (with_it, without) in parts.items():
        value = ms[with_it] - ms[without]
        print(f"| {part} | {value:.1f} | {value / total:.3f} | {ops[with_it] - ops[without]} |")
    print(f"\nplain LM step / Lightning step (the throughput ratio): "
          f"{ms['plain nn.LSTM LM'] / total:.3f}")
    lightning_ops = sorted(rounds.lightning_ops.counts.items(), key=lambda kv: -kv[1])
    print("the Lightning step's most called operators: "
          + ", ".join(f"{k} {v}" for k, v in lightning_ops[:args.top]))


if __name__ == "__main__":
    main()
