"""PRPN's speed against its per-step reference: a training step (forward + backward) of the
backbone with ``kernel="reference"`` (the baseline) and with the default kernel, same weights.

The reference (``synlm.backbones.prpn``, ``ReadingLayer.step`` and
``PredictNetwork.attend_step``) is the straightforward way, as yikangshen/PRPN model_PRPN.py
runs it: a Python loop over time in every reading layer and in the predictor's attention,
the full key projection on ``cat([x_t, h_{t−1}])`` and the LSTM input projection at every
step, memories shifted with ``torch.cat`` (slot 0 newest) after every step, and autograd
recording each op. The default kernel vectorises the gates and the predictor, hoists the
projections and runs each reading layer's loop as one custom autograd function
(docs/models/prpn.md).

Run ``python benchmarks/prpn_naive.py`` to time both.
"""

from __future__ import annotations

import argparse

import torch

from synlm.backbones.prpn import PRPN
from timing import interleaved_steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--emb", type=int, default=200)
    parser.add_argument("--hidden", type=int, default=400)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--slots", type=int, default=15)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--bptt", type=int, default=35)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: default)")
    parser.add_argument("--syd", action="store_true")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    kwargs = dict(input_size=args.emb, hidden_size=args.hidden, num_layers=args.layers,
                  n_slots=args.slots, syd=args.syd)
    fast = PRPN(**kwargs).to(args.device).train()
    reference = PRPN(**kwargs, kernel="reference").to(args.device).train()
    reference.load_state_dict(fast.state_dict())
    x = torch.randn(args.batch, args.bptt, args.emb, device=args.device)
    tokens = args.batch * args.bptt
    times = interleaved_steps(reference, fast, x, args.repeats)
    print(f"{vars(args)} threads={torch.get_num_threads()}")
    for stat, pick in (("best", min), ("median", lambda ts: sorted(ts)[len(ts) // 2])):
        t_ref, t_fast = (pick(ts) for ts in zip(*times, strict=True))
        print(f"{stat:6}: reference {t_ref * 1e3:7.1f} ms/step ({tokens / t_ref:6.0f} tok/s), "
              f"fast {t_fast * 1e3:7.1f} ms/step ({tokens / t_fast:6.0f} tok/s), "
              f"speed-up {t_ref / t_fast:.2f}x")


if __name__ == "__main__":
    main()
