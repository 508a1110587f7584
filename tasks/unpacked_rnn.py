"""``unpacked_gru`` / ``unpacked_lstm``: allennlp's ``gru`` / ``lstm`` encoders (one layer), computed without a
PackedSequence on CPU, so that the backward pass is linear in the sequence length.

Why: on CPU, torch runs a PackedSequence through an RNN one time step at a time and takes each step's rows with
``narrow``; autograd's backward of every ``narrow`` writes a zero tensor the size of the whole packed input and adds
it to the gradient (``SliceBackward0``, ``aten::fill_``, ``aten::add_``), so the backward grows with the square of the
length. In the small SQuAD model (passages up to 400 tokens) those three took about half of a training step's time
(torch.profiler, 10 steps, 1 thread). On the padded tensor torch unbinds the time steps instead, whose backward is one
``stack``. The reverse direction reads each sequence reversed within its own length (one gather), so padding never
enters a valid position's state, as with packing: outputs and gradients are allennlp's up to float rounding
(``tests/tasks/test_unpacked_rnn.py``; speed: ``tools/rnn_backward_bench.py``).

Drop-in for the registered ``gru`` / ``lstm`` (same constructor keys, same parameter names ``_module.weight_ih_l0``...,
the same initial weights for a seed). On CUDA it packs, as allennlp does (cuDNN runs packed sequences well).

``unpacked_gru`` on CPU runs its recurrence as one autograd node (``GruRecurrence``, docs/speed.md "SQuAD and
coreference training"): torch's CPU GRU has no oneDNN kernel and records about ten autograd nodes per time step and
direction (the gate matrix product, the chunks, sigmoid, tanh, ...), which at the small SQuAD model's sizes (32
cells, batches of 32, passages up to 400 words) cost far more than their arithmetic. Here the forward runs torch's
own cell arithmetic (aten/src/ATen/native/RNN.cpp GRUCell and FullLayer: the input projection for all steps at
once, then per step linear_hh, r = sigmoid(i_r + h_r), z = sigmoid(i_z + h_z), n = tanh(i_n + r * h_n),
h' = (h - n) * z + n) without recording it, both directions in one loop (batched matrix products), and the backward
is written out: per step the gate derivatives and one batched product for dh, the weight gradients as one product
over all steps. The outputs are torch's to float rounding, bit for bit at the small SQuAD model's 32 cells (r and z
share one sigmoid call here, and torch's kernels take a row's last elements in scalar code, so at other widths a
few elements can differ in the last bit); the gradients equal to float rounding (``tests/tasks/test_task_speed.py``).
``fused_recurrence = False`` on a module gives torch's own GRU back.
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
        directions = [weights[i:i + per_direction] for i in range(0, len(weights), per_direction)]
        # Row b read backwards over its own length (position t <- length_b - 1 - t); padding stays in place.
        index = torch.where(mask, lengths.unsqueeze(1) - 1 - positions, positions).unsqueeze(-1)
        reverse = lambda t: t.gather(1, index.expand(-1, -1, t.size(-1)))  # noqa: E731 (its own inverse)
        return torch.cat(self._run_directions(inputs, directions, reverse), -1) * mask.unsqueeze(-1)

    def _run_directions(self, inputs, directions, reverse) -> list:
        """The output of each direction, (batch, steps, hidden), in the original order of the steps."""
        outputs = [self._run(inputs, directions[0])]
        if len(directions) > 1:
            outputs.append(reverse(self._run(reverse(inputs), directions[1])))
        return outputs

    def _initial_state(self, inputs: torch.Tensor) -> torch.Tensor:
        return inputs.new_zeros(1, inputs.size(0), self._module.hidden_size)


class GruRecurrence(torch.autograd.Function):
    """The GRU recurrence of ``directions`` independent GRUs, one autograd node: input_gates (steps, directions,
    batch, 3 hidden) = W_ih x_t + b_ih of every step, w_hh (directions, 3 hidden, hidden), b_hh (directions,
    3 hidden); returns h_t (steps, directions, batch, hidden) from h_0 = 0. The gate order r, z, n is torch's."""

    @staticmethod
    def forward(ctx, input_gates, w_hh, b_hh):
        hidden = w_hh.size(-1)
        h = input_gates.new_zeros(*input_gates.shape[1:3], hidden)
        w_t, bias = w_hh.transpose(1, 2), b_hh.unsqueeze(1)
        outputs, gates, news = [], [], []
        for step_gates in input_gates.unbind(0):  # as GRUCell (RNN.cpp), in the same order of operations
            gh = torch.baddbmm(bias, h, w_t)
            i_rz, i_n = step_gates.split([2 * hidden, hidden], -1)
            rz = gh[..., :2 * hidden].add_(i_rz).sigmoid_()
            n = i_n.add(gh[..., 2 * hidden:] * rz[..., :hidden]).tanh_()
            h = (h - n).mul_(rz[..., hidden:]).add_(n)
            outputs.append(h)
            gates.append(gh)  # r, z, h_n
            news.append(n)
        outputs = torch.stack(outputs)
        ctx.save_for_backward(outputs, torch.stack(gates), torch.stack(news), w_hh)
        return outputs

    @staticmethod
    def backward(ctx, grad_outputs):
        outputs, gates, news, w_hh = ctx.saved_tensors
        hidden = outputs.size(-1)
        r, z, h_n = gates.split(hidden, -1)
        previous = torch.cat([torch.zeros_like(outputs[:1]), outputs[:-1]])  # h_{t-1}
        # h' = z h + (1 - z) n, n = tanh(i_n + r h_n), r, z = sigmoid(.): the derivatives of the pre-activations
        # per unit of dh', for every step at once
        per_z = (previous - news) * z * (1 - z)
        per_n = (1 - z) * (1 - news * news)
        per_r = h_n * r * (1 - r)  # per unit of the n pre-activation's derivative
        d_gates = torch.empty_like(gates)  # d(W_hh h + b_hh): r, z, h_n parts
        d_new = torch.empty_like(outputs)  # d(i_n), the n pre-activation's derivative
        carry = torch.zeros_like(outputs[0])  # dh_t from step t + 1
        grad_outputs = grad_outputs.contiguous()
        for t in range(len(outputs) - 1, -1, -1):
            dh = grad_outputs[t] + carry
            d_r, d_z, d_hn = d_gates[t].split(hidden, -1)
            torch.mul(dh, per_z[t], out=d_z)
            dn = torch.mul(dh, per_n[t], out=d_new[t])
            torch.mul(dn, per_r[t], out=d_r)
            torch.mul(dn, r[t], out=d_hn)
            carry = torch.baddbmm(dh * z[t], d_gates[t], w_hh)
        by_direction = d_gates.transpose(0, 1).flatten(1, 2)  # (directions, steps x batch, 3 hidden)
        grad_w_hh = by_direction.transpose(1, 2).bmm(previous.transpose(0, 1).flatten(1, 2))
        grad_input_gates = torch.cat([d_gates[..., :2 * hidden], d_new], -1)
        return grad_input_gates, grad_w_hh, by_direction.sum(1)


