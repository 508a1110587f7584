"""ELMo for a task model: the frozen biLM run once, k independent scalar mixes, dropout (paper Sec. 3.3)."""
from typing import List, Optional, Tuple

import torch
from torch import nn

from elmo_module.bilm import ElmoBiLm
from elmo_module.scalar_mix import ScalarMix


class Elmo(nn.Module):
    """``num_mixes`` mixes from one biLM pass: input placement needs one, input+output two (Table 3).

    Pass ``char_ids`` to run the biLM, or precomputed ``layers`` + ``mask`` (the runner's activation cache).
    """

    def __init__(self, bilm: ElmoBiLm, num_mixes: int = 1, mix: str = "weighted",
                 do_layer_norm: bool = False, dropout: float = 0.5):
        super().__init__()
        self.bilm = bilm
        for p in self.bilm.parameters():  # the biLM is frozen (Sec. 3.3)
            p.requires_grad_(False)
        self.mixes = nn.ModuleList(ScalarMix(bilm.num_output_layers, mix, do_layer_norm) for _ in range(num_mixes))
        self.dropout = nn.Dropout(dropout)

    @property
    def output_dim(self) -> int:  # a biLM's [forward; backward] projection, or a transformer's hidden size
        return self.bilm.options.output_dim if hasattr(self.bilm, "options") else self.bilm.output_dim

    def forward(self, char_ids: Optional[torch.Tensor] = None, layers: Optional[List[torch.Tensor]] = None,
                mask: Optional[torch.Tensor] = None) -> Tuple[List[torch.Tensor], torch.Tensor]:
        if layers is None:
            with torch.no_grad():
                layers, mask = self.bilm(char_ids)
        return [self.dropout(mix(layers, mask)) for mix in self.mixes], mask

    def penalty(self) -> torch.Tensor:
        return sum(mix.penalty() for mix in self.mixes)
