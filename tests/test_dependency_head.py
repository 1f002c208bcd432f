"""DMLM's dependency-mixture head: the dependency loss against a dense indicator, the exact
log-space mixture, causality, the two phases and the partial load between them."""

from __future__ import annotations

import math
from pathlib import Path

import lightning.pytorch as pl
import pytest
import torch

from synlm.backbones import AWDLSTM, Transformer
from synlm.data.datamodule import HELD_OUT, SynLMDataModule
from synlm.data.synthetic import SyntheticTreebank
from synlm.heads import DependencyMixtureHead
from synlm.lm import SyntaxLM
from synlm.outputs import Batch
from synlm.runtime import runs
from synlm.runtime.run_folders import CheckpointError

V = 23


def lstm(**kw) -> AWDLSTM:
    torch.manual_seed(0)  # the weights do not depend on what ran before
    return AWDLSTM(16, 24, 2, dropout_input=0.0, dropout_hidden=0.0, dropout_output=0.0,
                   weight_drop=0.0, **kw)


def transformer() -> Transformer:
    torch.manual_seed(0)
    return Transformer(16, 2, 2, 32, dropout=0.0, attention_layer=0)


def mixture_lm(backbone, **head) -> SyntaxLM:
    torch.manual_seed(0)
    return SyntaxLM(backbone, heads=[DependencyMixtureHead("mixture", **head)],
                    vocab_size=V).double().eval()


def tokens(B: int = 2, T: int = 9, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, V, (B, T), generator=torch.Generator().manual_seed(seed))


def batch_of(x: torch.Tensor) -> Batch:
    return Batch(tokens=x[:, :-1], targets=x[:, 1:], mask=torch.ones_like(x[:, 1:]).bool())


@pytest.mark.parametrize("backbone", [lstm, transformer], ids=["query_key", "backbone"])
def test_the_mixture_is_a_distribution_and_its_nll_is_exact(backbone) -> None:
    """log p(x_{t+1}) from the log-space gather equals the log of Σ_j a_tj p_dep,j(x_{t+1})
    written out, and the full mixture sums to one over the vocabulary (float64)."""
    model = mixture_lm(backbone())
    batch = batch_of(tokens())
    result = model(batch, log_probs_needed=True)
    head = model.heads[0]
    a = head.log_attention(result.backbone)[0].exp()  # (B, T, T)
    p_dep = result.logits.softmax(-1)  # (B, T, V)
    B, T = batch.targets.shape
    for b in range(B):
        for t in range(T):
            explicit = sum(a[b, t, j] * p_dep[b, j, batch.targets[b, t]] for j in range(t + 1))
            assert result.target_log_probs[b, t].item() == pytest.approx(
                explicit.log().item(), rel=1e-9)
    full = result.heads["dm"].log_probs
    torch.testing.assert_close(full.exp().sum(-1), torch.ones(B, T, dtype=torch.double))
    torch.testing.assert_close(full.gather(2, batch.targets[..., None])[..., 0],
                               result.target_log_probs)


@pytest.mark.parametrize("backbone", [lstm, transformer], ids=["query_key", "backbone"])
def test_step_by_step_with_its_own_state_equals_the_whole_sequence(backbone) -> None:
    """Generation: the head keeps the past positions' p_dep (and keys) as its state, so
    feeding one token at a time gives the whole sequence's distributions, also past the
    query/key window (context 3 < 9 tokens)."""
    model = mixture_lm(backbone(), context=3)
    x = tokens(T=9)
    full, _ = model.step(x)
    log_probs, state = model.step(x[:, :4])
    steps = [log_probs]
    for t in range(4, x.size(1)):
        log_probs, state = model.step(x[:, t:t + 1], state)
        steps.append(log_probs)
    torch.testing.assert_close(torch.cat(steps, dim=1), full)
    kept = state.heads["dm"].log_p.size(1)
    assert kept == (2 if backbone is lstm else 9)  # context − 1; every past position


def test_logit_sampling_is_the_softmax_of_the_attention_mixed_logits() -> None:
    """``sampling: logits`` (the released DM-LSTM sampler): softmax(Σ_j a_tj z_j) with z the
    decoder's logits; the training NLL stays the mixture's."""
    mixture = mixture_lm(lstm())
    with torch.no_grad():
        mixture.embedding.weight.mul_(30)  # peaked p_dep, far from uniform
    logits = mixture_lm(lstm(), sampling="logits")
    logits.load_state_dict(mixture.state_dict())
    x = tokens()
    batch = batch_of(x)
    out = logits(batch, log_probs_needed=True)
    a = logits.heads[0].log_attention(out.backbone)[0].exp()  # (B, T, T)
    expected = torch.bmm(a, out.logits).log_softmax(-1)
    torch.testing.assert_close(out.heads["dm"].log_probs, expected)
    torch.testing.assert_close(out.target_log_probs, mixture(batch).target_log_probs)
    gap = out.heads["dm"].log_probs - mixture(batch, log_probs_needed=True).heads["dm"].log_probs
    assert gap.abs().max() > 0.1  # a different distribution from the mixture
    with pytest.raises(ValueError, match="sampling must be 'mixture', 'logits' or 'released'"):
        DependencyMixtureHead("mixture", sampling="product")


