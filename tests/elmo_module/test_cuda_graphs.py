"""The training recurrence replayed as CUDA graphs (``lstm._recurrence``) computes what its kernels compute one launch
at a time: same losses and same weights, window after window, when the inputs, the carried state and the weights
change between replays, and when a window of another shape captures a graph of its own. Needs a CUDA GPU (CI has
none: those tests skip); on a GPU machine: ``python3 -m pytest tests/elmo_module/test_cuda_graphs.py``
(docs/speed.md#on-a-gpu).
"""
import warnings

import numpy as np
import pytest
import torch

from elmo_module import lstm
from elmo_module.bilm import ElmoBiLm
from elmo_module.options import BiLmOptions
from elmo_module.pretraining.corpus import TOKENIZERS, build_vocabulary, read_corpus
from elmo_module.pretraining.language_model import new_language_model
from elmo_module.pretraining.trainer import LmText, LmTrainer, TrainingSettings
from tests.conftest import REPO_ROOT

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def trainer(tmp_path, device, precision="float32", batch_size=8):
    path = tmp_path / "train.txt"
    if not path.exists():
        rng = np.random.default_rng(0)
        words = [f"w{k}" for k in range(60)]
        path.write_text("\n".join(" ".join(rng.choice(words, size=12)) for _ in range(300)) + "\n")
    corpus = read_corpus([path], TOKENIZERS["simple"])
    vocabulary = build_vocabulary(corpus, 100, 1)
    options = BiLmOptions.load(str(REPO_ROOT / "elmo_module" / "bundled" / "tiny_options.json"))
    options.n_characters = 262
    model = new_language_model(options, len(vocabulary), 0.1, seed=0)
    settings = TrainingSettings(batch_size=batch_size, unroll=10, negatives=16, seed=3, precision=precision)
    return LmTrainer(model.to(device), vocabulary, LmText(corpus, vocabulary, options.max_chars), settings)


def layers(t):
    return [m for m in t.model.modules() if isinstance(m, lstm.ProjectedLstmLayer)]


def step(t, window, graphs, monkeypatch, seed=0):
    monkeypatch.setattr(lstm, "USE_CUDA_GRAPHS", graphs)
    torch.manual_seed(seed)  # the same dropout masks for both trainers
    return t.train_step(*window)


@pytest.mark.gpu
@needs_cuda
@pytest.mark.parametrize("precision", ["float32", "bfloat16"])
def test_graphed_training_gives_the_eager_losses_and_weights(tmp_path, monkeypatch, precision):
    graphed, eager = trainer(tmp_path, "cuda", precision), trainer(tmp_path, "cuda", precision)
    ids = graphed.train_text.corpus.shuffled_ids(0, 0)
    losses = []
    for unroll in (10, 10, 10, 7, 10):  # 7: another shape, a graph of its own; then the first one again
        windows = list(graphed.train_text.window_pairs(ids, 8, unroll))
        for k, (_, *window) in enumerate(windows[:3]):
            a = step(graphed, window, True, monkeypatch, seed=k)
            b = step(eager, window, False, monkeypatch, seed=k)
            losses.append(b)
            # float32: cuBLAS may pick other kernels inside a capture (seen: 2e-6 relative after 10 steps)
            assert a == pytest.approx(b, rel=1e-4), len(losses)
    assert len(set(losses)) == len(losses)  # every window a loss of its own: the graph read each new input
    with warnings.catch_warnings():  # a replay warns of nothing (e.g. the weights' gradients on another stream)
        warnings.simplefilter("error")
        _, *window = windows[3]
        assert step(graphed, window, True, monkeypatch) == pytest.approx(
            step(eager, window, False, monkeypatch), rel=1e-4)
    assert all(len(lstm._graphs.get(m, {})) == 2 for m in layers(graphed))  # shapes 10 and 7, captured once each
    assert not any(m in lstm._graphs for m in layers(eager))
    for (name, p), q in zip(graphed.model.named_parameters(), eager.model.parameters()):
        assert torch.allclose(p, q, rtol=1e-3, atol=1e-5), name
    assert torch.allclose(graphed.state[0], eager.state[0], rtol=1e-3, atol=1e-5)  # the carried state too


@pytest.mark.gpu
@needs_cuda
def test_graphs_hold_at_most_their_limit_per_layer(tmp_path, monkeypatch):
    t = trainer(tmp_path, "cuda")
    ids = t.train_text.corpus.shuffled_ids(0, 0)
    for unroll in range(3, 3 + lstm.GRAPHS_PER_LAYER + 2):
        _, *window = next(t.train_text.window_pairs(ids, 8, unroll))
        step(t, window, True, monkeypatch)
    assert all(len(lstm._graphs[m]) == lstm.GRAPHS_PER_LAYER for m in layers(t))


def test_cpu_training_captures_no_graph(tmp_path, monkeypatch, one_thread):
    t = trainer(tmp_path, "cpu")
    _, *window = next(t.train_text.window_pairs(t.train_text.corpus.shuffled_ids(0, 0), 8, 10))
    step(t, window, True, monkeypatch)
    assert not any(m in lstm._graphs for m in layers(t))


@pytest.mark.gpu
@needs_cuda
def test_ragged_batches_are_not_graphed(monkeypatch):
    """Sentences of different lengths change the shape from batch to batch: a capture each would cost more than the
    graph saves, so a recorded forward of a ragged batch runs eagerly; its gradients still arrive."""
    options = BiLmOptions.load(str(REPO_ROOT / "elmo_module" / "bundled" / "tiny_options.json"))
    bilm = ElmoBiLm(options).cuda()
    monkeypatch.setattr(lstm, "USE_CUDA_GRAPHS", True)
    from elmo_module import batch_to_ids

    ids = batch_to_ids([["a", "ragged", "batch", "of", "words"], ["two", "rows"]]).cuda()
    out = bilm(ids)
    sum(layer.sum() for layer in out.layers).backward()
    cells = [m for m in bilm.modules() if isinstance(m, lstm.ProjectedLstmLayer)]
    assert not any(m in lstm._graphs for m in cells)
    assert all(m.state_weight.grad is not None and m.state_weight.grad.abs().sum() > 0 for m in cells)
