"""tasks/unpacked_rnn.py against allennlp's own ``gru`` / ``lstm`` encoders (PytorchSeq2SeqWrapper over a packed
sequence), the reference: same initial weights for a seed, same outputs and gradients on a ragged batch."""
import pytest
import torch
from allennlp.modules.seq2seq_encoders import Seq2SeqEncoder

import tasks.unpacked_rnn  # noqa: F401 (registers the encoders)


def _pair(kind, bidirectional, seed=3):
    torch.manual_seed(seed)
    reference = Seq2SeqEncoder.by_name(kind)(input_size=7, hidden_size=5, bidirectional=bidirectional)
    torch.manual_seed(seed)
    ours = Seq2SeqEncoder.by_name(f"unpacked_{kind}")(input_size=7, hidden_size=5, bidirectional=bidirectional)
    return reference, ours


def _run(encoder, inputs, mask, grad_out):
    x = inputs.clone().requires_grad_(True)
    out = encoder(x, mask)
    (out * grad_out[..., : out.size(-1)]).sum().backward()
    return out.detach(), x.grad, {n: p.grad for n, p in encoder.named_parameters()}


@pytest.mark.parametrize("kind", ["gru", "lstm"])
@pytest.mark.parametrize("bidirectional", [True, False])
def test_outputs_and_gradients_are_allennlps(kind, bidirectional):
    reference, ours = _pair(kind, bidirectional)
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in reference.named_parameters()]
    for (_, a), (_, b) in zip(reference.named_parameters(), ours.named_parameters()):
        assert torch.equal(a, b)  # same initial weights for the same seed
    lengths = torch.tensor([9, 4, 1, 0, 9, 6])
    mask = torch.arange(9)[None] < lengths[:, None]
    torch.manual_seed(0)
    inputs, grad_out = torch.randn(6, 9, 7), torch.randn(6, 9, 10)
    expected, got = _run(reference, inputs, mask, grad_out), _run(ours, inputs, mask, grad_out)
    assert got[0].shape == expected[0].shape
    torch.testing.assert_close(got[0], expected[0], atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(got[1], expected[1], atol=1e-6, rtol=1e-5)
    for name, grad in expected[2].items():
        torch.testing.assert_close(got[2][name], grad, atol=1e-5, rtol=1e-5)
    assert got[0][3].abs().sum() == 0 and got[0][1, 4:].abs().sum() == 0  # padding and empty rows are zero


def test_a_mask_with_padding_first_is_refused():
    _, ours = _pair("gru", True)
    mask = torch.tensor([[False, True, True]])
    with pytest.raises(ValueError, match="prefix"):
        ours(torch.randn(1, 3, 7), mask)


def test_the_squad_config_uses_it_and_allennlp_builds_it():
    from allennlp.common import Params
    from allennlp.modules.seq2seq_encoders import Seq2SeqEncoder as Registry
    encoder = Registry.from_params(Params({"type": "unpacked_gru", "input_size": 4, "hidden_size": 3,
                                           "bidirectional": True}))
    assert encoder.get_output_dim() == 6 and encoder.get_input_dim() == 4
    text = open("jsonnet_configs/squad.jsonnet").read()
    assert "type: 'unpacked_gru'" in text and "type: 'gru'" not in text


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
@pytest.mark.parametrize("kind", ["gru", "lstm"])
def test_on_cuda_it_gives_what_it_gives_on_cpu(kind):
    _, ours = _pair(kind, True)
    lengths = torch.tensor([9, 4, 1, 0, 9, 6])
    mask = torch.arange(9)[None] < lengths[:, None]
    torch.manual_seed(0)
    inputs, grad_out = torch.randn(6, 9, 7), torch.randn(6, 9, 10)
    expected = _run(ours, inputs, mask, grad_out)
    ours.zero_grad()
    # cuDNN's RNNs run in TF32 by default on Ampere and later (torch.backends.cudnn.allow_tf32): 4e-4 from the CPU's
    # float32 on an H100; the comparison is of the arithmetic, so in full float32
    with torch.backends.cudnn.flags(enabled=True, allow_tf32=False):
        got = _run(ours.cuda(), inputs.cuda(), mask.cuda(), grad_out.cuda())
    torch.testing.assert_close(got[0].cpu(), expected[0], atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(got[1].cpu(), expected[1], atol=1e-5, rtol=1e-4)
