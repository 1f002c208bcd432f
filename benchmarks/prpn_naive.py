"""PRPN, the straightforward way: the baseline of the PRPN speed benchmark and the oracle of
the equivalence tests.

``NaivePRPN`` subclasses ``synlm.backbones.prpn.PRPN`` (same constructor, same parameters,
so one state dict loads into both) and replaces its forward by the reference's structure
(yikangshen/PRPN model_PRPN.py): one Python loop over time with every reading layer and the
predictor's attention inside, the gates of each step built from a list of past distances, the
full key projection on ``cat([x_t, h_{t−1}])`` and the LSTM input projection at every step,
and memories shifted with ``torch.cat`` (slot 0 newest) after every step.

Run ``python benchmarks/prpn_naive.py`` to time a training step (forward + backward) of both.
"""

from __future__ import annotations

import argparse
import math

import torch
import torch.nn.functional as F
from torch import Tensor

from synlm.backbones.prpn import PRPN, PRPNState
from synlm.outputs import BackboneOutput
from timing import interleaved_steps


def reference_softmax(x: Tensor, mask: Tensor) -> Tensor:
    """yikangshen/PRPN blocks.py ``softmax(x, mask)``."""
    e_x = torch.exp(x - x.max(dim=-1, keepdim=True)[0]) * mask
    return e_x / (e_x.sum(dim=-1, keepdim=True) + 1e-8)


class NaivePRPN(PRPN):
    """PRPN with a per-step forward; see the module docstring."""

    def step_gates(self, query: Tensor, history: list[Tensor]) -> Tensor:
        """(B,) query and the distances so far (newest last) -> (B, n) gates of one step."""
        past = torch.stack(history[::-1][: self.n_slots], dim=1)  # (B, n), [:, k] = d_{t−k}
        delta = query[:, None] - past
        if self.hard:
            alpha = (F.hardtanh(delta * self.tau * 2 + 1) + 1) / 2
        else:
            alpha = torch.sigmoid(delta * self.tau * 10 + 5)
        return torch.cumprod(alpha, dim=1)

    def forward(self, x: Tensor, state: PRPNState | None = None) -> BackboneOutput:
        # x: (B, T, E)
        st = self.initial_state(x) if state is None else PRPNState(*state)
        dist, parser_state = self.parser(x, st.parser)  # (B, T, 2 or 3)
        H, train = self.hidden_size, self.training
        history = list(st.distances.unbind(1))  # oldest first
        mem_h = [m[..., :H] for m in st.readers]  # per layer (B, n, H)
        mem_c = [m[..., H:] for m in st.readers]
        pred_mem = st.predictor
        rmask = self.recurrent_mask(x)
        tops, sels, layers = [], [], [[] for _ in self.readers]
        for t in range(x.size(1)):
            history.append(dist[:, t, 0])
            gate = self.step_gates(dist[:, t, 0], history)
            gate_next = self.step_gates(dist[:, t, 1], history)
            inp = x[:, t]
            for i, reader in enumerate(self.readers):
                pk = reader.key_dropout
                key_in = F.dropout(torch.cat([inp, mem_h[i][:, 0]], dim=1), pk, train)
                key = F.dropout(reader.key(key_in), pk, train)
                logits = torch.bmm(mem_h[i], key[:, :, None]).squeeze(2) / math.sqrt(H)
                att = reference_softmax(logits, gate)
                sel_h = (mem_h[i] * att[:, :, None]).sum(dim=1)
                sel_c = (mem_c[i] * att[:, :, None]).sum(dim=1)
                if rmask is not None:
                    sel_h = sel_h * rmask[i]
                h, c = reader.cell(F.dropout(inp, reader.dropout, train), (sel_h, sel_c))
                mem_h[i] = torch.cat([h[:, None], mem_h[i][:, :-1]], dim=1)
                mem_c[i] = torch.cat([c[:, None], mem_c[i][:, :-1]], dim=1)
                layers[i].append(h)
                inp = h
            pred = self.predictor
            key = F.dropout(pred.key(F.dropout(inp, pred.dropout, train)), pred.dropout, train)
            logits = torch.bmm(pred_mem, key[:, :, None]).squeeze(2) / math.sqrt(H)
            att = reference_softmax(logits, gate_next)
            sels.append((pred_mem * att[:, :, None]).sum(dim=1))
            pred_mem = torch.cat([inp[:, None], pred_mem[:, :-1]], dim=1)
            tops.append(inp)
        out = self.predictor.output(torch.stack(tops, dim=1), torch.stack(sels, dim=1))
        out = F.dropout(out, self.dropout, train)
        distances = dist[..., 0::2] if self.syd else dist[..., :1]
        new_state = PRPNState(
            parser=parser_state,
            distances=torch.stack(history[-self.n_slots :], dim=1),
            readers=[torch.cat([h_, c_], dim=-1) for h_, c_ in zip(mem_h, mem_c, strict=True)],
            predictor=pred_mem,
        )
        return BackboneOutput(
            hidden=out,
            state=new_state,
            layers=[torch.stack(hs, dim=1) for hs in layers],
            distances=distances.permute(2, 0, 1),
        )


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
    naive = NaivePRPN(**kwargs).to(args.device).train()
    naive.load_state_dict(fast.state_dict())
    x = torch.randn(args.batch, args.bptt, args.emb, device=args.device)
    tokens = args.batch * args.bptt
    times = interleaved_steps(naive, fast, x, args.repeats)
    print(f"{vars(args)} threads={torch.get_num_threads()}")
    for stat, pick in (("best", min), ("median", lambda ts: sorted(ts)[len(ts) // 2])):
        t_naive, t_fast = (pick(ts) for ts in zip(*times, strict=True))
        print(f"{stat:6}: naive {t_naive * 1e3:7.1f} ms/step ({tokens / t_naive:6.0f} tok/s), "
              f"fast {t_fast * 1e3:7.1f} ms/step ({tokens / t_fast:6.0f} tok/s), "
              f"speed-up {t_naive / t_fast:.2f}x")


if __name__ == "__main__":
    main()
