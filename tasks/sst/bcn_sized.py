"""BCN (McCann et al. 2017, the paper's SST-5 baseline) with our ELMo embedder and layers sized from their inputs.

We do not use BCN's native ``elmo`` argument: ELMo comes through the text field embedder like in every other task
(input placement) and through the ``elmo_output`` wrapper around the integrator (output placement, paper Sec. 3.3).
Their sizes are not known in a config, so this subclass builds the pre-encode feedforward with
input_dim = text_field_embedder.get_output_dim() and the output layer with input_dim = 4 * integrator output
(BCN pools max, min, mean and self-attentive). Everything else is allennlp-models' ``bcn``.
"""

from allennlp.common import Lazy
from allennlp.models import Model
from allennlp.modules import FeedForward, Maxout, Seq2SeqEncoder, TextFieldEmbedder
from allennlp_models.classification.models.biattentive_classification_network import (
    BiattentiveClassificationNetwork,
)


@Model.register("bcn_sized")
class SizedBCN(BiattentiveClassificationNetwork):
    def __init__(
        self,
        text_field_embedder: TextFieldEmbedder,
        pre_encode_feedforward: Lazy[FeedForward],
        integrator: Seq2SeqEncoder,
        output_layer: Lazy[Maxout],
        **kwargs,
    ) -> None:
        super().__init__(
            text_field_embedder=text_field_embedder,
            pre_encode_feedforward=pre_encode_feedforward.construct(
                input_dim=text_field_embedder.get_output_dim()
            ),
            integrator=integrator,
            output_layer=output_layer.construct(input_dim=4 * integrator.get_output_dim()),
            **kwargs,
        )
