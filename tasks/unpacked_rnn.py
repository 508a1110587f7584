"""``unpacked_gru`` / ``unpacked_lstm``: allennlp's ``gru`` / ``lstm`` encoders (one layer), computed without a
PackedSequence on CPU, so that the backward pass is linear in the sequence length.

Why: on CPU, torch runs a PackedSequence through an RNN one time step at a time and takes each step's rows with
``narrow``; autograd's backward of every ``narrow`` writes a zero tensor the size of the whole packed input and adds
it to the gradient (``SliceBackward0``, ``aten::fill_``, ``aten::add_``), so the backward grows with the square of the
length. In the small SQuAD model (passages up to 400 tokens) those three took about half of a training step's time
(torch.profiler, 10 steps, 1 thread). On the padded tensor torch unbinds the time steps instead, whose backward is one
``stack``. The reverse direction reads each sequence reversed within its own length (one gather), so padding never
enters a valid position's state, as with packing: outputs and gradients are allennlp's up to float rounding
(``tests/test_unpacked_rnn.py``; speed: ``tools/rnn_backward_bench.py``).

Drop-in for the registered ``gru`` / ``lstm`` (same constructor keys, same parameter names ``_module.weight_ih_l0``...,
the same initial weights for a seed). On CUDA it packs, as allennlp does (cuDNN runs packed sequences well).
"""
import torch
from allennlp.common.checks import ConfigurationError
from allennlp.modules.seq2seq_encoders import Seq2SeqEncoder
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence


class _UnpackedRnn(Seq2SeqEncoder):
    rnn_class = None

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 dropout: float = 0.0, bidirectional: bool = False, stateful: bool = False) -> None:
        super().__init__(stateful=False)
        name = type(self).__name__
        if num_layers != 1 or stateful:
            raise ConfigurationError(f"{name}: supports num_layers 1 and stateful false only, "
                                     f"got num_layers {num_layers}, stateful {stateful}")
        # Created as allennlp's wrapper creates it (PytorchSeq2SeqWrapper._module): same names, same initial weights.
        self._module = self.rnn_class(input_size, hidden_size, num_layers=1, bias=bias, dropout=dropout,
                                      batch_first=True, bidirectional=bidirectional)
        self._bidirectional = bidirectional

    def get_input_dim(self) -> int:
        return self._module.input_size

    def get_output_dim(self) -> int:
        return self._module.hidden_size * (2 if self._bidirectional else 1)

    def is_bidirectional(self) -> bool:
        return self._bidirectional

    def forward(self, inputs: torch.Tensor, mask: torch.BoolTensor, hidden_state=None) -> torch.Tensor:
        if hidden_state is not None:
            raise ConfigurationError(f"{type(self).__name__}: an initial hidden state is not supported")
        mask = mask.bool()
        batch, steps, _ = inputs.shape
        lengths = mask.sum(1)
        positions = torch.arange(steps, device=inputs.device)
        if not torch.equal(mask, positions < lengths.unsqueeze(1)):
            raise ValueError(f"{type(self).__name__}: the mask must be True on a prefix of every row (padding last)")
        if inputs.is_cuda:
            packed = pack_padded_sequence(inputs, lengths.clamp(min=1).cpu(), batch_first=True, enforce_sorted=False)
            outputs, _ = pad_packed_sequence(self._module(packed)[0], batch_first=True, total_length=steps)
            return outputs * mask.unsqueeze(-1)
        weights = self._module._flat_weights
        per_direction = len(weights) // (2 if self._bidirectional else 1)
        outputs = [self._run(inputs, weights[:per_direction])]
        if self._bidirectional:
            # Row b read backwards over its own length (position t <- length_b - 1 - t); padding stays in place.
            index = torch.where(mask, lengths.unsqueeze(1) - 1 - positions, positions).unsqueeze(-1)
            reverse = lambda t: t.gather(1, index.expand(-1, -1, t.size(-1)))  # noqa: E731 (its own inverse)
            outputs.append(reverse(self._run(reverse(inputs), weights[per_direction:])))
        return torch.cat(outputs, -1) * mask.unsqueeze(-1)

    def _initial_state(self, inputs: torch.Tensor) -> torch.Tensor:
        return inputs.new_zeros(1, inputs.size(0), self._module.hidden_size)


@Seq2SeqEncoder.register("unpacked_gru")
class UnpackedGru(_UnpackedRnn):
    rnn_class = torch.nn.GRU

    def _run(self, inputs, weights):
        return torch._VF.gru(inputs, self._initial_state(inputs), weights, self._module.bias, 1, 0.0,
                             self.training, False, True)[0]


@Seq2SeqEncoder.register("unpacked_lstm")
class UnpackedLstm(_UnpackedRnn):
    rnn_class = torch.nn.LSTM

    def _run(self, inputs, weights):
        state = (self._initial_state(inputs), self._initial_state(inputs))
        return torch._VF.lstm(inputs, state, weights, self._module.bias, 1, 0.0, self.training, False, True)[0]
