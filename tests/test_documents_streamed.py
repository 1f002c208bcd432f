"""Documents streamed through a batch's rows (``data.document_order: streamed``; the released
Transformer Grammars trainer, deepmind/transformer_grammars ``preprocessing.py``
``get_chunks_from_dataset`` and ``lm.py``'s memory emptied at ``beginning_of_seq``): the
schedule of documents over rows, disjoint streams on two ranks, the per-action
log-probabilities of the streamed reading equal to the chunked reading of each document
(float64, 1e-10), and a run stopped mid-epoch that resumes the stream bit for bit."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from test_tg_memory import records

from synlm.catalog import REPO_CONFIGS
from synlm.cli import main
from synlm.data.batching import ActionItem
from synlm.data.datamodule import SynLMDataModule
from synlm.data.layout_documents import StreamedLoader, stream_schedule
from synlm.errors import InputError
from synlm.transition.action_transformer import ActionTransformer
from synlm.transition.attention.tg import TGPolicy
from synlm.transition.lm import TransitionLM
from synlm.transition.parser_state import SHIFT
from test_resume import assert_same_runs


def test_each_document_goes_to_the_row_that_frees_first() -> None:
    """Documents of 3, 1, 2, 2 chunks over two rows: row 1 takes the second document and,
    free first, the third; the fourth goes to row 0 (a tie: the lowest row)."""
    document, chunk = stream_schedule(np.array([3, 1, 2, 2]), 2)
    assert document.tolist() == [[0, 1], [0, 2], [0, 2], [3, -1], [3, -1]]
    assert chunk.tolist() == [[0, 0], [1, 0], [2, 1], [0, 0], [1, 0]]


def test_two_ranks_stream_disjoint_documents_for_as_many_steps() -> None:
    chunks = np.array([3, 1, 2, 2, 5, 1, 4])
    items = list(range(len(chunks)))
    loaders = [StreamedLoader(items, chunks, 2, seed=3, epoch=1, rank=r, world_size=2)
               for r in (0, 1)]
    assert len(loaders[0]) == len(loaders[1])
    seen = [set(loader.documents[loader.documents >= 0].tolist()) for loader in loaders]
    assert seen[0].isdisjoint(seen[1]) and seen[0] | seen[1] == set(items)
    for loader in loaders:  # every chunk of each of its documents, once, in order
        for d in seen[loaders.index(loader)]:
            assert loader.chunks[loader.documents == d].tolist() == list(range(chunks[d]))


def documents(n: int = 3) -> tuple[list[ActionItem], int]:
    """The ``n`` shortest distinct documents of tests/fixtures/tg_memory (the NLTK sample's,
    as actions), a random word a SHIFT; and the action vocabulary's size."""
    seen, docs = set(), []
    for record in sorted(records(), key=lambda r: len(r["actions"])):
        if record["source"] not in seen:
            seen.add(record["source"])
            docs.append(np.array(record["actions"]))
    rng = np.random.default_rng(0)
    items = [ActionItem(rng.integers(1, 30, int((d == SHIFT).sum())), d, None)
             for d in docs[:n]]
    return items, int(max(d.max() for d in docs[:n])) + 1


def recipe(n_actions: int) -> TransitionLM:
    torch.manual_seed(0)
    model = ActionTransformer(30, n_actions, TGPolicy(sequence_length=8, memory_length=6),
                              size=16, num_layers=2, num_heads=2, dropout=0.0)
    return TransitionLM(model).double().eval()


def test_the_stream_gives_each_document_its_chunked_log_probabilities() -> None:
    """Three documents streamed through two rows, one chunk of 8 tokens a batch: each
    action's log-probability is counted once, in the batch whose chunk predicts it, and
    equals that of the document read whole in chunks (float64, 1e-10); so do the words'.
    The second document of a row reads an empty memory at its start."""
    items, n_actions = documents()
    lm = recipe(n_actions)
    chunks = np.array([lm.chunks_of(item.actions) for item in items])
    assert chunks.min() >= 3
    loader = StreamedLoader(items, chunks, 2, seed=0)
    assert (loader.documents >= 0).sum(0).tolist() != [0, 0] and len(loader) < chunks.sum()
    got = {d: [np.zeros(len(i.actions)), np.zeros(len(i.words))] for d, i in enumerate(items)}
    counted = {d: np.zeros(len(i.actions), dtype=int) for d, i in enumerate(items)}
    with torch.no_grad():
        for i, batch in enumerate(loader):
            out, part = lm._streamed(batch)
            for b, d in enumerate(loader.documents[i]):
                if d >= 0:
                    n, w = len(items[d].actions), len(items[d].words)
                    got[d][0] += out.action_log_probs[b, :n].numpy()
                    got[d][1] += out.word_log_probs[b, :w].numpy()
                    counted[d] += (out.action_log_probs[b, :n] != 0).numpy()
            assert part.n_actions <= 2 * 8
    for d, item in enumerate(items):
        with torch.no_grad():
            whole = lm.model(torch.as_tensor(item.words)[None], torch.as_tensor(item.actions)[None],
                             torch.tensor([len(item.words)]))
        assert counted[d].tolist() == [1] * len(item.actions)
        np.testing.assert_allclose(got[d][0], whole.action_log_probs[0].numpy(), atol=1e-10,
                                   rtol=0)
        np.testing.assert_allclose(got[d][1], whole.word_log_probs[0].numpy(), atol=1e-10,
                                   rtol=0)