def test_query_key_attention_sees_only_its_window() -> None:
    head = mixture_lm(lstm(), context=3).heads[0]
    out = mixture_lm(lstm(), context=3).backbone(torch.randn(1, 8, 16).double())
    a = head.log_attention(out)[0].exp()[0]
    for t in range(8):
        assert torch.count_nonzero(a[t]) == min(t + 1, 3)
        assert a[t, max(0, t - 2) : t + 1].sum().item() == pytest.approx(1.0)


@pytest.mark.parametrize("backbone", [lstm, transformer], ids=["query_key", "backbone"])
def test_the_mixture_is_causal(backbone) -> None:
    model = mixture_lm(backbone())
    x = tokens(T=10)
    y = x.clone()
    y[:, 6:] = (y[:, 6:] + 1) % V
    a, b = model(batch_of(x)).target_log_probs, model(batch_of(y)).target_log_probs
    # position t predicts x_{t+1}: rows < 5 read inputs and targets before the change
    torch.testing.assert_close(a[:, :5], b[:, :5])
    assert not torch.allclose(a[:, 5:], b[:, 5:])


@pytest.mark.parametrize("target_sets", ["types", "arcs"])
def test_dependency_loss_equals_the_dense_indicator_sum(target_sets: str) -> None:
    """Phase 1 from sparse targets equals −Σ_t Σ_w c_t(w) log p_dep(w) / N with a dense
    (B, T, V) indicator, N the inputs of sentences with heads: c_t(w) is 1[w ∈ D_t] for
    ``types`` (the released 0/1 indicator), the number of arcs for ``arcs``."""
    dm = SynLMDataModule(SyntheticTreebank(n_train=30, n_valid=5, n_test=5), mode="sentence",
                         batch_size=6)
    dm.request(frozenset({"dep_targets"}), who="test")
    batch = next(iter(dm.train_dataloader()))
    torch.manual_seed(0)
    model = SyntaxLM(lstm(), heads=[DependencyMixtureHead("dependency", target_sets=target_sets)],
                     vocab_size=dm.vocab_size).double()
    result = model(batch)
    log_p = result.logits.log_softmax(-1)
    dense = torch.zeros_like(log_p)
    for b, t, d in batch.dep_mask.nonzero().tolist():
        w = batch.dep_targets[b, t, d]
        dense[b, t, w] = 1.0 if target_sets == "types" else dense[b, t, w] + 1.0
    expected = -(dense * log_p).sum() / batch.dep_rows.sum()
    torch.testing.assert_close(result.heads["dm"].loss, expected)
    assert batch.dep_rows.sum() > batch.dep_mask.any(-1).sum()  # empty sets count in N


def test_a_type_linked_twice_counts_once_by_default_and_twice_per_arc() -> None:
    """D_0 = {3, 3, 1} (a type linked by two arcs; a masked entry with id 1 before it), D_1 =
    {2}: the released sets count word 3 once, the arcs twice; N = 2 inputs."""
    log_p = torch.randn(1, 2, 5, dtype=torch.double,
                        generator=torch.Generator().manual_seed(0)).log_softmax(-1)
    tokens = torch.zeros(1, 2, dtype=torch.long)
    batch = Batch(tokens=tokens, targets=tokens, mask=torch.ones(1, 2, dtype=torch.bool),
                  dep_targets=torch.tensor([[[1, 3, 3, 1], [2, 0, 0, 0]]]),
                  dep_mask=torch.tensor([[[False, True, True, True],
                                          [True, False, False, False]]]),
                  dep_rows=torch.ones(1, 2, dtype=torch.bool))
    lp = log_p[0]
    types = DependencyMixtureHead.dependency_loss(log_p, batch)
    arcs = DependencyMixtureHead.dependency_loss(log_p, batch, "arcs")
    torch.testing.assert_close(types, -(lp[0, 3] + lp[0, 1] + lp[1, 2]) / 2)
    torch.testing.assert_close(arcs, -(2 * lp[0, 3] + lp[0, 1] + lp[1, 2]) / 2)


