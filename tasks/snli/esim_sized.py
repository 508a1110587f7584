"""ESIM (Chen et al. 2017, the paper's SNLI baseline) with its projection layer sized from the encoder.

With output ELMo the input encoder's output is [h_k; ELMo'_k] (paper Sec. 3.3, "at the output of the task RNN"),
so the enhanced representation [a; b; a-b; a*b] that feeds ESIM's projection feedforward grows by 4x the ELMo size.
A config cannot know that size, so this subclass builds ``projection_feedforward`` with
input_dim = 4 * encoder.get_output_dim(). Everything else is allennlp-models' ``esim``.
"""
from allennlp.common import Lazy
from allennlp.models import Model
from allennlp.modules import FeedForward, Seq2SeqEncoder
from allennlp_models.pair_classification.models.esim import ESIM


@Model.register("esim_sized")
class SizedESIM(ESIM):
    def __init__(self, encoder: Seq2SeqEncoder, projection_feedforward: Lazy[FeedForward], **kwargs) -> None:
        super().__init__(
            encoder=encoder,
            projection_feedforward=projection_feedforward.construct(input_dim=4 * encoder.get_output_dim()),
            **kwargs,
        )
