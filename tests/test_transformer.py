"""The Transformer backbone: its layers against PyTorch's own, explicit vs fused attention,
positions, padding invariance, cached decoding, overfitting."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from conftest import fit_batch
from synlm.backbones import Transformer
from synlm.backbones.transformer import sinusoidal_positions
from synlm.data.datamodule import SynLMDataModule
from synlm.data.synthetic import SyntheticTreebank
from synlm.lm import SyntaxLM
from synlm.outputs import Batch

E, H, F = 16, 4, 32


def tiny(**kw) -> Transformer:
    torch.manual_seed(0)
    return Transformer(**{"input_size": E, "num_layers": 3, "num_heads": H, "ffn_size": F,
                          "dropout": 0.0, **kw}).double().eval()


def inputs(B: int = 2, T: int = 7, seed: int = 1) -> torch.Tensor:
    return torch.randn(B, T, E, generator=torch.Generator().manual_seed(seed)).double()


def test_sinusoids_are_fairseqs() -> None:
    """Position p, channel i < E/2: sin(p·10000^(−i/(E/2−1))); channel E/2 + i: the cos."""
    table = sinusoidal_positions(torch.arange(5), 8)
    assert torch.equal(table[0], torch.tensor([0.0] * 4 + [1.0] * 4))
    for p, i in [(1, 0), (3, 1), (4, 3)]:
        w = 10000 ** (-i / 3)
        assert table[p, i].item() == pytest.approx(math.sin(p * w), abs=1e-6)
        assert table[p, 4 + i].item() == pytest.approx(math.cos(p * w), abs=1e-6)


@pytest.mark.parametrize("pre_norm", [False, True])
def test_layers_equal_pytorchs_transformer_layer(pre_norm: bool) -> None:
    """Each layer is a causal ``nn.TransformerEncoderLayer`` (post-norm, or ``norm_first``)
    with the same weights; the input is the √E-scaled embedding plus the sinusoids."""
    model = tiny(pre_norm=pre_norm, attention_layer=None)
    x = inputs()
    T = x.size(1)
    h = x * math.sqrt(E) + sinusoidal_positions(torch.arange(T), E).double()
    causal = nn.Transformer.generate_square_subsequent_mask(T, dtype=torch.double)
    for ours in model.layers:
        ref = nn.TransformerEncoderLayer(E, H, F, dropout=0.0, batch_first=True,
                                         norm_first=pre_norm).double().eval()
        with torch.no_grad():
            ref.self_attn.in_proj_weight.copy_(ours.attn.qkv.weight)
            ref.self_attn.in_proj_bias.copy_(ours.attn.qkv.bias)
            ref.self_attn.out_proj.load_state_dict(ours.attn.proj.state_dict())
            ref.linear1.load_state_dict(ours.fc1.state_dict())
            ref.linear2.load_state_dict(ours.fc2.state_dict())
            ref.norm1.load_state_dict(ours.attn_norm.state_dict())
            ref.norm2.load_state_dict(ours.ffn_norm.state_dict())
        h = ref(h, src_mask=causal, is_causal=True)
    if pre_norm:
        h = model.final_norm(h)
    torch.testing.assert_close(model(x).hidden, h)


def test_explicit_attention_is_softmax_qk_of_its_layer() -> None:
    """``attention`` = mean over heads of softmax(QKᵀ/√d + causal mask) of the penultimate
    layer, from that layer's own input and q, k weights."""
    model = tiny()
    layer = model.layers[-2]
    seen = {}
    layer.register_forward_pre_hook(lambda m, args: seen.update(x=args[0]))
    x = inputs()
    out = model(x)
    B, T, _ = x.shape
    q, k, _ = layer.attn.qkv(seen["x"]).split(E, dim=2)
    q, k = (t.view(B, T, H, E // H).transpose(1, 2) for t in (q, k))
    scores = q @ k.transpose(-2, -1) / math.sqrt(E // H)
    scores = scores.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
    torch.testing.assert_close(out.attention, scores.softmax(-1).mean(1))
    assert out.attention.shape == (B, T, T)
    torch.testing.assert_close(out.attention.sum(-1), torch.ones(B, T, dtype=torch.double))


def test_fused_layers_agree_with_explicit_attention() -> None:
    """The same weights give the same outputs whichever layers use the fused kernel."""
    fused = tiny(attention_layer=None)
    explicit = tiny(attention_layer=None)
    for layer in explicit.layers:
        layer.attn.explicit = True
    x = inputs()
    torch.testing.assert_close(fused(x).hidden, explicit(x).hidden)
    # with a cache, queries are the last positions: the fused path's bottom-right mask
    first = fused(x[:, :3])
    rest_fused = fused(x[:, 3:], first.state).hidden
    rest_explicit = explicit(x[:, 3:], explicit(x[:, :3]).state).hidden
    torch.testing.assert_close(rest_fused, rest_explicit)


def test_fairseq_initialisation() -> None:
    """Xavier-uniform weights (the fused q|k|v at fairseq's per-matrix bound √(6/(4E))),
    zero biases, unit LayerNorms."""
    model = Transformer(input_size=64, num_layers=2, num_heads=4, ffn_size=128)
    attn = model.layers[0].attn
    assert attn.qkv.weight.abs().max() <= math.sqrt(6 / (4 * 64))
    assert attn.qkv.weight.abs().max() > 0.9 * math.sqrt(6 / (4 * 64))
    assert torch.count_nonzero(attn.qkv.bias) == 0
    assert torch.equal(model.layers[0].attn_norm.weight, torch.ones(64))


def tiny_lm(vocab_size: int, **kw) -> SyntaxLM:
    return SyntaxLM(tiny(**kw), vocab_size=vocab_size, decoder_bias=False, init_std=E ** -0.5,
                    scale_lr_by_window=False).double()


def test_padding_never_changes_a_sentences_log_probs() -> None:
    """Sentence mode pads on the right; a sentence scores the same alone and in a batch."""
    dm = SynLMDataModule(SyntheticTreebank(n_train=20, n_valid=4, n_test=4), mode="sentence",
                         batch_size=8)
    batch = next(iter(dm.train_dataloader()))
    model = tiny_lm(dm.vocab_size).eval()
    together = model(batch).target_log_probs
    assert batch.lengths.min() < batch.lengths.max()  # some rows are padded
    for row, n in enumerate(batch.lengths.tolist()):
        alone = Batch(tokens=batch.tokens[row : row + 1, :n],
                      targets=batch.targets[row : row + 1, :n],
                      mask=batch.mask[row : row + 1, :n])
        torch.testing.assert_close(model(alone).target_log_probs[0], together[row, :n])


def test_cached_decoding_equals_the_full_forward_step_by_step() -> None:
    model = tiny_lm(30).eval()
    tokens = torch.randint(0, 30, (2, 9), generator=torch.Generator().manual_seed(0))
    full = model.log_probs(tokens)
    state, steps = None, []
    for t in range(tokens.size(1)):
        result = model.model.evaluate(tokens[:, t : t + 1], state, log_probs_needed=True)
        state = result.state
        steps.append(result.logits.float().log_softmax(-1))
    torch.testing.assert_close(torch.cat(steps, 1), full)
    # a state is a value: using it twice gives the same continuation
    again = model.log_probs(tokens[:, -1:], model.model.evaluate(tokens[:, :-1]).state)
    torch.testing.assert_close(again, full[:, -1:])


def test_tiny_transformer_overfits_tiny_corpus() -> None:
    torch.manual_seed(0)
    dm = SynLMDataModule(SyntheticTreebank(n_train=8, n_valid=2, n_test=2, seed=3),
                         mode="sentence", batch_size=8)
    (batch,) = list(dm.train_dataloader())
    model = SyntaxLM(Transformer(input_size=32, num_layers=2, num_heads=4, ffn_size=64,
                                 dropout=0.0), vocab_size=dm.vocab_size, decoder_bias=False,
                     init_std=32 ** -0.5)
    # from about the vocabulary size to almost deterministic
    assert fit_batch(model, batch, lr=3e-3, steps=150) < 1.2


def test_bad_arguments_are_one_line() -> None:
    with pytest.raises(ValueError, match="attention_layer 6 is not one of the 6 layers"):
        Transformer(attention_layer=6)
    with pytest.raises(ValueError, match="width 20 is not divisible by 8 heads"):
        Transformer(input_size=20)
