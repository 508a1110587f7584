"""The LSTM's training recurrence as one autograd node (``elmo_module.lstm._Recurrence``) against the
step-by-step autograd graph of ``ProjectedLstmLayer._step`` (``lstm.USE_RECURRENCE = False``), which it replaces.

float64: the same outputs and final states bit for bit, and the same gradients (input_weight, state_weight, bias,
projection, the inputs, the initial state) to 1e-10, for full and ragged batches with both clips active;
torch.autograd.gradcheck on a tiny layer. float32: outputs bit-identical, gradients equal up to rounding (the weight
gradients are one GEMM over all positions instead of a GEMM per step and a running sum: another summation order).
bfloat16 autocast: gradients as close to float32's as the step-by-step autocast path's are.
"""
import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from elmo_module import lstm
from tests.elmo_module.test_precision import tiny_trainer

CELL_CLIP, PROJ_CLIP = 1.0, 0.3  # small enough that both clips act at some positions of the random layers below
LENGTHS = {"full": (7, 7, 7, 7), "ragged": (7, 7, 5, 2, 1), "empty_row": (6, 3, 0)}


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


def random_layer(dtype, inputs=8, cells=16, projection=6, seed=0, scale=0.8, clips=(CELL_CLIP, PROJ_CLIP)):
    torch.manual_seed(seed)
    layer = lstm.ProjectedLstmLayer(inputs, cells, projection, *clips).to(dtype)
    with torch.no_grad():
        for p in layer.parameters():
            p.normal_(0, scale)
    return layer


def random_batch(layer, lengths, dtype, seed=1):
    """Rows sorted longest first; a random initial state (so its gradient is checked too)."""
    g = torch.Generator().manual_seed(seed)
    b, t = len(lengths), max(lengths)
    x = torch.randn(b, t, layer.input_weight.size(1), generator=g, dtype=dtype)
    active = (torch.tensor(lengths).unsqueeze(0) > torch.arange(t).unsqueeze(1)).sum(dim=1)
    state = (torch.randn(b, layer.projection_dim, generator=g, dtype=dtype),
             torch.randn(b, layer.cell_dim, generator=g, dtype=dtype))
    return x, active, state


def run(layer, x, active, state, recurrence, monkeypatch, bfloat16=False, distinct=None):
    """Outputs and final state, and the gradients of a random projection of all three (inputs, h0, c0, then the
    parameters); records whether _Recurrence ran."""
    monkeypatch.setattr(lstm, "USE_RECURRENCE", recurrence)
    calls = []
    apply = lstm._Recurrence.apply
    monkeypatch.setattr(lstm._Recurrence, "apply", lambda *a: calls.append(1) or apply(*a))
    layer.zero_grad(set_to_none=True)
    h0, c0 = (t.clone().requires_grad_() for t in state)
    x = (x if distinct is None else distinct[0]).clone().requires_grad_()  # the distinct vectors: x[index]
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bfloat16):
        if distinct is None:
            out, (h, c) = layer(x, active, (h0, c0))
        else:
            out, (h, c) = layer(x[distinct[1]], active, (h0, c0), (x, distinct[1]))
    g = torch.Generator().manual_seed(3)
    loss = sum((y * torch.randn(y.shape, generator=g, dtype=y.dtype)).sum() for y in (out, h, c))
    loss.backward()
    grads = [x.grad, h0.grad, c0.grad, *(p.grad for p in layer.parameters())]
    assert bool(calls) == recurrence
    return (out.detach(), h.detach(), c.detach()), grads


