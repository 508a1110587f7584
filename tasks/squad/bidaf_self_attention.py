"""BiDAF with self-attention (Clark & Gardner 2018, Sec. 3.1): the paper's SQuAD baseline (Peters et al. Sec. 4).

Layers, top to bottom (C&G 2018 Sec. 3.1; sizes in the config):
1. Embedding: the text field embedder (word embeddings + char-CNN, plus input ELMo when configured).
2. Pre-process: a bi-GRU shared by question and passage (the config's ``phrase_encoder``; output ELMo wraps it,
   "after the context/question encoder").
3. Attention (BiDAF): a_ij = w1.h_i + w2.q_j + w3.(h_i * q_j); c_i = sum_j softmax_j(a_ij) q_j;
   q_c = sum_i softmax_i(max_j a_ij) h_i; output [h_i; c_i; h_i * c_i; q_c * c_i] -> linear + ReLU.
4. Self-attention: a bi-GRU, then the same attention of the passage with itself (a_ii = -inf, no q_c part),
   [h_i; c_i; h_i * c_i] -> linear + ReLU, added to the layer's input (residual).
5. Prediction: a bi-GRU -> linear -> start scores; [that GRU's output; the layer input] -> a bi-GRU -> linear
   -> end scores. Loss: cross-entropy of start and end.
Variational dropout on the input of every GRU and of the attention layers. At decoding the best span with
end - start < max_span_length (17 tokens, C&G / document-qa) is taken.
"""
from typing import Any, Dict, List

import torch
from allennlp.data import TextFieldTensors, Vocabulary
from allennlp.models import Model
from allennlp.modules import Seq2SeqEncoder, TextFieldEmbedder
from allennlp.modules.input_variational_dropout import InputVariationalDropout
from allennlp.nn import InitializerApplicator, util
from allennlp.training.metrics import BooleanAccuracy, CategoricalAccuracy

from tasks.squad.squad_v11_eval import SquadV11EmF1