@Seq2SeqEncoder.register("unpacked_gru")
class UnpackedGru(_UnpackedRnn):
    rnn_class = torch.nn.GRU
    fused_recurrence = True  # GruRecurrence (module docstring); False: torch's own GRU

    def _run_directions(self, inputs, directions, reverse) -> list:
        # under TASK_PRECISION=bfloat16's autocast torch's GRU, as before (the knob's numbers stay its own)
        if not (self.fused_recurrence and self._module.bias) or torch.is_autocast_enabled(inputs.device.type):
            return super()._run_directions(inputs, directions, reverse)
        # each direction's input projection as torch's GRU makes it: on the time-major view (RNN.cpp FullLayer)
        sources = [inputs, reverse(inputs)][:len(directions)]
        input_gates = torch.stack([torch.nn.functional.linear(x.transpose(0, 1), w_ih, b_ih)
                                   for x, (w_ih, _, b_ih, _) in zip(sources, directions)], 1)
        outputs = GruRecurrence.apply(input_gates, torch.stack([d[1] for d in directions]),
                                      torch.stack([d[3] for d in directions]))
        per_direction = [o.transpose(0, 1) for o in outputs.unbind(1)]
        return per_direction[:1] + [reverse(o) for o in per_direction[1:]]

    def _run(self, inputs, weights):
        return torch._VF.gru(inputs, self._initial_state(inputs), weights, self._module.bias, 1, 0.0,
                             self.training, False, True)[0]


@Seq2SeqEncoder.register("unpacked_lstm")
class UnpackedLstm(_UnpackedRnn):
    rnn_class = torch.nn.LSTM

    def _run(self, inputs, weights):
        state = (self._initial_state(inputs), self._initial_state(inputs))
        return torch._VF.lstm(inputs, state, weights, self._module.bias, 1, 0.0, self.training, False, True)[0]
