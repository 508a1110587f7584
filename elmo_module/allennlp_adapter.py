"""The thin AllenNLP side of ELMo: registered indexer, token embedder, output-placement encoder, mix-weights callback.

Placement (paper Sec. 3.3, Table 3): the embedder runs the frozen biLM once per text field and builds one mix per
placement. Input placement returns its mix from the text field embedder. Output placement queues its (separate) mix
under the embedder's ``name``; an ``elmo_output`` encoder wrapped around the task RNN takes the entries in the order
the fields were embedded and concatenates them to the RNN output, [h_k; ELMo'_k].
The lambda penalty (Sec. 3.2) is an AllenNLP regularizer on parameters named ``mix_weights`` (= lambda * sum w^2).
"""
import json
import logging
import os
from collections import defaultdict, deque
from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch
from allennlp.common.checks import ConfigurationError
from allennlp.data import Token, TokenIndexer, Vocabulary
from allennlp.data.token_indexers import PretrainedTransformerMismatchedIndexer
from allennlp.data.token_indexers.token_indexer import IndexedTokenList
from allennlp.modules.seq2seq_encoders import Seq2SeqEncoder
from allennlp.modules.token_embedders import TokenEmbedder
from allennlp.training.callbacks import TrainerCallback

from elmo_module.activation_cache import ActivationCache, file_checksum
from elmo_module.characters import MAX_CHARS, token_to_ids
from elmo_module.elmo import Elmo
from elmo_module.errors import ElmoInputError
from elmo_module.options import BiLmOptions
from elmo_module.precision import autocast, check_precision
from elmo_module.scalar_mix import MIX_MODES, ScalarMix
from elmo_module.transformer import FrozenTransformer, is_transformer, model_source, transformer_dim
from elmo_module.transformer_cache import TransformerCache, encoder_identity
from elmo_module.weights import load_bilm

logger = logging.getLogger(__name__)
PLACEMENTS = ("input", "output", "both")
_MAX_QUEUED = 16
_output_queues: Dict[str, deque] = defaultdict(deque)


@TokenIndexer.register("elmo_module_characters")
class ElmoCharactersIndexer(TokenIndexer):
    """Each token -> its ``max_chars`` character ids (key ``elmo_tokens``), as the released biLM expects.
    ``sentences``: also each token's sentence number (key ``sentence_ids``, from 1; the reader puts it in the token's
    ``type_id``), so that the embedder runs the biLM on each sentence alone, as e2e-coref did for a document
    (``cache_elmo.py``: a document's sentences as one batch)."""

    def __init__(self, max_chars: int = MAX_CHARS, sentences: bool = False, token_min_padding_length: int = 0) -> None:
        super().__init__(token_min_padding_length)
        self.max_chars, self.sentences = max_chars, sentences

    def count_vocab_items(self, token: Token, counter: Dict[str, Dict[str, int]]):
        pass  # characters need no vocabulary

    def tokens_to_indices(self, tokens: List[Token], vocabulary: Vocabulary) -> Dict[str, List[List[int]]]:
        indexed = {"elmo_tokens": [token_to_ids(t.text, self.max_chars) for t in tokens]}
        if self.sentences:
            numbers = [t.type_id for t in tokens]
            if not all(isinstance(n, int) and n > 0 for n in numbers):
                raise ConfigurationError("elmo_module_characters with sentences = true: every token needs its sentence "
                                         "number (from 1) in type_id, set by the dataset reader; found "
                                         f"{sorted(set(map(repr, numbers)))[:3]}")
            indexed["sentence_ids"] = numbers
        return indexed

    def get_empty_token_list(self) -> IndexedTokenList:
        return {"elmo_tokens": [], **({"sentence_ids": []} if self.sentences else {})}

    def as_padded_tensor_dict(self, tokens: IndexedTokenList, padding_lengths: Dict[str, int]):
        ids = tokens["elmo_tokens"]
        out = torch.zeros(padding_lengths["elmo_tokens"], self.max_chars, dtype=torch.long)
        if ids:
            out[: len(ids)] = torch.tensor(ids, dtype=torch.long)
        padded = {"elmo_tokens": out}
        if self.sentences:  # 0: padding
            numbers = torch.zeros(padding_lengths["elmo_tokens"], dtype=torch.long)
            numbers[: len(ids)] = torch.tensor(tokens["sentence_ids"], dtype=torch.long)
            padded["sentence_ids"] = numbers
        return padded


