"""Float64 reference fixture for synlm's RNNG, computed by the released RNNG code of Noji &
Oseki (2021), aistairc/rnng-pytorch at commit f30c0ed (MIT licence).

    python benchmarks/rnng_reference.py --reference PATH/TO/rnng-pytorch \\
        --out tests/fixtures/rnng/reference.pt
    python benchmarks/rnng_reference.py --reference PATH/TO/rnng-pytorch \\
        --strategy in_order --out tests/fixtures/rnng/reference_in_order.pt

``--reference`` is a checkout of that repository patched to run in float64 on PyTorch 2.x
(tests/fixtures/rnng/README.md lists the patches); this script only imports its modules
(``fixed_stack_models``, ``action_dict``) and contains none of its code.

Six sentences of ``tests/fixtures/syntax/sample.mrg`` (3 to 12 words), read and cleaned as
synlm's sentence-level PTB corpora do (``clean_tree``: no ``-NONE-``, no function tags, the
empty root bracket unwrapped), with synlm's top-down oracle (a preterminal is one SHIFT).
The reference ``FixedStackRNNG`` (top-down, LSTM composition, w = h = 8, two layers) is
built with ``torch.manual_seed(0)``, cast to float64, and every parameter redrawn from
U(-0.5, 0.5) with a seeded generator; the embedding's padding row stays zero, and the
``<pad>`` action and word get a logit bias of -1e30 (zero weights), so the reference's
training softmaxes are over the real actions and words only. In eval mode it records:

- per sentence, teacher-forced in one padded batch: the log-probability of each gold action,
  of each word, and the joint log p(x, y) (the negated ``a_loss``/``w_loss``/``loss``);
  also the gold parse's score as beam search computes it (action softmax renormalised over
  the valid actions, ``gold_beam_score``);
- ``word_sync_beam_search`` with (beam, word beam, shift) = (100, 10, 1), (20, 5, 1) and
  (5, 5, 0): each sentence's surprisals and n-best parses with their scores, once with all
  six sentences in one batch and once with each sentence alone; with the method's default
  ``stack_size_bound=100`` (stack size min(T + 20, 100), T the padded batch's width, so the
  batch's composition can matter) and again with -1, the default of the reference's
  beam_search.py (stack size max(100, T + 10), the same for every batch here).

It asserts on the way that each sentence alone scores as in the batch under teacher forcing,
and that a gold parse found by beam search has ``gold_beam_score`` as its score.

``--strategy in_order`` does the same for the reference's ``FixedStackInOrderRNNG`` (Liu &
Zhang 2017's in-order RNNG, ``max_cons_nts=3`` as its beam_search.py sets it) on synlm's
in-order oracle followed by ``FINISH``, after checking that oracle against the reference's
own (``utils.get_in_order_actions``).

The output is a plain dict that ``torch.load(..., weights_only=True)`` reads; its keys are
described in tests/fixtures/rnng/README.md.
"""

from __future__ import annotations

import argparse
import importlib
import math
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import torch
from torch import Tensor

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from synlm.syntax.actions import oracle  # noqa: E402
from synlm.syntax.readers import read_trees  # noqa: E402
from synlm.syntax.trees import clean_tree, words_and_tags  # noqa: E402

SAMPLE = ROOT / "tests" / "fixtures" / "syntax" / "sample.mrg"
FIXTURES = ROOT / "tests" / "fixtures" / "rnng"
#: Indices of the trees of ``SAMPLE`` used, in this order (8, 3, 12, 11, 3, 12 words).
PICKS = (1, 4, 0, 6, 8, 5)
CONFIG: dict[str, Any] = {
    "w_dim": 8, "h_dim": 8, "num_layers": 2, "dropout": 0.0, "attention_composition": False,
    "max_open_nts": 100, "max_cons_nts": 8, "padding_idx": 0,
}
MODEL_SEED = 0  # torch.manual_seed before the reference builds its modules
INIT_SEED = 1234  # the generator every parameter is redrawn from, in named_parameters order
INIT_BOUND = 0.5
PAD_LOGIT = -1e30
#: (beam_size, word_beam_size, shift_size) of word_sync_beam_search.
BEAMS = ((100, 10, 1), (20, 5, 1), (5, 5, 0))
#: ``stack_size_bound`` of the reference's beam_search.py command line (its default); the
#: method's own default, used for the main results, is 100.
CLI_STACK_BOUND = -1
COMMIT = "f30c0ed"
#: Per strategy: the reference's model class (module, name) and action dictionary, the
#: settings that differ from ``CONFIG``, and the fixture written by default.
STRATEGIES: dict[str, dict[str, Any]] = {
    "top_down": {"model": ("fixed_stack_models", "FixedStackRNNG"),
                 "actions": "TopDownActionDict", "config": {}, "out": "reference.pt"},
    "in_order": {"model": ("fixed_stack_in_order_models", "FixedStackInOrderRNNG"),
                 "actions": "InOrderActionDict", "config": {"max_cons_nts": 3},
                 "out": "reference_in_order.pt"},
}
FINISH = "FINISH"  # the reference's last in-order action


