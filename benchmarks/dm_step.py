"""Micro-benchmark: one DM-LSTM phase-2 training step (AWD-LSTM + the dependency mixture:
query/key attention over a window, exact log-space NLL) against the same AWD-LSTM language
model, and the memory each step keeps for backward.

Both are full ``SyntaxLM`` steps (embedding, backbone, tied decoder over the vocabulary,
NLL, backward) on the same random tokens, in train mode, interleaved; the target is a step
at most 1.3× and memory at most 1.5× the AWD-LSTM's (the reference builds a dense
multi-hot per step and mixes in probability space).

    python benchmarks/dm_step.py --batch 20 --bptt 70 --threads 2
"""

from __future__ import annotations

import time

import torch

from synlm.backbones import AWDLSTM
from synlm.heads import DependencyMixtureHead
from synlm.lm import SyntaxLM
from synlm.outputs import Batch
from timing import paired_ratio, saved_megabytes, step_inputs, step_parser


def step_seconds(model: SyntaxLM, batch: Batch) -> float:
    start = time.perf_counter()
    (-model(batch).target_log_probs.mean()).backward()
    elapsed = time.perf_counter() - start
    model.zero_grad(set_to_none=True)
    return elapsed


def main() -> None:
    parser = step_parser(__doc__.splitlines()[0], hidden=1150)
    parser.add_argument("--vocab", type=int, default=10000)
    parser.add_argument("--context", type=int, default=16)
    args = parser.parse_args()
    step_inputs(args)  # threads and seed
    tokens = torch.randint(0, args.vocab, (args.batch, args.bptt + 1))
    batch = Batch(tokens=tokens[:, :-1], targets=tokens[:, 1:],
                  mask=torch.ones(args.batch, args.bptt, dtype=torch.bool))
    sizes = (args.input, args.hidden, args.layers)
    awd = SyntaxLM(AWDLSTM(*sizes), vocab_size=args.vocab).train()
    dm = SyntaxLM(AWDLSTM(*sizes), vocab_size=args.vocab, heads=[
        DependencyMixtureHead("mixture", context=args.context)]).train()
    print(f"B={args.batch} T={args.bptt} V={args.vocab} sizes={args.input}/{args.hidden}x"
          f"{args.layers} context={args.context} threads={torch.get_num_threads()}")
    for _ in range(2):
        step_seconds(awd, batch), step_seconds(dm, batch)
    pairs = [(step_seconds(awd, batch), step_seconds(dm, batch)) for _ in range(args.repeats)]
    t_awd, t_dm, ratio = paired_ratio(pairs)
    print(f"AWD-LSTM: {t_awd * 1e3:.1f} ms   DM-LSTM: {t_dm * 1e3:.1f} ms   "
          f"ratio (median of paired ratios) {ratio:.2f}")
    m_awd, m_dm = (saved_megabytes(lambda m=m: m(batch)) for m in (awd, dm))
    print(f"saved for backward: AWD-LSTM {m_awd:.1f} MB, DM-LSTM {m_dm:.1f} MB "
          f"(x{m_dm / m_awd:.2f})")


if __name__ == "__main__":
    main()
