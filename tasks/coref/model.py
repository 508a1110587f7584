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

Two computations are rearranged for speed on CPU (docs/speed.md, "SQuAD and coreference training"); a profile of
the small model put the antecedent scorer's first layer and the attention head's gathers at over half of a step:
- the antecedent scorer's first layer on the concatenation [g_i; g_j; g_i * g_j; phi(i, j)] (e2e-coref
  coref_model.py:281-288 at commit 53c4116, util.py:68-91; allennlp-models coref.py:747-763 and 857-859) is computed
  as W1 g_i + W2 g_j + W3 (g_i * g_j) + W4 phi(i, j), with W1 g_i and W2 g_j once per kept span rather than once per
  pair, and without building the concatenation: the same function, the same dropout draws, values equal to float
  rounding (the sum is split into four products);
- the attention head (allennlp's SelfAttentiveSpanExtractor) weighs each window of words by one matrix product for
  all spans starting there, instead of gathering every span's words (``WindowedSpanExtractor``): the same attention
  weights, the weighted sums equal to float rounding.
``use_allennlp_paths`` puts allennlp-models' computation back (tests, the benchmark's comparison).
"""
import types
from typing import Any, Dict, List, Optional

import torch
from allennlp.common import Lazy
from allennlp.data import TextFieldTensors, Vocabulary
from allennlp.models import Model
from allennlp.modules import Embedding, FeedForward, Seq2SeqEncoder, TextFieldEmbedder
from allennlp.modules.span_extractors import SelfAttentiveSpanExtractor
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
        # the same module and parameters, its gathers rearranged (module docstring)
        self._attentive_span_extractor.__class__ = WindowedSpanExtractor
        self._batch: Optional[tuple] = None  # (spans, speaker_ids, genre) of the batch in forward
        self._antecedent_indices: Optional[torch.Tensor] = None  # the kept spans' antecedents, in forward
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
            self._batch, self._all_mention_scores, self._antecedent_indices = None, None, None

    def _keep_mention_scores(self, module, inputs, output) -> None:
        self._all_mention_scores = output.squeeze(-1)

    def _distance_pruning(self, top_span_embeddings, top_span_mention_scores, max_antecedents):
        pruned = super()._distance_pruning(top_span_embeddings, top_span_mention_scores, max_antecedents)
        self._antecedent_indices = pruned[3]
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

    def _coarse_to_fine_pruning(self, *args):
        pruned = super()._coarse_to_fine_pruning(*args)
        self._antecedent_indices = pruned[3]
        return pruned

    def _compute_coreference_scores(self, top_span_embeddings, top_antecedent_embeddings,
                                    top_partial_coreference_scores, top_antecedent_mask, top_antecedent_offsets):
        """allennlp-models' method (coref.py:807-871) with the antecedent feedforward's first layer split over the
        parts of the pair embedding (module docstring)."""
        if self._antecedent_indices is None:  # called outside forward: allennlp-models' own computation
            return super()._compute_coreference_scores(top_span_embeddings, top_antecedent_embeddings,
                                                       top_partial_coreference_scores, top_antecedent_mask,
                                                       top_antecedent_offsets)
        feedforward = self._antecedent_feedforward._module
        first = feedforward._linear_layers[0]
        span_dim = top_span_embeddings.size(-1)
        w_target, w_antecedent, w_product, w_features = first.weight.split(
            [span_dim, span_dim, span_dim, first.in_features - 3 * span_dim], dim=1)
        features = self._distance_embedding(
            util.bucket_values(top_antecedent_offsets, num_total_buckets=self._num_distance_buckets))
        if self._batch is not None:  # the same-speaker and genre features follow the distance (as in the concatenation)
            features = torch.cat([features, self.pair_metadata_features], -1)

        def linear(x, weight, bias=None):  # float32 sums also under bfloat16 autocast, as one layer accumulates
            return torch.nn.functional.linear(x, weight, bias).float()

        per_antecedent = util.batched_index_select(linear(top_span_embeddings, w_antecedent), self._antecedent_indices)
        hidden = (linear(top_span_embeddings, w_target, first.bias).unsqueeze(2) + per_antecedent
                  + linear(top_antecedent_embeddings * top_span_embeddings.unsqueeze(2), w_product)
                  + linear(features, w_features))
        hidden = feedforward._dropout[0](feedforward._activations[0](hidden))
        for layer, activation, dropout in zip(feedforward._linear_layers[1:], feedforward._activations[1:],
                                              feedforward._dropout[1:]):
            hidden = dropout(activation(layer(hidden)))
        # from here as allennlp-models (coref.py:857-871)
        antecedent_scores = self._antecedent_scorer(hidden).squeeze(-1)
        antecedent_scores += top_partial_coreference_scores
        antecedent_scores = util.replace_masked_values(
            antecedent_scores, top_antecedent_mask, util.min_value_of_dtype(antecedent_scores.dtype))
        dummy_scores = antecedent_scores.new_zeros(antecedent_scores.size(0), antecedent_scores.size(1), 1)
        return torch.cat([dummy_scores, antecedent_scores], -1)

    def _compute_span_pair_embeddings(self, top_span_embeddings, antecedent_embeddings, antecedent_offsets):
        pairs = super()._compute_span_pair_embeddings(top_span_embeddings, antecedent_embeddings, antecedent_offsets)
        if self._batch is None:
            return pairs
        return torch.cat([pairs, self.pair_metadata_features], -1)

    def get_metrics(self, reset: bool = False) -> Dict[str, float]:
        f1s = self._conll_coref_scores.f1s()  # read before super() resets them
        return {**super().get_metrics(reset), **f1s}


class WindowedSpanExtractor(SelfAttentiveSpanExtractor):
    """allennlp's SelfAttentiveSpanExtractor (self_attentive_span_extractor.py:66-95: a softmax over each span's
    words' attention logits, then the weighted sum of its words) computed per window rather than per span. allennlp
    gathers every span's words into a (spans x width x dim) tensor, about ten times the words' own size, and
    multiplies and sums it elementwise (in the small coreference model 9,000 spans x 10 x 604, over half a training
    step's time with its backward). Here the words from each position t on, x_t ... x_{t+W-1}, are a strided view
    of the words; the attention weights of every span (t, t + width), width < W, are allennlp's masked softmax over
    the same logits with the same mask (the same values), and all of them are applied to their window by one batched
    matrix product ((positions) x W x W by (positions) x W x dim); each span then takes its row. The weighted sum is
    a matrix product instead of a product and a sum: equal to float rounding."""

    def _embed_spans(self, sequence_tensor, span_indices, sequence_mask=None, span_indices_mask=None):
        batch, length, _ = sequence_tensor.shape
        starts, widths = span_indices[..., 0], span_indices[..., 1] - span_indices[..., 0]
        window = int(widths.max()) + 1  # as allennlp's batched_span_select: the longest span of the batch
        logits = self._global_attention(sequence_tensor).squeeze(-1)  # (batch, length)
        # (batch, length, window): the logits of t, ..., t + window - 1; beyond the text 0 and masked
        logit_windows = torch.nn.functional.pad(logits, (0, window - 1)).unfold(1, window, 1)
        offsets = torch.arange(window, device=logits.device)
        in_text = (torch.arange(length, device=logits.device).unsqueeze(1) + offsets) < length  # (length, window)
        # mask[t, width, w]: word w of the span (t, t + width), as batched_span_select masks it
        mask = (offsets.view(1, 1, -1) <= offsets.view(1, -1, 1)) & in_text.unsqueeze(1)
        weights = util.masked_softmax(logit_windows.unsqueeze(2).expand(-1, -1, window, -1), mask.unsqueeze(0))
        word_windows = torch.nn.functional.pad(sequence_tensor, (0, 0, 0, window - 1)).unfold(1, window, 1)
        attended = torch.matmul(weights, word_windows.transpose(-1, -2))  # (batch, length, width, dim)
        return util.batched_index_select(attended.flatten(1, 2), starts * window + widths)


def use_allennlp_paths(model: SizedCoreferenceResolver) -> None:
    """allennlp-models' own computation of the antecedent scores and the attention head, in place (tests, the
    benchmark's comparison)."""
    model._attentive_span_extractor.__class__ = SelfAttentiveSpanExtractor
    model._compute_coreference_scores = types.MethodType(CoreferenceResolver._compute_coreference_scores, model)


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