def load_sentences(strategy: str = "top_down",
                   reference_oracle: Any = None) -> list[dict[str, Any]]:
    """Words and oracle actions of the picked trees, cleaned as synlm's PTB corpora clean
    them; in-order actions end with ``FINISH`` and must equal ``reference_oracle``'s."""
    trees = read_trees(SAMPLE)
    out = []
    for i in PICKS:
        tree = clean_tree(trees[i][0])
        assert tree is not None
        words, _ = words_and_tags(tree)
        actions = oracle(tree, strategy)
        if strategy == "in_order":
            actions.append(FINISH)
            assert actions == reference_oracle(str(tree)), (i, actions)
        out.append({"words": words, "actions": actions,
                    "source": f"sample.mrg tree {i}", "tree": str(tree)})
    return out


def import_reference(path: Path, strategy: str = "top_down") -> tuple[type, ModuleType]:
    """The reference's model class for ``strategy`` and its ``action_dict`` module."""
    sys.path.insert(0, str(path.resolve()))
    module, name = STRATEGIES[strategy]["model"]
    return getattr(importlib.import_module(module), name), importlib.import_module("action_dict")


def build_model(model_class: type, dicts: ModuleType, vocab: list[str],
                nonterminals: list[str], strategy: str = "top_down") -> Any:
    """The reference model in float64 with the fixture's weights, in eval mode."""
    torch.manual_seed(MODEL_SEED)
    action_dict = getattr(dicts, STRATEGIES[strategy]["actions"])(nonterminals)
    model = model_class(action_dict, vocab=len(vocab),
                        **{**CONFIG, **STRATEGIES[strategy]["config"]}).double()
    gen = torch.Generator().manual_seed(INIT_SEED)
    with torch.no_grad():
        for p in model.parameters():  # the tied word decoder weight is the embedding
            p.uniform_(-INIT_BOUND, INIT_BOUND, generator=gen)
        model.emb[0].weight[CONFIG["padding_idx"]] = 0.0
        model.action_mlp.weight[model.action_dict.padding_idx] = 0.0
        model.action_mlp.bias[model.action_dict.padding_idx] = PAD_LOGIT
        model.vocab_mlp.bias[CONFIG["padding_idx"]] = PAD_LOGIT
    assert model.vocab_mlp.weight is model.emb[0].weight
    return model.eval()


def pad(rows: list[list[int]]) -> Tensor:
    """Rows of ids right-padded with 0 (the reference's padding for words and actions)."""
    width = max(len(r) for r in rows)
    return torch.tensor([r + [0] * (width - len(r)) for r in rows], dtype=torch.long)


def word_end_mask(x: Tensor, ends: list[list[bool]] | None) -> Tensor:
    """The reference's ``subword_end_mask`` of the padded batch ``x``: ``ends`` (whether
    each piece ends its word) padded with True, or every token a word."""
    if ends is None:
        return torch.ones_like(x, dtype=torch.bool)
    return torch.tensor([e + [True] * (x.size(1) - len(e)) for e in ends])