def test_phase_one_trains_on_the_dependency_loss_alone(tmp_path: Path) -> None:
    """lm_weight 0: the loss is the head's; the dependency loss falls."""
    dm = SynLMDataModule(SyntheticTreebank(n_train=120, n_valid=10, n_test=10),
                         batch_size=8, bptt=20)
    model = SyntaxLM(lstm(), heads=[DependencyMixtureHead("dependency")],
                     vocab_size=dm.vocab_size, lm_weight=0.0, bptt=20,
                     optimizer={"class_path": "torch.optim.Adam", "init_args": {"lr": 1e-2}})
    trainer = pl.Trainer(max_steps=30, logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False,
                         limit_val_batches=0, log_every_n_steps=1)
    losses = []

    class Record(pl.Callback):
        def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx) -> None:
            losses.append(float(outputs["loss"]))
            assert float(outputs["loss"]) == pytest.approx(
                float(trainer.callback_metrics["train/dm_loss_step"]), rel=1e-6)

    trainer.callbacks.append(Record())
    trainer.fit(model, dm)
    assert sum(losses[-5:]) / 5 < 0.8 * sum(losses[:5]) / 5


class SentencesSeen(pl.Callback):
    """The sentences (``Sentence.source``) of every training and validation batch, and the
    ``val/dm_loss`` of each validation after the sanity check."""

    def __init__(self) -> None:
        self.seen: dict[str, set[str]] = {"train": set(), "valid": set()}
        self.dm_losses: list[float] = []

    def _record(self, trainer: pl.Trainer, batch: Batch, stage: str, split: str) -> None:
        sentences = trainer.datamodule.sentences(split)
        ids = batch.sentence_ids[batch.mask].unique().tolist()
        self.seen[stage] |= {sentences[i].source for i in ids if i < len(sentences)}

    def on_train_batch_start(self, trainer, module, batch, batch_idx) -> None:
        self._record(trainer, batch, "train", "train")

    def on_validation_batch_start(self, trainer, module, batch, batch_idx,
                                  dataloader_idx=0) -> None:
        self._record(trainer, batch, "valid", HELD_OUT)

    def on_validation_end(self, trainer, module) -> None:
        if not trainer.sanity_checking:
            self.dm_losses.append(float(trainer.callback_metrics["val/dm_loss"]))


def test_phase_one_validates_and_checkpoints_by_its_loss_on_held_out_sentences(
        tmp_path: Path) -> None:
    """``dm_lstm_dep.yaml`` on the synthetic treebank: validation serves the training
    sentences ``data.dependency_holdout`` held out (5% of those with heads), which no
    training batch holds, and logs the dependency loss on them, ``val/dm_loss``; NT-ASGD and
    a checkpoint watch it, the checkpoint keeping the best of the validations."""
    from lightning.pytorch.callbacks import ModelCheckpoint

    from conftest import TINY_OVERRIDES
    from synlm.callbacks.nt_asgd import NTASGD
    from synlm.catalog import REPO_CONFIGS
    from synlm.lightning_cli import SynLMCLI
    from synlm.runtime.run_callbacks import RunCheckpoint

    cli = SynLMCLI(args=["--config", str(REPO_CONFIGS / "dm_lstm_dep.yaml"), *TINY_OVERRIDES,
                         "--model.backbone.init_args.input_size=16",
                         "--model.backbone.init_args.hidden_size=24",
                         "--trainer.max_epochs=2", "--trainer.limit_train_batches=3",
                         f"--trainer.default_root_dir={tmp_path}"], run=False)
    seen = SentencesSeen()
    cli.trainer.callbacks.append(seen)
    cli.trainer.fit(cli.model, datamodule=cli.datamodule)
    dm = cli.datamodule
    held = {s.source for s in dm.sentences(HELD_OUT)}
    with_heads = [s for s in dm.corpus_sentences("train") if s.heads is not None]
    assert len(held) == round(0.05 * len(with_heads)) == 15
    assert {s.source for s in dm.sentences("train")} == \
        {s.source for s in dm.corpus_sentences("train")} - held
    assert seen.seen["train"] and not seen.seen["train"] & held
    assert seen.seen["valid"] == held  # each validation, all of them
    assert len(seen.dm_losses) == 2 and all(math.isfinite(x) for x in seen.dm_losses)
    (nt_asgd,) = [c for c in cli.trainer.callbacks if isinstance(c, NTASGD)]
    (best,) = [c for c in cli.trainer.callbacks
               if isinstance(c, ModelCheckpoint) and not isinstance(c, RunCheckpoint)]
    assert nt_asgd.monitor == best.monitor == "val/dm_loss" and best.mode == "min"
    assert float(best.best_model_score) == min(seen.dm_losses)
    assert Path(best.best_model_path).name.startswith("dm_loss-epoch")
    # written after the validation it carries (what a run's summary and best read)
    saved = runs.validation(runs.read_checkpoint(best.best_model_path))
    assert saved["val/dm_loss"] == float(best.best_model_score)


