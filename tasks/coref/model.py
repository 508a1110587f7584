"""allennlp-models' coreference model (Lee et al. 2017) with its feedforward input sizes computed, not configured.

The span representation g_i = [x*_start; x*_end; x_head; width feature] (Lee et al. 2017, Sec. 4) has size
2 * context_dim + feature_size + token_dim, and the antecedent scorer's input [g_i; g_j; g_i * g_j; distance feature]
has 3 * span_dim + feature_size. allennlp-models' ``coref`` takes both sizes from the config, but with ELMo the token
size (input placement) or the context size (output placement, [h; ELMo'] on the context LSTM) grows by the ELMo
dimension, which a jsonnet config cannot read from the biLM options file. This subclass builds the two feedforwards
from the embedder's and the context layer's output sizes. It also reports MUC, B3 and CEAF-phi4 F1 next to their
mean (``coref_f1``, the paper's "average F1", Table 1), scored without gold singletons as on OntoNotes, and the same
with them (``coref_f1_with_singletons``; ``tasks.coref.metric``).

``speaker_genre_features``: e2e-coref's metadata features (use_metadata, experiments.conf:55 at commit 53c4116;
coref_model.py:260-267): a same-speaker embedding (speaker of the two spans' first words equal or not) and a genre
embedding appended to every span pair's features, as Lee et al. (2017) Sec. 4 [g_i; g_j; g_i * g_j; phi(i, j)].
allennlp-models' model has only the distance feature. The reader supplies ``speaker_ids`` and ``genre``
(``coref_conll2012`` with ``speaker_genre: true``). allennlp-models does not hand the kept spans to the method that
builds pair embeddings, so ``_distance_pruning`` recomputes them from the mention scores (the same ``masked_topk`` on
the same tensors) and checks the result against the scores it was given.
"""
from typing import Any, Dict, List, Optional

import torch
from allennlp.common import Lazy
from allennlp.data import TextFieldTensors, Vocabulary
from allennlp.models import Model
from allennlp.modules import Embedding, FeedForward, Seq2SeqEncoder, TextFieldEmbedder
from allennlp.nn import util
from allennlp_models.coref.models.coref import CoreferenceResolver

from tasks.coref.metric import CorefScores
from tasks.coref.reader import GENRES


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
        speaker_genre_features: bool = False,
        **kwargs,
    ) -> None:
        span_dim = 2 * context_layer.get_output_dim() + feature_size + text_field_embedder.get_output_dim()
        pair_features = feature_size * (3 if speaker_genre_features else 1)  # distance [+ same speaker, genre]
        super().__init__(
            vocab,
            text_field_embedder,
            context_layer,
            mention_feedforward.construct(input_dim=span_dim),
            antecedent_feedforward.construct(input_dim=3 * span_dim + pair_features),
            feature_size,
            **kwargs,
        )
        if kwargs.get("coarse_to_fine") and speaker_genre_features:
            raise ValueError("coref_sized: speaker_genre_features works with distance pruning only "
                             "(coarse_to_fine: false), found coarse_to_fine: true")
        # allennlp-models' metric (coref.py:129) scored in two views: without and with gold singletons
        self._conll_coref_scores = CorefScores()
        self._speaker_genre = speaker_genre_features
        if speaker_genre_features:
            self._same_speaker_embedding = Embedding(embedding_dim=feature_size, num_embeddings=2)
            self._genre_embedding = Embedding(embedding_dim=feature_size, num_embeddings=len(GENRES) + 1)
            self._mention_scorer.register_forward_hook(self._keep_mention_scores)
        self._batch: Optional[tuple] = None  # (spans, speaker_ids, genre) of the batch in forward
        self._all_mention_scores: Optional[torch.Tensor] = None
        self.pair_metadata_features: Optional[torch.Tensor] = None  # the last batch's, for tests

    def forward(  # type: ignore
        self,
        text: TextFieldTensors,
        spans: torch.IntTensor,
        span_labels: torch.IntTensor = None,
        metadata: List[Dict[str, Any]] = None,
        speaker_ids: torch.LongTensor = None,
        genre: torch.LongTensor = None,
    ) -> Dict[str, torch.Tensor]:
        if self._speaker_genre:
            if speaker_ids is None or genre is None:
                raise ValueError("coref_sized with speaker_genre_features needs the reader's speaker_ids and genre "
                                 "fields (coref_conll2012 with speaker_genre: true); found none")
            self._batch = (spans, speaker_ids, genre)
        try:
            return super().forward(text, spans, span_labels, metadata)
        finally:
            self._batch, self._all_mention_scores = None, None

    def _keep_mention_scores(self, module, inputs, output) -> None:
        self._all_mention_scores = output.squeeze(-1)

    def _distance_pruning(self, top_span_embeddings, top_span_mention_scores, max_antecedents):
        pruned = super()._distance_pruning(top_span_embeddings, top_span_mention_scores, max_antecedents)
        if self._batch is not None:
            spans, speaker_ids, genre = self._batch
            # The kept spans, as forward chose them: the top k mention scores among the real spans, in text order.
            _, top_mask, top_indices = util.masked_topk(self._all_mention_scores, spans[:, :, 0] >= 0,
                                                        top_span_embeddings.size(1))
            recomputed = self._all_mention_scores.gather(1, top_indices)
            if not torch.equal(recomputed[top_mask], top_span_mention_scores[top_mask]):
                raise RuntimeError("coref_sized: the recomputed kept spans do not match allennlp-models' choice")
            top_starts = spans[:, :, 0].clamp(min=0).gather(1, top_indices)
            top_speakers = speaker_ids.gather(1, top_starts)  # speaker of each kept span's first word
            antecedent_indices = pruned[3]  # (batch, k, max_antecedents), into the kept spans
            antecedent_speakers = top_speakers.gather(1, antecedent_indices.flatten(1)).view_as(antecedent_indices)
            same_speaker = (antecedent_speakers == top_speakers.unsqueeze(-1)).long()
            genre_features = self._genre_embedding(genre.view(-1, 1, 1)).expand(*same_speaker.shape, -1)
            self.pair_metadata_features = torch.cat([self._same_speaker_embedding(same_speaker), genre_features], -1)
        return pruned

    def _compute_span_pair_embeddings(self, top_span_embeddings, antecedent_embeddings, antecedent_offsets):
        pairs = super()._compute_span_pair_embeddings(top_span_embeddings, antecedent_embeddings, antecedent_offsets)
        if self._batch is None:
            return pairs
        return torch.cat([pairs, self.pair_metadata_features], -1)

    def get_metrics(self, reset: bool = False) -> Dict[str, float]:
        f1s = self._conll_coref_scores.f1s()  # read before super() resets them
        return {**super().get_metrics(reset), **f1s}


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
