"""allennlp-models' coreference model (Lee et al. 2017) with its feedforward input sizes computed, not configured.

The span representation g_i = [x*_start; x*_end; x_head; width feature] (Lee et al. 2017, Sec. 4) has size
2 * context_dim + feature_size + token_dim, and the antecedent scorer's input [g_i; g_j; g_i * g_j; distance feature]
has 3 * span_dim + feature_size. allennlp-models' ``coref`` takes both sizes from the config, but with ELMo the token
size (input placement) or the context size (output placement, [h; ELMo'] on the context LSTM) grows by the ELMo
dimension, which a jsonnet config cannot read from the biLM options file. This subclass builds the two feedforwards
from the embedder's and the context layer's output sizes. It also reports MUC, B3 and CEAF-phi4 F1 next to their
mean (``coref_f1``, the paper's "average F1", Table 1).
"""
from typing import Dict

import torch
from allennlp.common import Lazy
from allennlp.data import Vocabulary
from allennlp.models import Model
from allennlp.modules import FeedForward, Seq2SeqEncoder, TextFieldEmbedder
from allennlp_models.coref.models.coref import CoreferenceResolver

CONLL_METRIC_NAMES = ("muc", "b3", "ceafe")  # the order of ConllCorefScores' scorers


@Model.register("coref_sized")
class SizedCoreferenceResolver(CoreferenceResolver):
    def __init__(
        self,
        vocab: Vocabulary,
        text_field_embedder: TextFieldEmbedder,
        context_layer: Seq2SeqEncoder,
        mention_feedforward: Lazy[FeedForward],
        antecedent_feedforward: Lazy[FeedForward],
        feature_size: int,
        **kwargs,
    ) -> None:
        span_dim = 2 * context_layer.get_output_dim() + feature_size + text_field_embedder.get_output_dim()
        super().__init__(
            vocab,
            text_field_embedder,
            context_layer,
            mention_feedforward.construct(input_dim=span_dim),
            antecedent_feedforward.construct(input_dim=3 * span_dim + feature_size),
            feature_size,
            **kwargs,
        )

    def get_metrics(self, reset: bool = False) -> Dict[str, float]:
        per_metric_f1 = {
            f"{name}_f1": scorer.get_f1()
            for name, scorer in zip(CONLL_METRIC_NAMES, self._conll_coref_scores.scorers)
        }
        return {**super().get_metrics(reset), **per_metric_f1}


@Seq2SeqEncoder.register("output_dropout")
class OutputDropout(Seq2SeqEncoder):
    """An encoder followed by dropout on its output: e2e-coref drops 20 % of the context LSTM's outputs before the span
    representations (coref_model.py:170 at commit 53c4116, dropout_rate 0.2 in experiments.conf:62);
    allennlp-models' coref model has no dropout there."""

    def __init__(self, encoder: Seq2SeqEncoder, dropout: float) -> None:
        super().__init__()
        self._encoder = encoder
        self._dropout = torch.nn.Dropout(dropout)

    def forward(self, inputs: torch.Tensor, mask: torch.BoolTensor) -> torch.Tensor:
        return self._dropout(self._encoder(inputs, mask))

    def get_input_dim(self) -> int:
        return self._encoder.get_input_dim()

    def get_output_dim(self) -> int:
        return self._encoder.get_output_dim()

    def is_bidirectional(self) -> bool:
        return self._encoder.is_bidirectional()
