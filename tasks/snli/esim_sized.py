"""ESIM (Chen et al. 2017, the paper's SNLI baseline) with its projection layer sized from the encoder.

With output ELMo the input encoder's output is [h_k; ELMo'_k] (paper Sec. 3.3, "at the output of the task RNN"),
so the enhanced representation [a; b; a-b; a*b] that feeds ESIM's projection feedforward grows by 4x the ELMo size.
A config cannot know that size, so this subclass builds ``projection_feedforward`` with
input_dim = 4 * encoder.get_output_dim(). ``attention_dropout``: dropout on that enhanced representation, i.e.
after the attention layer (allennlp-models' ESIM has none there, esim.py:196-197); the paper's SNLI ELMo model
added 50 % (supplement A.3; see tasks/snli/README.md). Everything else is allennlp-models' ``esim``.
"""
import torch
from allennlp.common import Lazy
from allennlp.models import Model
from allennlp.modules import FeedForward, Seq2SeqEncoder
from allennlp_models.pair_classification.models.esim import ESIM


class _DropoutThen(torch.nn.Module):
    def __init__(self, dropout: float, module: torch.nn.Module) -> None:
        super().__init__()
        self.dropout, self.module = torch.nn.Dropout(dropout), module

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        return self.module(self.dropout(inputs))


@Model.register("esim_sized")
class SizedESIM(ESIM):
    def __init__(self, encoder: Seq2SeqEncoder, projection_feedforward: Lazy[FeedForward],
                 attention_dropout: float = 0.0, **kwargs) -> None:
        super().__init__(
            encoder=encoder,
            projection_feedforward=projection_feedforward.construct(input_dim=4 * encoder.get_output_dim()),
            **kwargs,
        )
        if attention_dropout > 0:
            self._projection_feedforward = _DropoutThen(attention_dropout, self._projection_feedforward)