@pytest.mark.parametrize("lengths", list(LENGTHS.values()), ids=list(LENGTHS))
def test_float64_same_outputs_and_gradients_as_the_step_loop(lengths, monkeypatch):
    layer = random_layer(torch.float64)
    x, active, state = random_batch(layer, lengths, torch.float64)
    expected, expected_grads = run(layer, x, active, state, False, monkeypatch)
    got, grads = run(layer, x, active, state, True, monkeypatch)
    for a, b in zip(got, expected):
        assert torch.equal(a, b)
    for a, b in zip(grads, expected_grads):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-10)
    out, _, c = got
    # both clips acted somewhere and not everywhere (else the clip gradients were not tested)
    assert 0 < int((out.abs() == PROJ_CLIP).sum()) < int((out != 0).sum())
    assert 0 < int((c.abs() == CELL_CLIP).sum()) < c.numel()


def test_a_cell_exactly_at_the_clip_passes_the_gradient_as_torch_clamp_does(monkeypatch):
    """sigmoid(f) = 1 and sigmoid(i) = 0 exactly (gates of +-800): c stays c0, which sits exactly on +-cell_clip for
    some entries; clamp's backward passes the gradient there (min <= x <= max), so c0's gradient is not zero."""
    layer = random_layer(torch.float64)
    x, active, state = random_batch(layer, LENGTHS["ragged"], torch.float64)
    with torch.no_grad():
        layer.input_weight.zero_(), layer.state_weight.zero_()
        layer.bias[:16], layer.bias[32:48] = -800.0, 800.0  # i, f
    c0 = state[1].clamp(-CELL_CLIP, CELL_CLIP)
    c0[:, ::3] = CELL_CLIP
    expected, expected_grads = run(layer, x, active, (state[0], c0), False, monkeypatch)
    got, grads = run(layer, x, active, (state[0], c0), True, monkeypatch)
    assert torch.equal(got[2], c0)
    assert bool((expected_grads[2][:, ::3] != 0).all())
    for a, b in zip(grads, expected_grads):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-10)


def test_float64_distinct_input_path(monkeypatch):
    layer = random_layer(torch.float64)
    _, active, state = random_batch(layer, LENGTHS["ragged"], torch.float64)
    g = torch.Generator().manual_seed(4)
    vectors = torch.randn(5, 8, generator=g, dtype=torch.float64)
    index = torch.randint(0, 5, (5, 7), generator=g)
    expected, expected_grads = run(layer, None, active, state, False, monkeypatch, distinct=(vectors, index))
    got, grads = run(layer, None, active, state, True, monkeypatch, distinct=(vectors, index))
    for a, b in zip(got, expected):
        assert torch.equal(a, b)
    for a, b in zip(grads, expected_grads):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-10)


@pytest.mark.parametrize("lengths", [LENGTHS["full"], LENGTHS["ragged"]], ids=["full", "ragged"])
def test_float32_outputs_are_bit_identical_and_gradients_equal_to_rounding(lengths, monkeypatch):
    layer = random_layer(torch.float32, inputs=16, cells=64, projection=16, scale=0.3, clips=(3.0, 3.0))
    x, active, state = random_batch(layer, lengths, torch.float32)
    expected, expected_grads = run(layer, x, active, state, False, monkeypatch)
    got, grads = run(layer, x, active, state, True, monkeypatch)
    for a, b in zip(got, expected):
        assert torch.equal(a, b)
    for a, b in zip(grads, expected_grads):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


def test_gradcheck(monkeypatch):
    monkeypatch.setattr(lstm, "USE_RECURRENCE", True)
    layer = random_layer(torch.float64, inputs=3, cells=4, projection=2, scale=1.0, clips=(0.8, 0.4))
    x, active, state = random_batch(layer, (4, 3, 1), torch.float64)
    names = [name for name, _ in layer.named_parameters()]

    def f(x, h0, c0, *weights):
        out, (h, c) = torch.func.functional_call(layer, dict(zip(names, weights)), (x, active, (h0, c0)))
        return out, h, c

    inputs = [t.clone().requires_grad_() for t in (x, *state, *layer.parameters())]
    out, _, c = f(*inputs)
    assert (out.abs() == 0.4).any() and (c.abs() == 0.8).any()  # both clips act
    assert torch.autograd.gradcheck(f, inputs)


