"""The GPT-2 backbone against transformers' own GPT-2: logits, attention, cached decoding,
padding, limits, the pretrained embedding and checkpoints."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import torch
from transformers import Cache, GPT2Config, GPT2LMHeadModel, GPT2Model

from synlm.backbones.gpt2 import GPT2
from synlm.lm import SyntaxLM
from synlm.outputs import Batch

V, E, LAYERS, HEADS, POSITIONS = 30, 16, 3, 2, 32
SIZES = dict(n_layer=LAYERS, n_head=HEADS, n_embd=E, n_positions=POSITIONS)


def _config() -> GPT2Config:
    # a wide init so that attention and next-token distributions are far from uniform
    return GPT2Config(vocab_size=V, initializer_range=0.3, bos_token_id=None,
                      eos_token_id=None, **SIZES)


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random GPT2LMHeadModel written by ``save_pretrained``."""
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("gpt2")
    GPT2LMHeadModel(_config()).save_pretrained(path)
    return path


def _tokens(b: int = 2, t: int = 9, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, V, (b, t), generator=torch.Generator().manual_seed(seed))


def _embeddings(b: int = 2, t: int = 9, seed: int = 0) -> torch.Tensor:
    return torch.randn(b, t, E, generator=torch.Generator().manual_seed(seed)).double()


def _lm(backbone: GPT2) -> SyntaxLM:
    return SyntaxLM(backbone, vocab_size=V, decoder_bias=False, init_std=0.02)


def test_logits_equal_transformers_lm_head_model(saved: Path) -> None:
    model = _lm(GPT2(pretrained=str(saved))).double().eval()
    reference = GPT2LMHeadModel.from_pretrained(saved).double().eval()
    tokens = _tokens()
    expected = reference(tokens).logits.log_softmax(-1).float()  # (B, T, V)
    torch.testing.assert_close(model.log_probs(tokens), expected, atol=1e-5, rtol=0)


@pytest.mark.parametrize("layer", [-2, 0, -1])
def test_attention_equals_eager_attention_averaged_over_heads(saved: Path, layer: int) -> None:
    backbone = GPT2(pretrained=str(saved), attention_layer=layer).double().eval()
    eager = GPT2Model.from_pretrained(saved, attn_implementation="eager").double().eval()
    tokens = _tokens()
    attention = backbone(eager.wte(tokens)).attention  # (B, T, T)
    expected = eager(tokens, output_attentions=True).attentions[layer].mean(1)
    torch.testing.assert_close(attention, expected)
    torch.testing.assert_close(attention.sum(-1), torch.ones(tokens.shape).double())
    assert not attention.triu(1).any()


def test_a_saved_gpt2_model_loads_too(tmp_path: Path) -> None:
    torch.manual_seed(1)
    reference = GPT2Model(_config()).double().eval()
    reference.save_pretrained(tmp_path)
    backbone = GPT2(pretrained=str(tmp_path)).double().eval()
    x = _embeddings()
    out, expected = backbone(x), reference(inputs_embeds=x, output_hidden_states=True)
    torch.testing.assert_close(out.hidden, expected.last_hidden_state)
    # each block's output, bottom to top, the top one after the final LayerNorm
    assert len(out.layers) == LAYERS and out.layers[-1] is out.hidden
    for got, want in zip(out.layers, expected.hidden_states[1:]):
        torch.testing.assert_close(got, want)
    torch.testing.assert_close(backbone.pretrained_embedding(), reference.wte.weight.float())


def test_cached_decoding_equals_the_full_pass_and_states_are_reusable(saved: Path) -> None:
    # float32: transformers 4.45 cannot build the mask of a chunk after a cache in float64
    backbone = GPT2(pretrained=str(saved)).eval()
    x = _embeddings().float()
    full = backbone(x)
    state = None
    for t in range(x.size(1)):
        step = backbone(x[:, t : t + 1], state)
        torch.testing.assert_close(step.hidden[:, 0], full.hidden[:, t])
        for got, want in zip(step.layers, full.layers):
            torch.testing.assert_close(got[:, 0], want[:, t])
        torch.testing.assert_close(step.attention[:, 0], full.attention[:, t, : t + 1])
        state = step.state
    first = backbone(x[:, :4])  # a chunk of several positions after a cache
    again, rest = backbone(x[:, 4:], first.state), backbone(x[:, 4:], first.state)
    torch.testing.assert_close(again.hidden, full.hidden[:, 4:])
    torch.testing.assert_close(again.attention, full.attention[:, 4:])
    torch.testing.assert_close(rest.hidden, again.hidden)
    assert first.state.keys[0].size(2) == 4 and rest.state.keys[0].size(2) == x.size(1)
    plain = tuple(tuple(kv) for kv in first.state)  # as SyntaxLM saves it in checkpoints
    torch.testing.assert_close(backbone(x[:, 4:], plain).hidden, again.hidden)


