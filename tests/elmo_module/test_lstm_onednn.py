"""The LSTM's inference path through oneDNN's prepacked linear (elmo_module.lstm._onednn_weights) against the plain
MKL path that training uses: same outputs and states, and a packed weight made again after any change to the weight."""
import pytest
import torch

from elmo_module import lstm

pytestmark = pytest.mark.skipif(not lstm._onednn_works(), reason="no working oneDNN linear in this torch build")


def random_layer(seed=0, cells=64, projection=16, inputs=16):
    torch.manual_seed(seed)
    layer = lstm.ProjectedLstmLayer(inputs, cells, projection, cell_clip=3.0, proj_clip=3.0)
    with torch.no_grad():
        for p in layer.parameters():
            p.normal_(0, 1.0 / p.shape[-1] ** 0.5 if p.dim() > 1 else 0.5)
    return layer


def batch(seed=1, inputs=16, cells=64, projection=16, lengths=(7, 7, 5, 2, 1)):
    """Rows sorted longest first, a carried state in a non-contiguous layout, and the distinct-token form."""
    g = torch.Generator().manual_seed(seed)
    b, t = len(lengths), max(lengths)
    vectors = torch.randn(6, inputs, generator=g)
    index = torch.randint(0, 6, (b, t), generator=g)
    active = (torch.tensor(lengths).unsqueeze(0) > torch.arange(t).unsqueeze(1)).sum(dim=1)
    state = (torch.randn(projection, b, generator=g).t(), torch.randn(cells, b, generator=g).t())
    return vectors, index, active, state


def run(layer, data, onednn, monkeypatch, distinct=False):
    vectors, index, active, state = data
    monkeypatch.setattr(lstm, "USE_ONEDNN", onednn)
    with torch.no_grad():
        out, (h, c) = layer(vectors[index], active, state, (vectors, index) if distinct else None)
    return out, h, c


@pytest.mark.parametrize("distinct", [False, True], ids=["inputs", "distinct"])
def test_onednn_path_equals_plain_path(monkeypatch, distinct):
    layer, data = random_layer(), batch()
    lstm._packed_memory.pop(layer, None)
    fast = run(layer, data, True, monkeypatch, distinct)
    assert layer in lstm._packed_memory
    plain = run(layer, data, False, monkeypatch, distinct)
    for a, b in zip(fast, plain):
        assert a.shape == b.shape
        assert (a - b).abs().max() <= 1e-5
    assert fast[0].abs().max() > 0.1  # not a trivially small output
    assert not fast[0][4, 1:].any(), "padding must stay zero"


def test_packed_weights_follow_parameter_changes(monkeypatch):
    layer, data = random_layer(seed=2), batch(seed=3)
    run(layer, data, True, monkeypatch)
    packed = lstm._packed_memory[layer][1]
    run(layer, data, True, monkeypatch)
    assert lstm._packed_memory[layer][1] is packed  # unchanged weights: the same copies
    changes = [lambda: layer.state_weight.mul_(-1.5),  # in place (an optimiser step, load_state_dict)
               lambda: layer.projection.add_(0.2),
               lambda: setattr(layer.state_weight, "data", layer.state_weight.detach() * 0.5)]  # replaced
    for change in changes:
        before = run(layer, data, True, monkeypatch)[0]
        with torch.no_grad():
            change()
        fast, plain = run(layer, data, True, monkeypatch), run(layer, data, False, monkeypatch)
        assert (fast[0] - before).abs().max() > 1e-2  # the change matters ...
        for a, b in zip(fast, plain):
            assert (a - b).abs().max() <= 1e-5  # ... and the packed copies followed it


def test_autograd_and_other_dtypes_take_the_plain_path(monkeypatch):
    layer, (vectors, index, active, state) = random_layer(), batch()
    monkeypatch.setattr(lstm, "USE_ONEDNN", True)
    assert layer._onednn_weights(vectors) is None  # autograd records the parameters
    out, _ = layer(vectors[index], active, state)
    assert out.requires_grad
    out.sum().backward()
    assert layer.state_weight.grad is not None
    with torch.no_grad():
        assert layer._onednn_weights(vectors) is not None
        assert layer._onednn_weights(vectors.double()) is None
        assert layer.double()._onednn_weights(vectors.double()) is None
