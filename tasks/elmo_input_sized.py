"""A Seq2SeqEncoder wrapper that sizes its inner encoder's input for input-placement ELMo.

With ELMo at the input (paper Sec. 3.3, [x_k; ELMo_k]) the task RNN's input grows by the ELMo dimension
(2 * projection_dim of the biLM). A jsonnet config cannot read that number from the biLM options file (``importstr``
takes only literal paths), so the config gives the input size without ELMo and this wrapper adds the ELMo dimension
read from ``options_file`` when it builds the inner encoder. Configs get it from ``elmo.libsonnet``'s
``input_sized(encoder, dim)``, which uses this wrapper only when ELMo is at the input.
"""
from typing import Optional

import torch
from allennlp.common import Lazy
from allennlp.common.checks import ConfigurationError
from allennlp.common.file_utils import cached_path
from allennlp.modules import Seq2SeqEncoder

from elmo_module.options import BiLmOptions
from elmo_module.transformer import is_transformer, transformer_dim


def elmo_output_dim(options_file: str) -> int:
    """The ELMo vector size of a biLM: [forward; backward] of the projection size (paper Sec. 3.1); of a transformer
    encoder (a directory or hf:NAME in its place: elmo.libsonnet), its hidden size."""
    if is_transformer(options_file):
        return transformer_dim(options_file)
    return BiLmOptions.load(cached_path(options_file)).output_dim  # checked: one-line errors (ElmoInputError)


@Seq2SeqEncoder.register("elmo_input_sized")
class ElmoInputSizedEncoder(Seq2SeqEncoder):
    def __init__(
        self,
        encoder: Lazy[Seq2SeqEncoder],
        input_dim: int,
        options_file: Optional[str] = None,
        input_dim_key: str = "input_size",
    ) -> None:
        super().__init__()
        elmo_dim = elmo_output_dim(options_file) if options_file else 0
        self.encoder = encoder.construct(**{input_dim_key: input_dim + elmo_dim})
        if self.encoder.get_input_dim() != input_dim + elmo_dim:
            raise ConfigurationError(
                f"elmo_input_sized: the inner encoder does not take its input size from '{input_dim_key}'"
            )

    def get_input_dim(self) -> int:
        return self.encoder.get_input_dim()

    def get_output_dim(self) -> int:
        return self.encoder.get_output_dim()

    def is_bidirectional(self) -> bool:
        return self.encoder.is_bidirectional()

    def forward(self, inputs: torch.Tensor, mask: torch.BoolTensor) -> torch.Tensor:
        return self.encoder(inputs, mask)