def test_incremental_steps_continue_one_cache_object_without_deprecations(saved: Path) -> None:
    """Each step continues the cache object the previous one returned (transformers'
    ``DynamicCache``, updated in place), passed by the keyword the installed
    ``GPT2Model.forward`` takes (no FutureWarning); a state used twice is continued from
    a cache rebuilt from its tensors, and still gives the same continuation."""
    backbone = GPT2(pretrained=str(saved)).eval()
    x = _embeddings().float()
    full = backbone(x)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        first = backbone(x[:, :3])
        second = backbone(x[:, 3:4], first.state)
        third = backbone(x[:, 4:5], second.state)
        again = backbone(x[:, 3:4], first.state)  # the cache first carries has moved on
        on = backbone(x[:, 4:5], second.state)
    # a Cache object from transformers 4.52 on (from 4.57 on also after a first step
    # without one); legacy tuples, rebuilt at every step, before
    carried = second.state.cache
    if isinstance(first.state.cache, Cache):
        assert carried is first.state.cache
    if isinstance(carried, Cache):
        assert third.state.cache is carried
        assert again.state.cache is not carried and on.state.cache is not carried
    for step, t in ((second, 3), (third, 4), (again, 3), (on, 4)):
        torch.testing.assert_close(step.hidden[:, 0], full.hidden[:, t])
    assert again.state.length == 4 and third.state.length == on.state.length == 5


def test_right_padding_leaves_each_sentence_unchanged(saved: Path) -> None:
    backbone = GPT2(pretrained=str(saved)).double().eval()
    long, short = _embeddings(1, 7, seed=1), _embeddings(1, 4, seed=2)
    padding = _embeddings(1, 3, seed=3)
    batch = backbone(torch.cat([long, torch.cat([short, padding], 1)]))
    torch.testing.assert_close(batch.hidden[:1], backbone(long).hidden)
    alone = backbone(short)
    torch.testing.assert_close(batch.hidden[1:, :4], alone.hidden)
    torch.testing.assert_close(batch.attention[1:, :4, :4], alone.attention)


def test_too_long_an_input_is_a_one_line_error() -> None:
    backbone = GPT2(**SIZES).eval()
    with pytest.raises(ValueError, match=f"^GPT2 got {POSITIONS + 1} positions.*"
                                         f"n_positions={POSITIONS}$"):
        backbone(torch.randn(1, POSITIONS + 1, E))
    state = backbone(torch.randn(1, POSITIONS - 2, E)).state
    with pytest.raises(ValueError, match=rf"{POSITIONS + 1} positions \({POSITIONS - 2} cached"):
        backbone(torch.randn(1, 3, E), state)


def test_a_pretrained_embedding_of_another_vocabulary_is_refused(saved: Path) -> None:
    with pytest.raises(ValueError, match=rf"comes with a \({V}, {E}\) token embedding"):
        SyntaxLM(GPT2(pretrained=str(saved)), vocab_size=V + 1, decoder_bias=False)


@pytest.mark.parametrize("pretrained", [True, False])
def test_every_parameter_gets_a_gradient_and_wte_is_syntaxlm_s(saved: Path,
                                                               pretrained: bool) -> None:
    torch.manual_seed(0)
    backbone = GPT2(pretrained=str(saved)) if pretrained else GPT2(**SIZES)
    assert (backbone.pretrained_embedding() is not None) == pretrained
    model = _lm(backbone).double().train()
    tokens = _tokens(t=10)
    batch = Batch(tokens=tokens[:, :-1], targets=tokens[:, 1:],
                  mask=torch.ones(2, 9, dtype=torch.bool))
    model(batch).target_log_probs.sum().neg().backward()
    missing = [n for n, p in backbone.named_parameters()
               if p.grad is None or not p.grad.abs().sum() > 0]
    assert not missing, f"no gradient reaches {missing}"
    embeddings = [n for n, p in model.model.named_parameters() if p.dim() == 2 and p.size(0) == V]
    assert embeddings == ["embedding.weight"]
    assert not [n for n, _ in model.named_parameters() if "wte" in n]
    assert not [n for n in model.state_dict() if "wte" in n]


def test_a_saved_model_loads_into_a_freshly_built_one(saved: Path) -> None:
    model = _lm(GPT2(pretrained=str(saved))).eval()
    fresh = _lm(GPT2(**SIZES)).eval()
    tokens = _tokens()
    assert not torch.allclose(fresh.log_probs(tokens), model.log_probs(tokens))
    fresh.load_state_dict(model.state_dict())
    torch.testing.assert_close(fresh.log_probs(tokens), model.log_probs(tokens))


def test_a_loaded_model_trains_with_dropout(saved: Path) -> None:
    """from_pretrained returns an eval-mode model; the backbone starts in training mode like
    any module, so its dropout is on in training and off in evaluation."""
    backbone = GPT2(pretrained=str(saved), dropout=0.5)
    assert all(m.training for m in backbone.modules())
    x = _embeddings()
    assert not torch.equal(backbone(x.float()).hidden, backbone(x.float()).hidden)
    backbone.eval()
    torch.testing.assert_close(backbone(x.float()).hidden, backbone(x.float()).hidden)
