"""The masked objective (``data.objective: masked``, synlm.data.masking) as the released
StructFormer's ``mask_data`` masks (yikangshen/UDGN at 17f03ddff2df4570db4e0eae151f06f6c12f9a2c,
``main.py``: Bernoulli(mask_rate) per token, never padding or ``<unk>``, inputs replaced by
``<mask>``, targets the original ids where masked): the rule and rate on hand data, masks
that are the same whatever the batch, rank or resume and fresh each epoch, a bidirectional
Transformer that learns the masked words, the errors, its pseudo-log-likelihood by hand and
through its Hugging Face export, and the export loaded back as a masked LM."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from conftest import TINY_OVERRIDES, run_cli
from synlm.backbones import AWDLSTM, Transformer
from synlm.data.batching import UnitDataset
from synlm.data.datamodule import SynLMDataModule
from synlm.data.masking import _STREAM, MaskedCollate, masked_vocab, sentence_mask
from synlm.data.synthetic import SyntheticTreebank
from synlm.data.vocab import MASK, Vocab
from synlm.errors import InputError, SettingError
from synlm.hf_export import export_hf
from synlm.lm import SyntaxLM
from synlm.outputs import Batch
from synlm.tse.masked_scoring import VARIANTS, PLLScorer, SynLMMaskedLM, is_masked_lm

WORDS = ["the", "dog", "saw", "a", "cat", "cats", "sleep"]


def _data(**options: object) -> SynLMDataModule:
    return SynLMDataModule(SyntheticTreebank(n_train=60, n_valid=20, n_test=20), mode="sentence",
                           objective="masked", batch_size=8, eval_batch_size=8, **options)


def _trainer(epoch: int = 0, rank: int = 0, world: int = 1) -> SimpleNamespace:
    return SimpleNamespace(current_epoch=epoch, global_rank=rank, world_size=world)


def _by_sentence(batches: list[Batch], key: str = "tokens") -> dict[tuple, np.ndarray]:
    """Each row's masked positions, by its original tokens (a sentence of the split)."""
    out = {}
    for batch in batches:
        for row, n in enumerate(batch.lengths.tolist()):
            out[tuple(batch.targets[row, :n].tolist())] = batch.mask[row, :n].numpy()
    return out


def _bidirectional(vocab_size: int, dropout: float = 0.0) -> SyntaxLM:
    torch.manual_seed(0)
    return SyntaxLM(Transformer(32, 2, 2, 64, dropout=dropout, pre_norm=True, causal=False,
                                positions="learned", max_positions=64,
                                activation="leaky_relu", dropout_input=0.0),
                    vocab_size=vocab_size)


# ------------------------------------------------------------------ the rule


def test_never_the_leading_eos_nor_an_unknown_word_and_the_rate() -> None:
    """Over 2,000 rows of 21 tokens, the masked share of the maskable words is 0.3 (to 3.5
    standard deviations); position 0 and the unknown id are never masked."""
    rng = np.random.default_rng(0)
    tokens = np.tile(np.array([0, *range(2, 12), 1, *range(2, 11)]), 1)  # 1 = <unk>
    drawn = np.stack([sentence_mask(tokens, 0.3, np.array([1]), rng) for _ in range(2000)])
    assert not drawn[:, 0].any() and not drawn[:, tokens == 1].any()
    maskable = drawn[:, (tokens != 1) & (np.arange(len(tokens)) > 0)]
    assert abs(maskable.mean() - 0.3) < 3.5 * np.sqrt(0.3 * 0.7 / maskable.size)


def test_a_batch_masks_by_the_rule_from_its_sentences_generators() -> None:
    """Hand rows: ``tokens`` hold ``<mask>`` exactly where ``mask`` is True, ``targets`` the
    original ids, padding and ``<unk>`` never masked; each row's draws are its sentence's
    generator's (seed, stream, phase, split, epoch, sentence) below the rate."""
    vocab = masked_vocab(Vocab.build([WORDS]))
    assert vocab.itos[-1] == MASK and vocab.itos[:-1] == Vocab.build([WORDS]).itos
    rows = [[0, 2, 3, 4, 1, 5, 6], [0, 7, 8], [0, 1, 2, 3, 4, 5, 6, 7, 8, 2, 3]]
    stream = np.concatenate([*rows, [0]]).astype(np.int64)
    bounds = np.cumsum([0] + [len(r) for r in rows])
    ids = np.concatenate([np.full(len(r), 40 + i) for i, r in enumerate(rows)] + [[99]])
    data = UnitDataset({"tokens": stream, "sentence_ids": ids}, bounds, [None] * 3)
    collate = MaskedCollate.of(vocab, 0.5, seed=7, split=1, epoch=3, train=True)
    batch = collate([data[i] for i in range(3)])
    for b, row in enumerate(rows):
        n = len(row)
        draws = np.random.default_rng([7, _STREAM, 0, 1, 3, 40 + b]).random(n) < 0.5
        expected = draws & (np.arange(n) > 0) & (np.array(row) != vocab.unk_id)
        assert batch.mask[b, :n].numpy().tolist() == expected.tolist()
        assert not batch.mask[b, n:].any()
        assert batch.targets[b, :n].tolist() == row
        assert batch.tokens[b, :n].tolist() == [vocab.stoi[MASK] if m else t
                                                for t, m in zip(row, expected)]
    assert batch.n_targets == int(batch.mask.sum()) > 0
    assert batch.lengths.tolist() == [7, 3, 11]