def teacher_forced(model: Any, words: list[list[int]], actions: list[list[int]],
                   ends: list[list[bool]] | None = None
                   ) -> list[tuple[list[float], list[float], float]]:
    """Per sentence: gold action log-probs, word log-probs and the joint, from one padded
    batch through the reference's ``forward`` (``ends``: ``word_end_mask``; the in-order
    stack reads it)."""
    x = pad(words)
    with torch.no_grad():
        loss, a_loss, w_loss, _ = model(x, pad(actions),
                                        subword_end_mask=word_end_mask(x, ends))
    a_lp, w_lp = (-a_loss).tolist(), (-w_loss).tolist()  # flattened row by row, padding gone
    out, ai, wi = [], 0, 0
    for w, a in zip(words, actions):
        la, lw = a_lp[ai:ai + len(a)], w_lp[wi:wi + len(w)]
        out.append((la, lw, math.fsum(la) + math.fsum(lw)))
        ai, wi = ai + len(a), wi + len(w)
    assert ai == len(a_lp) and wi == len(w_lp)
    assert math.isclose(-loss.item(), math.fsum(o[2] for o in out), rel_tol=1e-12)
    return out


def gold_beam_score(model: Any, words: list[int], actions: list[int]) -> float:
    """The gold parse's score as ``word_sync_beam_search`` accumulates it: at each step
    ``action_log_probs`` under ``invalid_action_mask`` (the softmax renormalised over the
    valid actions, SHIFT adding the word's log-prob with ``<pad>`` masked). The beam has two
    slots because the reference's FixedStack drops the beam dimension at beam size 1; the
    second slot stays inactive."""
    x = torch.tensor([words])
    mask = torch.ones_like(x, dtype=torch.bool)
    lengths = torch.tensor([len(words)])
    beam, _ = model.build_beam_items(x, 2, 0)
    total = 0.0
    with torch.no_grad():
        word_vecs = model.emb(x)
        for a in actions:
            pointer = int(beam.stack.pointer[0, 0])
            next_x = x[:, pointer] if pointer < x.size(1) else None
            invalid = model.invalid_action_mask(beam, lengths, mask)
            total += model.action_log_probs(beam.stack, invalid, next_x)[0, 0, a].item()
            step = torch.tensor([[a, 0]])
            model.rnng(word_vecs, step, beam.stack, mask)
            beam.do_action(step, model.action_dict)
    return total


def beam_search(model: Any, words: list[list[int]], setting: tuple[int, int, int],
                itos: list[str], stack_size_bound: int = 100,
                ends: list[list[bool]] | None = None) -> list[dict[str, Any]]:
    """Surprisals (per token) and n-best parses (action strings, score) of one padded batch
    (``ends``: ``word_end_mask``)."""
    x = pad(words)
    mask = word_end_mask(x, ends)
    with torch.no_grad():
        parses, surprisals = model.word_sync_beam_search(x, mask, *setting,
                                                         stack_size_bound=stack_size_bound)
    return [{"surprisals": [float(s) for s in surp],
             "parses": [[[itos[a] for a in acts], float(score)] for acts, score in nbest]}
            for nbest, surp in zip(parses, surprisals)]


def storage(model: Any, words: list[list[int]], stack_size_bound: int = 100) -> list[int]:
    """``[stack_size, max_actions]`` that ``word_sync_beam_search`` allocates for this batch:
    both bound which actions are valid (``invalid_action_mask``)."""
    beam, _ = model.build_beam_items(pad(words), 2, 0, stack_size_bound=stack_size_bound)
    return [int(beam.stack.stack_size), int(beam.actions.size(2))]


def compare(model: Any, w_ids: list[list[int]], setting: tuple[int, int, int], itos: list[str],
            stack_size_bound: int) -> dict[str, Any]:
    """Beam search on the batch of all sentences and on each sentence alone."""
    batched = beam_search(model, w_ids, setting, itos, stack_size_bound)
    alone = [beam_search(model, [w], setting, itos, stack_size_bound)[0] for w in w_ids]
    return {"batched": batched, "alone": alone, "identical": batched == alone,
            "max_abs_difference": max_difference(batched, alone),
            "storage": {"batched": storage(model, w_ids, stack_size_bound),
                        "alone": [storage(model, [w], stack_size_bound) for w in w_ids]}}