def test_a_batch_reads_one_chunk_whatever_its_index(monkeypatch: pytest.MonkeyPatch) -> None:
    """Three documents streamed through two rows, chunks of L = 8 tokens: every batch
    embeds at most 2 × 8 tokens (fewer where both rows read a short last chunk) and runs the
    vocabulary at the tokens that predict its counted actions alone, whatever chunk of its
    documents it reads; each document's layout (the policy's masks) is built once, at its
    start. Layouts dropped before every batch (as a resumed run has none) are built again,
    and give the same numbers exactly."""
    items, n_actions = documents()
    lm = recipe(n_actions)
    chunks = np.array([lm.chunks_of(item.actions) for item in items])
    loader = StreamedLoader(items, chunks, 2, seed=0)
    built: list[int] = []
    masks = lm.model.policy.masks
    monkeypatch.setattr(lm.model.policy, "masks", lambda actions, heads: (
        built.append(actions.numel()), masks(actions, heads))[1])
    embedded: list[int] = []
    lm.model.embedding.register_forward_hook(lambda m, i, o: embedded.append(i[0].numel()))
    softmaxed: list[int] = []
    lm.model.final_norm.register_forward_hook(lambda m, i, o: softmaxed.append(len(i[0])))
    kept, counts = [], []
    with torch.no_grad():
        for batch in loader:
            out, part = lm._streamed(batch)
            kept.append(out.joint)
            counts.append(part.n_actions)
    assert len(embedded) == len(loader) and max(embedded) == 2 * 8 and softmaxed == counts
    assert sorted(n for n in built if n) == sorted(len(item.actions) for item in items)
    assert max(loader.chunks.flatten()) >= 2
    with torch.no_grad():
        for batch, joint in zip(loader, kept, strict=True):
            lm.stream.documents = []
            assert torch.equal(lm._streamed(batch)[0].joint, joint)


def test_streaming_a_model_that_reads_documents_whole_is_a_one_line_error() -> None:
    data = SynLMDataModule(mode="actions", action_unit="document", document_order="streamed",
                           max_document_words=30)
    with pytest.raises(InputError, match=r"^data.document_order: streamed reads one chunk"):
        data._loader("train", 2, train=True)
    with pytest.raises(InputError, match=r"^data.document_order: streamed streams documents"):
        SynLMDataModule(mode="actions", document_order="streamed")


STREAMED = ["--config", str(REPO_CONFIGS / "tg_synthetic.yaml"),
            "--data.corpus.init_args.n_train=80", "--data.corpus.init_args.n_valid=10",
            "--data.corpus.init_args.n_test=10", "--data.action_unit=document",
            "--data.max_document_words=60", "--data.document_order=streamed",
            "--data.batch_size=2", "--data.eval_batch_size=2",
            "--model.init_args.model.init_args.size=16",
            "--model.init_args.model.init_args.num_layers=1",
            "--model.init_args.model.init_args.ffn_size=32",
            "--model.init_args.model.init_args.attention.init_args.sequence_length=16",
            "--model.init_args.model.init_args.attention.init_args.memory_length=16",
            "--trainer.accelerator=cpu", "--trainer.devices=1", "--trainer.max_epochs=1",
            "--trainer.enable_progress_bar=false", "--trainer.enable_model_summary=false",
            "--trainer.val_check_interval=4", "--trainer.limit_val_batches=1",
            "--trainer.log_every_n_steps=1"]


def test_a_stopped_stream_resumes_bit_for_bit(tmp_path: Path) -> None:
    """Trained 7 steps straight, or stopped after 3 (mid-document: the rows' memory in the
    checkpoint) and resumed: the same weights, optimiser, memory and logged losses."""
    torch.set_num_threads(1)
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    assert main(["fit", *STREAMED, "--trainer.max_steps=7",
                 f"--trainer.default_root_dir={straight}"]) == 0
    assert main(["fit", *STREAMED, "--trainer.max_steps=3",
                 f"--trainer.default_root_dir={resumed}"]) == 0
    assert main(["fit", *STREAMED, "--trainer.max_steps=7", "--ckpt_path=last",
                 f"--trainer.default_root_dir={resumed}"]) == 0
    assert_same_runs(straight, resumed, 7)