def test_bfloat16_gradients_are_as_close_to_float32_as_the_step_loops(monkeypatch):
    """Relative (Frobenius) difference of each gradient to the float32 one: at most 6 % (observed 0.4-4 %; bfloat16
    keeps 8 bits, and where bfloat16 moves a value across a clip the gradient there changes), and at most 1.25 x the
    step-by-step autocast path's + 0.005 (observed within 0.9-1.2 x)."""
    layer = random_layer(torch.float32, inputs=32, cells=64, projection=16, scale=0.15, clips=(3.0, 0.5))
    x, active, state = random_batch(layer, (10, 9, 7, 7, 3, 1), torch.float32)
    _, reference = run(layer, x, active, state, True, monkeypatch)
    _, old = run(layer, x, active, state, False, monkeypatch, bfloat16=True)
    _, new = run(layer, x, active, state, True, monkeypatch, bfloat16=True)
    for name, r, a, b in zip(["inputs", "h0", "c0", *dict(layer.named_parameters())], reference, old, new):
        assert b.dtype == torch.float32
        error, old_error = float((b - r).norm() / r.norm()), float((a - r).norm() / r.norm())
        assert 0 < error < 0.06 and error < 1.25 * old_error + 0.005, (name, error, old_error)


class Casts(TorchDispatchMode):
    """Shapes of the float32 -> bfloat16 copies made while active."""

    def __init__(self):
        super().__init__()
        self.shapes = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func is torch.ops.aten._to_copy.default and out.dtype == torch.bfloat16 and args[0].dtype == torch.float32:
            self.shapes.append(tuple(out.shape))
        return out


def test_bfloat16_casts_the_weights_once_per_call(monkeypatch):
    layer = random_layer(torch.float32, inputs=24, cells=64, projection=16, scale=0.3, clips=(3.0, 3.0))
    x, active, state = random_batch(layer, LENGTHS["ragged"], torch.float32)
    casts = Casts()
    with casts:
        run(layer, x, active, state, True, monkeypatch, bfloat16=True)
    assert casts.shapes.count(tuple(layer.state_weight.shape)) == 1
    assert casts.shapes.count(tuple(layer.projection.shape)) == 1


def test_inference_keeps_the_step_loop(monkeypatch):
    layer = random_layer(torch.float32)
    x, active, state = random_batch(layer, LENGTHS["ragged"], torch.float32)
    monkeypatch.setattr(lstm._Recurrence, "apply", lambda *a: pytest.fail("_Recurrence ran without autograd"))
    with torch.no_grad():
        layer(x, active, state)
    layer.requires_grad_(False)
    layer(x, active, state)


@pytest.mark.parametrize("precision", ["float32", "bfloat16"])
def test_a_pretraining_step_matches_the_step_loops(tmp_path, precision, monkeypatch):
    """Both directions, two layers, the residual, dropout, carried state: the same loss (float32: the same forward),
    and the updated weights close (float32: to rounding; bfloat16: to its accuracy)."""
    trainers = [tiny_trainer(tmp_path, precision) for _ in range(2)]
    _, f_in, f_next, b_in, b_next = next(trainers[0].train_text.window_pairs(trainers[0].train_text.corpus.ids, 8, 10))
    losses = []
    for trainer, recurrence in zip(trainers, (False, True)):
        monkeypatch.setattr(lstm, "USE_RECURRENCE", recurrence)
        torch.manual_seed(5)
        losses.append(trainer.train_step(f_in, f_next, b_in, b_next))
    if precision == "float32":
        assert losses[0] == losses[1]
    else:
        assert abs(losses[0] - losses[1]) < 1e-3 * losses[0]
    tolerance = 1e-5 if precision == "float32" else 2e-3
    for (name, a), b in zip(trainers[0].model.named_parameters(), trainers[1].model.parameters()):
        torch.testing.assert_close(a, b, rtol=tolerance, atol=tolerance, msg=name)