def max_difference(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> float | None:
    """Largest |difference| of surprisals and scores, or None if the parses differ."""
    diff = 0.0
    for ra, rb in zip(a, b, strict=True):
        if [p[0] for p in ra["parses"]] != [p[0] for p in rb["parses"]]:
            return None
        pairs = list(zip(ra["surprisals"], rb["surprisals"], strict=True))
        pairs += [(pa[1], pb[1]) for pa, pb in zip(ra["parses"], rb["parses"])]
        diff = max([diff, *(abs(u - v) for u, v in pairs)])
    return diff


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reference", type=Path, required=True,
                        help="the patched aistairc/rnng-pytorch checkout")
    parser.add_argument("--strategy", choices=sorted(STRATEGIES), default="top_down",
                        help="the reference model: FixedStackRNNG or FixedStackInOrderRNNG")
    parser.add_argument("--out", type=Path,
                        help="default: tests/fixtures/rnng/reference.pt, or "
                             "reference_in_order.pt for --strategy in_order")
    args = parser.parse_args(argv)
    out = args.out or FIXTURES / STRATEGIES[args.strategy]["out"]
    torch.set_num_threads(1)
    model_class, dicts = import_reference(args.reference, args.strategy)

    sentences = load_sentences(args.strategy,
                               getattr(importlib.import_module("utils"),
                                       "get_in_order_actions", None))
    vocab = ["<pad>", *sorted({w for s in sentences for w in s["words"]})]
    nonterminals = sorted({a[3:-1] for s in sentences for a in s["actions"]
                           if a.startswith("NT(")})
    model = build_model(model_class, dicts, vocab, nonterminals, args.strategy)
    itos: list[str] = list(model.action_dict.i2a)
    w_ids = [[vocab.index(w) for w in s["words"]] for s in sentences]
    a_ids = [model.action_dict.to_id(s["actions"]) for s in sentences]

    scored = teacher_forced(model, w_ids, a_ids)
    for k, (w, a) in enumerate(zip(w_ids, a_ids)):  # a sentence alone scores the same
        (alone,) = teacher_forced(model, [w], [a])
        assert max(abs(u - v) for u, v in zip(alone[0] + alone[1],
                                              scored[k][0] + scored[k][1])) < 1e-12
    records = []
    for s, w, a, (la, lw, joint) in zip(sentences, w_ids, a_ids, scored):
        records.append({"words": s["words"], "actions": s["actions"], "source": s["source"],
                        "tree": s["tree"], "action_log_probs": la, "word_log_probs": lw,
                        "joint": joint, "gold_beam_score": gold_beam_score(model, w, a)})
        print(f"{len(w):2d} words {len(a):2d} actions  joint {joint:.6f}  "
              f"gold beam score {records[-1]['gold_beam_score']:.6f}")

    beams: dict[str, dict[str, Any]] = {}
    for setting in BEAMS:
        key = ",".join(map(str, setting))
        beams[key] = compare(model, w_ids, setting, itos, 100)
        beams[key]["cli_stack"] = compare(model, w_ids, setting, itos, CLI_STACK_BOUND)
        for run in (beams[key], beams[key]["cli_stack"]):
            for rec, res in zip(records, run["batched"] + run["alone"]):
                for acts, score in res["parses"]:  # a gold parse in the n-best: same score
                    if acts == rec["actions"]:
                        assert abs(score - rec["gold_beam_score"]) < 1e-9, (score, rec)
        found = sum(any(p[0] == r["actions"] for p in res["parses"])
                    for r, res in zip(records, beams[key]["batched"]))
        print(f"beam {key}: batched == alone: {beams[key]['identical']} "
              f"(max |diff| {beams[key]['max_abs_difference']}); with beam_search.py's "
              f"stack bound: {beams[key]['cli_stack']['identical']} "
              f"(max |diff| {beams[key]['cli_stack']['max_abs_difference']}); "
              f"gold in the n-best of {found}/6")

    state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    assert all(v.dtype == torch.float64 for v in state.values())
    fixture = {"state_dict": state, "words": vocab, "nonterminals": nonterminals,
               "actions_itos": itos, "config": {**CONFIG, **STRATEGIES[args.strategy]["config"],
                                                "vocab": len(vocab),
                                                "model_seed": MODEL_SEED,
                                                "init_seed": INIT_SEED,
                                                "init_bound": INIT_BOUND,
                                                "pad_logit": PAD_LOGIT,
                                                "strategy": args.strategy,
                                                "stack_size_bound": 100,
                                                "subword_end_mask": "all ones",
                                                "reference_commit": COMMIT},
               "sentences": records, "beams": beams}
    out.parent.mkdir(parents=True, exist_ok=True)
    torch.save(fixture, out)
    print(f"wrote {out} ({out.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