# ------------------------------------------------------------------ reproducible masks


def test_masks_are_fresh_each_epoch_and_the_same_on_a_resume() -> None:
    data = _data()
    data.trainer = _trainer(epoch=0)
    first = list(data.train_dataloader())
    again = list(data.train_dataloader())
    for a, b in zip(first, again, strict=True):
        assert torch.equal(a.tokens, b.tokens) and torch.equal(a.mask, b.mask)
    resumed = data.train_dataloader()
    resumed.load_state_dict({"epoch": 0, "consumed": 3})
    for a, b in zip(first[3:], list(resumed), strict=True):
        assert torch.equal(a.tokens, b.tokens) and torch.equal(a.mask, b.mask)
    data.trainer = _trainer(epoch=1)
    later = _by_sentence(list(data.train_dataloader()))
    before = _by_sentence(first)
    assert later.keys() == before.keys()
    assert sum(not np.array_equal(later[k], before[k]) for k in later) > len(later) // 2


def test_a_sentence_is_masked_alike_in_any_batch_and_on_any_rank() -> None:
    """Masks are drawn per sentence: by batches of 8 or of a token budget, on one rank or as
    either of two ranks (which hold different sentences), a sentence has the same mask."""
    data = _data()
    data.trainer = _trainer()
    alone = _by_sentence(list(data.train_dataloader()))
    budget = _data(max_tokens=64)
    budget.trainer = _trainer()
    assert _by_sentence(list(budget.train_dataloader())).keys() == alone.keys()
    for key, mask in _by_sentence(list(budget.train_dataloader())).items():
        assert np.array_equal(mask, alone[key])
    ranks = []
    for rank in (0, 1):
        data.trainer = _trainer(rank=rank, world=2)
        ranks.append(_by_sentence(list(data.train_dataloader())))
        for key, mask in ranks[-1].items():
            assert np.array_equal(mask, alone[key])
    assert ranks[0].keys() != ranks[1].keys()


def test_evaluation_masks_are_fixed() -> None:
    data = _data()
    data.trainer = _trainer(epoch=0)
    first = list(data.val_dataloader())
    data.trainer = _trainer(epoch=5)
    for a, b in zip(first, list(data.val_dataloader()), strict=True):
        assert torch.equal(a.tokens, b.tokens) and torch.equal(a.mask, b.mask)
    assert sum(int(b.mask.sum()) for b in first) > 0


# ------------------------------------------------------------------ learning


def test_a_tiny_bidirectional_transformer_learns_the_masked_words() -> None:
    """Eight sentences with fixed masks: the masked-word loss (SyntaxLM's: the mean NLL over
    ``batch.mask``) falls from about log V to under a tenth of it in 150 Adam steps."""
    data = _data()
    batch = next(iter(data.val_dataloader()))
    model = _bidirectional(len(data.vocab))
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    losses = []
    for _ in range(150):
        out = model(batch)
        loss = -out.target_log_probs[batch.mask].mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[0] > 0.8 * np.log(len(data.vocab))
    assert losses[-1] < 0.1 * losses[0]