def sentence_runs(numbers: Sequence[int]) -> List[Tuple[int, int]]:
    """(first token, length) of each run of equal sentence numbers: the sentences the biLM sees alone. One split for
    the embedder and the activation cache (runner/stages/caches.py), so both hand the biLM the same sentences."""
    runs: List[Tuple[int, int]] = []
    for i, number in enumerate(numbers):
        if runs and number == numbers[i - 1]:
            runs[-1] = (runs[-1][0], runs[-1][1] + 1)
        else:
            runs.append((i, 1))
    return runs


def _check_choice(key: str, value: str, choices) -> None:
    if value not in choices:
        raise ConfigurationError(f"elmo_module embedder: key '{key}' must be one of {list(choices)}, found {value!r}")


@TokenEmbedder.register("elmo_module")
class ElmoTokenEmbedder(TokenEmbedder):
    """ELMo from a frozen biLM (official ``options.json`` + hdf5) with one scalar mix per placement."""

    def __init__(self, options_file: str, weight_file: str, placement: str = "input", mix: str = "weighted",
                 do_layer_norm: bool = False, dropout: float = 0.5, name: str = "elmo",
                 stateful: bool = False, cache_dir: str = "", precision: str = "float32") -> None:
        super().__init__()
        _check_choice("placement", placement, PLACEMENTS)
        _check_choice("mix", mix, MIX_MODES)
        try:
            bilm = load_bilm(options_file, weight_file, stateful=stateful, precision=precision)
        except ElmoInputError as e:
            raise ConfigurationError(str(e)) from None
        self.placement, self.name = placement, name
        self.cache = None
        if cache_dir:  # precomputed stateless biLM layers (the runner's activation cache)
            if stateful:
                raise ConfigurationError("elmo_module embedder: an activation cache needs stateful = false")
            try:
                self.cache = ActivationCache(cache_dir, file_checksum(options_file, weight_file), precision)
            except ElmoInputError as e:
                raise ConfigurationError(str(e)) from None
        self.elmo = Elmo(bilm, num_mixes=2 if placement == "both" else 1, mix=mix,
                         do_layer_norm=do_layer_norm, dropout=dropout)
        labels = {"input": ["input"], "output": ["output"], "both": ["input", "output"]}[placement]
        for mixer, label in zip(self.elmo.mixes, labels):
            mixer.placement = label  # read by the mix-weights callback (Figure 2)

    def get_output_dim(self) -> int:
        return 0 if self.placement == "output" else self.elmo.output_dim

    def _sentence_layers(self, elmo_tokens: torch.Tensor, sentence_ids: torch.Tensor):
        """The biLM's layers of each text, the biLM run on each of its sentences alone (the sentences of a batch as
        one batch; e2e-coref ``cache_elmo.py``), put back in place: (layers, mask) as ``Elmo`` takes them."""
        if self.elmo.bilm.stateful:
            raise ConfigurationError("elmo_module embedder: sentences need stateful = false")
        mask = (elmo_tokens > 0).any(dim=-1)
        rows = []  # (text, first token, length) of each sentence
        for text, length in enumerate(mask.sum(dim=1).tolist()):
            rows += [(text, start, n) for start, n in sentence_runs(sentence_ids[text, :length].tolist())]
        chars = elmo_tokens.new_zeros(len(rows), max([n for _, _, n in rows], default=1), elmo_tokens.shape[-1])
        for i, (text, start, length) in enumerate(rows):
            chars[i, :length] = elmo_tokens[text, start:start + length]
        if self.cache is not None:
            sentence_layers, _ = self.cache.lookup(chars)
        else:
            with torch.no_grad():
                sentence_layers, _ = self.elmo.bilm(chars)
        layers = [layer.new_zeros(*mask.shape, layer.shape[-1]) for layer in sentence_layers]
        for i, (text, start, length) in enumerate(rows):
            for whole, layer in zip(layers, sentence_layers):
                whole[text, start:start + length] = layer[i, :length]
        return layers, mask

    def forward(self, elmo_tokens: torch.Tensor, sentence_ids: Optional[torch.Tensor] = None) -> torch.Tensor:
        if sentence_ids is not None or self.cache is not None:
            layers, mask = (self._sentence_layers(elmo_tokens, sentence_ids) if sentence_ids is not None
                            else self.cache.lookup(elmo_tokens))
            mixes, mask = self.elmo(layers=layers, mask=mask)
        else:
            mixes, mask = self.elmo(elmo_tokens)
        return _placed(mixes, mask, self.placement, self.name)