class TriLinearAttention(torch.nn.Module):
    """a_ij = w1.x_i + w2.y_j + w3.(x_i * y_j) (BiDAF's similarity, C&G Sec. 3.1)."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.x_weight = torch.nn.Linear(dim, 1)
        self.y_weight = torch.nn.Linear(dim, 1, bias=False)
        self.product_weight = torch.nn.Parameter(torch.empty(dim).uniform_(-(dim**-0.5), dim**-0.5))

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        # (B, Tx, Ty)
        return (
            self.x_weight(x)
            + self.y_weight(y).transpose(1, 2)
            + torch.bmm(x * self.product_weight, y.transpose(1, 2))
        )


def best_span(start_logits: torch.Tensor, end_logits: torch.Tensor, max_span_length: int) -> torch.Tensor:
    """(B, 2) argmax of start_i + end_j over 0 <= j - i < max_span_length (masked positions hold -inf-like)."""
    length = start_logits.size(1)
    scores = start_logits.unsqueeze(2) + end_logits.unsqueeze(1)  # (B, T, T)
    offsets = torch.arange(length, device=scores.device)
    span_length = offsets.unsqueeze(0) - offsets.unsqueeze(1)  # j - i
    allowed = (span_length >= 0) & (span_length < max_span_length)
    scores = scores.masked_fill(~allowed, torch.finfo(scores.dtype).min)
    flat = scores.view(scores.size(0), -1).argmax(-1)
    return torch.stack([torch.div(flat, length, rounding_mode="floor"), flat % length], dim=-1)


@Model.register("bidaf_self_attention")
class BidafSelfAttention(Model):
    def __init__(
        self,
        vocab: Vocabulary,
        text_field_embedder: TextFieldEmbedder,
        phrase_encoder: Seq2SeqEncoder,
        self_attention_encoder: Seq2SeqEncoder,
        span_start_encoder: Seq2SeqEncoder,
        span_end_encoder: Seq2SeqEncoder,
        linear_dim: int = 200,
        dropout: float = 0.2,
        max_span_length: int = 17,
        initializer: InitializerApplicator = InitializerApplicator(),  # noqa: B008  (allennlp idiom; holds no state)
        **kwargs,
    ) -> None:
        super().__init__(vocab, **kwargs)
        self.text_field_embedder = text_field_embedder
        self.phrase_encoder = phrase_encoder
        self.self_attention_encoder = self_attention_encoder
        self.span_start_encoder = span_start_encoder
        self.span_end_encoder = span_end_encoder
        self.max_span_length = max_span_length
        self.dropout = InputVariationalDropout(dropout)

        encoded_dim = phrase_encoder.get_output_dim()  # includes output ELMo when the wrapper adds it
        self.question_attention = TriLinearAttention(encoded_dim)
        self.attention_projection = torch.nn.Linear(4 * encoded_dim, linear_dim)
        self_attended_dim = self_attention_encoder.get_output_dim()
        self.self_attention = TriLinearAttention(self_attended_dim)
        self.self_attention_projection = torch.nn.Linear(3 * self_attended_dim, linear_dim)
        self.span_start_scorer = torch.nn.Linear(span_start_encoder.get_output_dim(), 1)
        self.span_end_scorer = torch.nn.Linear(span_end_encoder.get_output_dim(), 1)

        self._check_input_dims(text_field_embedder, linear_dim)
        self.span_start_accuracy = CategoricalAccuracy()
        self.span_end_accuracy = CategoricalAccuracy()
        self.span_accuracy = BooleanAccuracy()
        self.squad_metrics = SquadV11EmF1()
        initializer(self)

    def _check_input_dims(self, embedder: TextFieldEmbedder, linear_dim: int) -> None:
        expected = {
            "phrase_encoder": (self.phrase_encoder, embedder.get_output_dim()),
            "self_attention_encoder": (self.self_attention_encoder, linear_dim),
            "span_start_encoder": (self.span_start_encoder, linear_dim),
            "span_end_encoder": (self.span_end_encoder, linear_dim + self.span_start_encoder.get_output_dim()),
        }
        for name, (encoder, dim) in expected.items():
            if encoder.get_input_dim() != dim:
                raise ValueError(f"bidaf_self_attention: {name} input dim {encoder.get_input_dim()}, expected {dim}")

    def forward(  # type: ignore
        self,
        question: TextFieldTensors,
        passage: TextFieldTensors,
        span_start: torch.Tensor = None,
        span_end: torch.Tensor = None,
        metadata: List[Dict[str, Any]] = None,
    ) -> Dict[str, torch.Tensor]:
        question_mask = util.get_text_field_mask(question)
        passage_mask = util.get_text_field_mask(passage)
        # Order matters for output ELMo: embed question then passage, encode question then passage (FIFO).
        embedded_question = self.text_field_embedder(question)
        embedded_passage = self.text_field_embedder(passage)
        encoded_question = self.phrase_encoder(self.dropout(embedded_question), question_mask)
        encoded_passage = self.phrase_encoder(self.dropout(embedded_passage), passage_mask)
        encoded_question = self.dropout(encoded_question)
        encoded_passage = self.dropout(encoded_passage)

        # Bi-attention, passage to question and question to passage.
        similarity = self.question_attention(encoded_passage, encoded_question)  # (B, P, Q)
        passage_to_question = util.masked_softmax(similarity, question_mask.unsqueeze(1), dim=-1)
        attended_question = torch.bmm(passage_to_question, encoded_question)  # c_i
        max_similarity = util.replace_masked_values(similarity, question_mask.unsqueeze(1), -1e7).max(-1)[0]
        question_to_passage = util.masked_softmax(max_similarity, passage_mask, dim=-1)  # (B, P)
        attended_passage = torch.bmm(question_to_passage.unsqueeze(1), encoded_passage)  # q_c, (B, 1, D)
        attention_output = torch.cat(
            [
                encoded_passage,
                attended_question,
                encoded_passage * attended_question,
                attended_passage * attended_question,
            ],
            dim=-1,
        )
        attention_output = torch.relu(self.attention_projection(attention_output))

        # Residual self-attention.
        self_encoded = self.dropout(self.self_attention_encoder(self.dropout(attention_output), passage_mask))
        self_similarity = self.self_attention(self_encoded, self_encoded)  # (B, P, P)
        not_self = ~torch.eye(self_similarity.size(1), dtype=torch.bool, device=self_similarity.device)
        self_mask = passage_mask.unsqueeze(1) & not_self.unsqueeze(0)
        self_weights = util.masked_softmax(self_similarity, self_mask, dim=-1)
        self_attended = torch.bmm(self_weights, self_encoded)
        self_output = torch.cat([self_encoded, self_attended, self_encoded * self_attended], dim=-1)
        passage_representation = attention_output + torch.relu(self.self_attention_projection(self_output))

        # Span prediction.
        start_states = self.span_start_encoder(self.dropout(passage_representation), passage_mask)
        span_start_logits = self.span_start_scorer(self.dropout(start_states)).squeeze(-1)
        end_states = self.span_end_encoder(
            self.dropout(torch.cat([start_states, passage_representation], dim=-1)), passage_mask
        )
        span_end_logits = self.span_end_scorer(self.dropout(end_states)).squeeze(-1)
        span_start_logits = util.replace_masked_values(span_start_logits, passage_mask, -1e7)
        span_end_logits = util.replace_masked_values(span_end_logits, passage_mask, -1e7)
        predicted_span = best_span(span_start_logits, span_end_logits, self.max_span_length)

        output = {
            "span_start_logits": span_start_logits,
            "span_end_logits": span_end_logits,
            "best_span": predicted_span,
        }
        if span_start is not None:
            span_start, span_end = span_start.squeeze(-1), span_end.squeeze(-1)
            loss = torch.nn.functional.cross_entropy(span_start_logits, span_start)
            loss = loss + torch.nn.functional.cross_entropy(span_end_logits, span_end)
            output["loss"] = loss
            self.span_start_accuracy(span_start_logits, span_start)
            self.span_end_accuracy(span_end_logits, span_end)
            self.span_accuracy(predicted_span, torch.stack([span_start, span_end], -1))
        if metadata is not None:
            output["best_span_str"] = self._span_strings(predicted_span, metadata)
            output["question_id"] = [item.get("id") for item in metadata]
            answers = [item.get("answer_texts") for item in metadata]
            if all(answers):
                self.squad_metrics(output["best_span_str"], answers)
        return output

    @staticmethod
    def _span_strings(spans: torch.Tensor, metadata: List[Dict[str, Any]]) -> List[str]:
        strings = []
        for (start, end), item in zip(spans.tolist(), metadata):
            offsets = item["token_offsets"]
            strings.append(item["original_passage"][offsets[start][0] : offsets[end][1]])
        return strings

    def get_metrics(self, reset: bool = False) -> Dict[str, float]:
        metrics = self.squad_metrics.get_metric(reset)
        metrics.update(
            {
                "start_acc": self.span_start_accuracy.get_metric(reset),
                "end_acc": self.span_end_accuracy.get_metric(reset),
                "span_acc": self.span_accuracy.get_metric(reset),
            }
        )
        return metrics

    default_predictor = "reading_comprehension"