def test_fit_logs_the_masked_perplexity_then_scores_and_exports(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``configs/transformer_mlm.yaml`` cut down: ``val/mlm_ppl`` (never ``val/ppl``) and
    the best checkpoint by it; ``evaluate-syntax`` scores the run by pseudo-log-likelihood
    and ``export-hf`` writes a masked LM."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    root = tmp_path / "run"
    assert run_cli(["fit", "--config", "transformer_mlm.yaml", *TINY_OVERRIDES,
                    "--data.max_tokens=256", "--trainer.max_steps=4",
                    "--trainer.limit_val_batches=2", "--trainer.val_check_interval=2",
                    "--model.backbone.init_args.input_size=16",
                    "--model.backbone.init_args.num_layers=2",
                    "--model.backbone.init_args.num_heads=2",
                    "--model.backbone.init_args.ffn_size=32",
                    f"--trainer.default_root_dir={root}"]) == 0
    (metrics,) = root.glob("version_0/**/metrics.csv")
    header = metrics.read_text().splitlines()[0].split(",")
    assert "val/mlm_ppl" in header and "val/ppl" not in header
    best = [p for p in (root / "version_0" / "checkpoints").glob("epoch*.ckpt")]
    assert best
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text(json.dumps({"sentence_good": "the cat sleeps",
                                 "sentence_bad": "the cat sleep", "UID": "agree"}) + "\n")
    capsys.readouterr()
    assert run_cli(["evaluate-syntax", "--ckpt_path", str(root), "--pairs", str(pairs),
                    "--pll", "original", "--output", str(tmp_path / "out.jsonl")]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert 0.0 <= summary["headline"]["pairs/accuracy"] <= 1.0
    provenance = (tmp_path / "out.jsonl.provenance.json").read_text()
    assert '"pseudo_log_likelihood"' in provenance and '"original"' in provenance
    assert run_cli(["export-hf", "--ckpt_path", str(root), "--out", str(tmp_path / "hf")]) == 0
    assert is_masked_lm(str(tmp_path / "hf"), trust_remote_code=True)


# ------------------------------------------------------------------ errors


@pytest.mark.parametrize("rate", [0.0, 1.0, -0.1, 1.5])
def test_a_mask_rate_outside_0_1_is_refused(rate: float) -> None:
    with pytest.raises(SettingError, match=f"mask_rate={rate}"):
        _data(mask_rate=rate)


def test_masking_needs_sentence_rows_and_a_word_objective() -> None:
    with pytest.raises(InputError, match="data.mode is stream"):
        SynLMDataModule(objective="masked")
    with pytest.raises(InputError, match="data.mode is sentence and data.eval_mode stream"):
        SynLMDataModule(mode="sentence", eval_mode="stream", objective="masked")
    with pytest.raises(SettingError, match="objective=bidirectional"):
        SynLMDataModule(mode="sentence", objective="bidirectional")


def test_the_objective_must_fit_the_backbone() -> None:
    """Where the recipe meets the data (``SyntaxLM.setup``): one line naming
    ``--data.objective`` and the backbone."""
    data = _data()
    causal = SyntaxLM(AWDLSTM(16, 24, 2), vocab_size=len(data.vocab))
    causal.datamodule = data
    with pytest.raises(InputError, match=r"^--data.objective masked .* backbone AWDLSTM is "
                                         r"causal") as caught:
        causal.setup("fit")
    assert "\n" not in str(caught.value)
    causal_data = SynLMDataModule(SyntheticTreebank(n_train=20), mode="sentence")
    bidirectional = _bidirectional(len(causal_data.vocab))
    bidirectional.datamodule = causal_data
    with pytest.raises(InputError, match=r"^--data.objective causal .* backbone Transformer "
                                         r"attends both ways"):
        bidirectional.setup("fit")


def test_a_bidirectional_backbone_needs_the_rows_lengths() -> None:
    model = _bidirectional(10)
    tokens = torch.ones(2, 4, dtype=torch.long)
    with pytest.raises(InputError, match=r"^Transformer attends both ways .*\(Batch\.lengths\)"):
        model(Batch(tokens=tokens, targets=tokens, mask=tokens.bool()))


def test_the_command_line_refuses_a_masked_objective_for_a_causal_backbone(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["fit", "--config", "transformer.yaml", *TINY_OVERRIDES,
                    "--data.objective=masked", "--trainer.max_steps=1",
                    f"--trainer.default_root_dir={tmp_path}"]) == 2
    (line,) = [x for x in capsys.readouterr().err.splitlines() if "data.objective" in x]
    assert "Transformer is causal" in line


def test_evaluate_syntax_scores_a_masked_lm_by_pll_and_refuses_pll_for_a_causal_one() -> None:
    """``build_scorers``: a synlm masked LM gets a ``PLLScorer`` (its variant from ``--pll``),
    its untrained copies too; ``--pll`` on causal checkpoints alone and ``--eos`` on a masked
    LM are one line each."""
    from synlm.tse.scorers import Builders, Settings, build_scorers

    masked, causal = _tiny_masked_lm(), SyntaxLM(AWDLSTM(16, 24, 2), vocab_size=8)
    models = {"mlm.ckpt": masked, "lm.ckpt": causal}
    builders = Builders(load=models.__getitem__, untrained_copy=lambda m, seed: m,
                        search=lambda m: m)
    (built,) = build_scorers([("ckpt_path", "mlm.ckpt")], None, Settings(pll="original"),
                             builders, untrained=1)
    assert isinstance(built.scorer, PLLScorer) and built.scorer.pll == "original"
    assert isinstance(built.untrained[0], PLLScorer)
    with pytest.raises(InputError, match=r"^--pll: lm.ckpt is a causal LM"):
        build_scorers([("ckpt_path", "lm.ckpt")], None, Settings(pll="original"), builders)
    with pytest.raises(InputError, match=r"^--eos: mlm.ckpt is a masked LM"):
        build_scorers([("ckpt_path", "mlm.ckpt")], None, Settings(eos=True), builders)


# ------------------------------------------------------------------ scoring and export


def _tiny_masked_lm() -> SyntaxLM:
    vocab = masked_vocab(Vocab.build([WORDS]))
    model = _bidirectional(len(vocab)).double().eval()
    model.vocab, model.normalization = vocab, "none"
    return model


SENTENCES = [["the", "dog", "saw", "a", "cat"], ["cats", "sleep"], ["a", "zebra", "saw"]]


def _pll_by_hand(model: SyntaxLM, words: list[str]) -> list[float]:
    """log p(w_i | [<eos>, w1 .. <mask> .. wn]) for each word, one forward a word."""
    vocab = model.vocab
    row = [vocab.eos_id, *vocab.encode(words)]
    out = []
    for i in range(1, len(row)):
        copy = torch.tensor([[*row[:i], vocab.stoi[MASK], *row[i + 1:]]])
        with torch.no_grad():
            logits = model(Batch(tokens=copy, targets=copy, mask=copy.bool(),
                                 lengths=torch.tensor([len(row)]))).logits
        out.append(logits[0, i].log_softmax(-1)[row[i]].item())
    return out


@pytest.mark.parametrize("variant", VARIANTS)
def test_the_pll_of_a_synlm_masked_lm_by_hand_and_through_its_export(
        variant: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The scorer's word log-probabilities equal the hand computation (a word-level
    vocabulary: a word is one token, so both variants mask it alone), and ``PLLScorer`` on
    the model exported with ``export_hf`` gives the same numbers, in float64."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    model = _tiny_masked_lm()
    ours = PLLScorer(SynLMMaskedLM(model, "tiny"), variant=variant, batch_size=4)
    scored = ours.score(SENTENCES)
    for words, sentence in zip(SENTENCES, scored):
        assert sentence.word_log_probs == pytest.approx(_pll_by_hand(model, words),
                                                        rel=0, abs=1e-12)
        assert sentence.eos_log_prob is None
    assert scored[2].unknown == (False, True, False)
    folder = export_hf(model, tmp_path / "export")
    theirs = PLLScorer(folder, variant=variant, batch_size=4, dtype=torch.float64,
                       trust_remote_code=True)
    for a, b in zip(scored, theirs.score(SENTENCES)):
        assert a.word_log_probs == pytest.approx(b.word_log_probs, rel=0, abs=1e-12)
        assert a.tokens == b.tokens


def test_the_export_loads_as_a_masked_lm_with_the_same_log_probs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``AutoModelForMaskedLM`` (remote code, offline) gives ``masked_log_probs`` on right-
    and left-padded batches; the config names ``SynlmForMaskedLM``, which
    ``is_masked_config`` recognises; the tokenizer's mask token is ``<mask>``."""
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    model = _tiny_masked_lm()
    folder = export_hf(model, tmp_path / "export")
    config = json.loads((folder / "config.json").read_text())
    assert config["architectures"] == ["SynlmForMaskedLM"]
    assert config["auto_map"]["AutoModelForMaskedLM"] == "modeling_synlm.SynlmForMaskedLM"
    assert config["max_position_embeddings"] == 64
    assert is_masked_lm(str(folder), trust_remote_code=True)
    hf_model = AutoModelForMaskedLM.from_pretrained(folder, trust_remote_code=True,
                                                    dtype=torch.float64)
    tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=True)
    assert tokenizer.mask_token == MASK and tokenizer.mask_token_id == model.vocab.stoi[MASK]
    texts = ["the <mask> saw a cat", "cats <mask>", "a"]
    for side in ("right", "left"):
        tokenizer.padding_side = side
        batch = tokenizer(texts, padding=True, return_tensors="pt")
        with torch.no_grad():
            logits = hf_model(**batch).logits
        for row, ids, kept in zip(logits, batch.input_ids, batch.attention_mask.bool()):
            expected = model.model.masked_log_probs(ids[kept][None])[0]
            torch.testing.assert_close(row[kept], expected, rtol=0, atol=1e-12)
    assert batch.input_ids[0, -6:].tolist()[0] == model.vocab.eos_id