def _placed(mixes: List[torch.Tensor], mask: torch.Tensor, placement: str, name: str) -> torch.Tensor:
    """The input mix (nothing for output placement), the output mix queued for the 'elmo_output' encoder."""
    if placement != "input":
        queue = _output_queues[name]
        if len(queue) >= _MAX_QUEUED:
            queue.clear()
            raise ConfigurationError(
                f"ELMo output mix '{name}' is never consumed: placement '{placement}' needs an "
                f"'elmo_output' encoder (name '{name}') around the task RNN")
        queue.append((mixes[-1], mask))
    if placement == "output":
        return mixes[0].new_zeros(*mixes[0].shape[:2], 0)
    return mixes[0]


@TokenIndexer.register("transformer_pieces")
class TransformerPiecesIndexer(PretrainedTransformerMismatchedIndexer):
    """allennlp's mismatched indexer (word pieces, each word's offsets) for the knob ENCODER's value: a directory,
    hf:NAME or pkg:PACKAGE/SUBDIR (elmo_module/transformer.py model_source)."""

    # (no **kwargs: allennlp's from_params would then also ask for the parent's own model_name)
    def __init__(self, encoder: str, token_min_padding_length: int = 0) -> None:
        try:
            source = model_source(encoder)
        except ElmoInputError as e:
            raise ConfigurationError(str(e)) from None
        super().__init__(source, token_min_padding_length=token_min_padding_length)


@TokenEmbedder.register("transformer_mix")
class TransformerMixEmbedder(TokenEmbedder):
    """A Hugging Face transformer used as ELMo is (elmo_module/transformer.py): frozen, in eval mode, one scalar mix
    per placement over all its hidden states, the embedding layer's included, pooled to words. It reads what
    allennlp's ``pretrained_transformer_mismatched`` indexer gives (word pieces and each word's offsets)."""

    def __init__(self, encoder: str, pooling: str = "first", placement: str = "input", mix: str = "weighted",
                 do_layer_norm: bool = False, dropout: float = 0.5, name: str = "elmo",
                 precision: str = "float32", cache_dir: str = "") -> None:
        super().__init__()
        _check_choice("placement", placement, PLACEMENTS)
        _check_choice("mix", mix, MIX_MODES)
        try:
            check_precision(precision, None, what="precision")  # (the device is known at the first forward)
            transformer = FrozenTransformer(encoder, pooling)
            # its pooled layers computed once before training (the runner's activation cache), else run here
            self.cache = TransformerCache(cache_dir, encoder_identity(encoder, pooling), precision) \
                if cache_dir else None
        except ElmoInputError as e:
            raise ConfigurationError(str(e)) from None
        self.placement, self.name, self.precision = placement, name, precision
        self.elmo = Elmo(transformer, num_mixes=2 if placement == "both" else 1, mix=mix,
                         do_layer_norm=do_layer_norm, dropout=dropout)
        labels = {"input": ["input"], "output": ["output"], "both": ["input", "output"]}[placement]
        for mixer, label in zip(self.elmo.mixes, labels):
            mixer.placement = label  # read by the mix-weights callback (Figure 2)

    def get_output_dim(self) -> int:
        return 0 if self.placement == "output" else self.elmo.output_dim

    def forward(self, token_ids: torch.Tensor, mask: torch.Tensor, offsets: torch.Tensor,
                wordpiece_mask: torch.Tensor, type_ids: Optional[torch.Tensor] = None,
                segment_concat_mask: Optional[torch.Tensor] = None) -> torch.Tensor:
        try:  # (bfloat16 on a CPU without its kernels: one line, elmo_module/precision.py)
            with autocast(self.precision, token_ids.device.type):
                layers, mask = (self.cache.lookup(token_ids, wordpiece_mask, offsets, mask) if self.cache else
                                self.elmo.bilm(token_ids, wordpiece_mask, offsets, mask, type_ids))
        except ElmoInputError as e:
            raise ConfigurationError(str(e)) from None
        mixes, mask = self.elmo(layers=[layer.float() for layer in layers], mask=mask)
        return _placed(mixes, mask, self.placement, self.name)