def test_the_held_out_sentences_are_drawn_by_the_seed_among_those_with_heads(
        tmp_path: Path) -> None:
    """The same seed holds out the same sentences, another seed others, in sentence mode as
    in stream mode; only sentences with dependency gold are held out (here a corpus whose
    first sentences have none); a corpus without dependency gold, or a fraction outside
    [0, 1), is refused in one line."""
    from synlm.data.corpora import TextFiles
    from synlm.errors import InputError, SettingError
    from synlm.syntax import Sentence

    class PartlyHeaded(SyntheticTreebank):
        """The synthetic treebank with the heads and trees of its first 50 training
        sentences removed."""

        def sentences(self, split: str) -> list[Sentence]:
            out = super().sentences(split)
            if split == "train":
                out[:50] = [Sentence(s.words, source=s.source) for s in out[:50]]
            return out

    def held(seed: int, mode: str = "stream") -> list[str | None]:
        dm = SynLMDataModule(PartlyHeaded(n_train=250, n_valid=10, n_test=10), mode=mode,
                             seed=seed, dependency_holdout=0.1, cache_dir=str(tmp_path))
        return [s.source for s in dm.sentences(HELD_OUT)]

    first = held(1)
    assert len(first) == 20 and held(1, "sentence") == first and held(2) != first
    assert all(int(source.rsplit(":", 1)[1]) > 50 for source in first)
    files = {}
    for split in ("train", "valid", "test"):
        files[split] = str(tmp_path / f"{split}.txt")
        Path(files[split]).write_text("a b\n")
    with pytest.raises(InputError, match="dependency_holdout .* but TextFiles has none"):
        SynLMDataModule(TextFiles(files), dependency_holdout=0.05)
    with pytest.raises(SettingError, match=r"dependency_holdout=1.0: expected a probability"):
        SynLMDataModule(dependency_holdout=1.0)


def test_phase_two_starts_from_phase_one_with_fresh_query_and_key(tmp_path: Path) -> None:
    torch.manual_seed(0)
    phase1 = SyntaxLM(lstm(), heads=[DependencyMixtureHead("dependency")], vocab_size=V)
    path = tmp_path / "phase1.ckpt"
    torch.save({"state_dict": phase1.state_dict()}, path)
    torch.manual_seed(1)
    phase2 = SyntaxLM(lstm(), heads=[DependencyMixtureHead("mixture")], vocab_size=V,
                      init_from=str(path), frozen=[r"^decoder\.", r"^embedding\."])
    fresh_query = phase2.heads[0].query.weight.clone()
    phase2._load_weights(str(path))
    for name, tensor in phase1.state_dict().items():
        torch.testing.assert_close(phase2.state_dict()[name], tensor)
    torch.testing.assert_close(phase2.heads[0].query.weight, fresh_query)
    assert not phase2.embedding.weight.requires_grad  # frozen dependency decoder
    assert phase2.heads[0].query.weight.requires_grad
    other = tmp_path / "other.ckpt"
    torch.save({"state_dict": phase1.state_dict(), "synlm": {"vocab": ["<eos>", "<unk>"]}},
               other)
    from synlm.data.vocab import Vocab

    phase2.vocab = Vocab(["<eos>", "<unk>", "a"])
    with pytest.raises(ValueError, match="was trained on another vocabulary than this run's"):
        phase2._load_weights(str(other))
    with pytest.raises(CheckpointError, match="model.init_from: no checkpoint at"):
        phase2._load_weights(str(tmp_path / "missing.ckpt"))
    with pytest.raises(ValueError, match="model.frozen=nothing: expected a regular expression"):
        SyntaxLM(lstm(), vocab_size=V, frozen=["nothing"])


def test_bad_phase_is_one_line() -> None:
    with pytest.raises(ValueError, match="phase must be 'dependency' or 'mixture'"):
        DependencyMixtureHead("both")
    with pytest.raises(ValueError, match="target_sets must be 'types' or 'arcs', not 'type'"):
        DependencyMixtureHead(target_sets="type")