@Seq2SeqEncoder.register("elmo_output")
class ElmoOutputEncoder(Seq2SeqEncoder):
    """Runs ``encoder`` and appends the output-placement ELMo mix queued by the embedder called ``name``."""

    def __init__(self, encoder: Seq2SeqEncoder, options_file: str, name: str = "elmo") -> None:
        super().__init__()
        self.encoder, self.name = encoder, name
        try:
            self._elmo_dim = (transformer_dim(options_file) if is_transformer(options_file)
                              else BiLmOptions.load(options_file).output_dim)
        except ElmoInputError as e:
            raise ConfigurationError(str(e)) from None

    def get_input_dim(self) -> int:
        return self.encoder.get_input_dim()

    def get_output_dim(self) -> int:
        return self.encoder.get_output_dim() + self._elmo_dim

    def is_bidirectional(self) -> bool:
        return self.encoder.is_bidirectional()

    def forward(self, inputs: torch.Tensor, mask: torch.BoolTensor) -> torch.Tensor:
        encoded = self.encoder(inputs, mask)
        queue = _output_queues[self.name]
        if not queue:
            raise ConfigurationError(f"'elmo_output' encoder: no ELMo output mix queued under '{self.name}'; "
                                     f"the 'elmo_module' embedder needs placement 'output' or 'both'")
        elmo, elmo_mask = queue.popleft()
        if elmo.shape[:2] != encoded.shape[:2]:
            raise ConfigurationError(f"'elmo_output' encoder: ELMo mix has (batch, time) {tuple(elmo.shape[:2])} "
                                     f"but the encoder output has {tuple(encoded.shape[:2])}; fields must be "
                                     f"encoded in the order they were embedded")
        return torch.cat([encoded, elmo], dim=-1)


def mix_weights_summary(model: torch.nn.Module) -> Dict[str, Any]:
    """softmax-normalised weights and gamma of every scalar mix in ``model`` (Figure 2)."""
    summary = {}
    for path, module in model.named_modules():
        if isinstance(module, ScalarMix):
            summary[path] = {"placement": getattr(module, "placement", None), "mode": module.mode,
                             "weights": [round(float(w), 6) for w in module.normalized_weights().detach()],
                             "raw_weights": [round(float(w), 6) for w in module.mix_weights.detach()],
                             "gamma": round(float(module.gamma.detach()), 6)}
    return summary


@TrainerCallback.register("elmo_mix_weights")
class MixWeightsCallback(TrainerCallback):
    """Writes ``elmo_mix_weights.json`` (see ``mix_weights_summary``) to the serialization directory at the end."""

    def on_end(self, trainer, metrics: Dict[str, Any] = None, epoch: int = None, is_primary: bool = True,
               **kwargs) -> None:
        if not is_primary:
            return
        path = os.path.join(self.serialization_dir, "elmo_mix_weights.json")
        with open(path + ".partial", "w") as f:
            json.dump(mix_weights_summary(trainer.model), f, indent=2)
        os.replace(path + ".partial", path)