def test_mixed_precision_keeps_the_mixture_in_float32() -> None:
    model = SyntaxLM(transformer(), heads=[DependencyMixtureHead("mixture")], vocab_size=V)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        result = model(batch_of(tokens()), log_probs_needed=True)
    assert result.target_log_probs.dtype == result.heads["dm"].log_probs.dtype == torch.float32
    sums = result.heads["dm"].log_probs.exp().sum(-1)
    torch.testing.assert_close(sums, torch.ones_like(sums), atol=1e-5, rtol=0)


def released_lm() -> SyntaxLM:
    model = mixture_lm(lstm(), sampling="released", context=3)
    with torch.no_grad():
        model.embedding.weight.mul_(30)  # peaked distributions, far from uniform
    return model


def hand_states(model: SyntaxLM, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The top-layer states h (T, E) and decoder logits z (T, V) of row ``x`` (T,) read from
    a fresh state."""
    out = model.backbone(model.embedding(x[None]))
    return out.layers[-1][0], model.decoder(out.hidden)[0]


def released_formula(model: SyntaxLM, h: torch.Tensor, z: torch.Tensor,
                     history: list[int], t: int) -> torch.Tensor:
    """DPLM-LSTM/generate.py 142-153: a = softmax((W_Q h_t + b)·h_j / √E) over the history,
    raw states as keys; the distribution softmax(Σ_j a_j z_j), as log-probabilities."""
    head = model.heads[0]
    scores = torch.stack([head.query(h[t]) @ h[j] for j in history]) / math.sqrt(h.size(1))
    a = scores.softmax(0)
    return (a[:, None] * z[history]).sum(0).log_softmax(-1)


def test_the_released_sampler_is_the_released_formula() -> None:
    """Story generation (generate.py 205-230): the prompt enters the history by its last
    position only, then each sampled token's; raw states as keys, logits mixed; the training
    NLL is unchanged (the trained key projection)."""
    from synlm.generation import prompt_step

    model = released_lm()
    x = tokens(B=1, T=7)[0]
    prompt, nxt = x[:5], x[5]
    h, z = hand_states(model, x)
    with torch.no_grad():
        first, state = prompt_step(model, prompt[None])
        second, _ = model.step(nxt.view(1, 1), state)
        torch.testing.assert_close(first[0, -1], released_formula(model, h, z, [4], 4))
        torch.testing.assert_close(first[0, -1], z[4].log_softmax(-1))  # itself alone
        torch.testing.assert_close(second[0, -1], released_formula(model, h, z, [4, 5], 5))
        logits = mixture_lm(lstm(), sampling="logits", context=3)
        logits.load_state_dict(model.state_dict())
        assert (logits.step(x[None, :6])[0][0, -1] - second[0, -1]).abs().max() > 1e-3
        batch = batch_of(x[None])
        torch.testing.assert_close(model(batch).target_log_probs,
                                   logits(batch).target_log_probs)


def test_the_released_unconditional_stream_empties_the_history_at_eos() -> None:
    """generate.py 129-175: after <eos> the mixture draws on the new positions only while
    the LSTM state goes on: the distribution at that <eos> is softmax(z) of the carried
    state, not of a fresh one."""
    from synlm.heads.dependency import reset_rows

    model = released_lm()
    eos = 0
    x = torch.tensor([eos, 5, 7, 3, eos, 9])
    h, z = hand_states(model, x)
    with torch.no_grad():
        _, state = model.step(x[None, :4])
        state = state._replace(heads={"dm": reset_rows(state.heads["dm"],
                                                       torch.tensor([True]))})
        at_eos, state = model.step(x[None, 4:5], state)
        after, _ = model.step(x[None, 5:6], state)
        torch.testing.assert_close(at_eos[0, -1], z[4].log_softmax(-1))
        torch.testing.assert_close(after[0, -1], released_formula(model, h, z, [4, 5], 5))
        fresh = hand_states(model, x[4:5])[1][0].log_softmax(-1)
        assert (fresh - at_eos[0, -1]).abs().max() > 1e-3


def test_the_released_stream_gives_count_sentences_seeded() -> None:
    from synlm.generation import generate_stream

    model = released_lm()

    def run(seed: int) -> list[list[int]]:
        return generate_stream(model, 7, 6, generator=torch.Generator().manual_seed(seed),
                               rows=3)

    sentences = run(0)
    assert len(sentences) == 7 and sentences == run(0)
    assert all(0 < len(s) <= 6 or len(s) == 0 for s in sentences)
    assert all(0 not in s for s in sentences)  # <eos> ends a sentence, never inside one


def test_the_released_sampler_needs_the_query_key_attention() -> None:
    with pytest.raises(ValueError, match="sampling 'released' is the released DM-LSTM sampler"):
        mixture_lm(transformer(), sampling="released")
