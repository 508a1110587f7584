"""ELMo_k = gamma * sum_j softmax(w)_j h_{k,j} (paper Eq. 1), with the lambda penalty of Sec. 3.2."""
from typing import List

import torch
from torch import nn

MIX_MODES = ("weighted", "last_only", "average", "token_only")


class ScalarMix(nn.Module):
    """One task-specific mix of the biLM layers.

    mode ``weighted``: trainable w (starting at 0, i.e. uniform) and gamma (starting at 1);
    ``last_only``: the top layer only, gamma still trainable (Table 2; a frozen gamma made SRL fail in the paper);
    ``average``: fixed uniform weights, gamma trainable;
    ``token_only``: the token layer (layer 0, the char CNN's context-independent vector) only, gamma trainable: the
    supplement's ELMo_0 ablation ("only the ELMo context-independent type representation without the ELMo biLSTM
    layers").
    ``do_layer_norm``: the paper code's normalisation, one masked mean and variance per layer over the whole
    (batch, time, dim) tensor, no gain or bias.
    """

    def __init__(self, num_layers: int, mode: str = "weighted", do_layer_norm: bool = False):
        super().__init__()
        if mode not in MIX_MODES:
            raise ValueError(f"mix mode must be one of {MIX_MODES}, found {mode!r}")
        self.mode, self.num_layers, self.do_layer_norm = mode, num_layers, do_layer_norm
        self.gamma = nn.Parameter(torch.ones(1))
        if mode == "weighted":
            self.mix_weights = nn.Parameter(torch.zeros(num_layers))
        else:
            self.register_buffer("mix_weights", torch.zeros(num_layers))

    def normalized_weights(self) -> torch.Tensor:
        """softmax(w), or the one-hot top (``last_only``) or token (``token_only``) layer (Figure 2 plots these)."""
        if self.mode in ("last_only", "token_only"):
            layer = self.num_layers - 1 if self.mode == "last_only" else 0
            return torch.nn.functional.one_hot(torch.tensor(layer), self.num_layers).float()
        return torch.softmax(self.mix_weights, dim=0)

    def penalty(self) -> torch.Tensor:
        """sum_j w_j^2; the task adds lambda times this to its loss (gamma is not penalised)."""
        return (self.mix_weights ** 2).sum()

    def forward(self, layers: List[torch.Tensor], mask: torch.Tensor) -> torch.Tensor:
        if len(layers) != self.num_layers:
            raise ValueError(f"ScalarMix expects {self.num_layers} layers, got {len(layers)}")
        if self.do_layer_norm:
            layers = [_masked_normalize(layer, mask) for layer in layers]
        if self.mode == "last_only":
            return self.gamma * layers[-1]
        if self.mode == "token_only":
            return self.gamma * layers[0]
        weights = self.normalized_weights()
        return self.gamma * sum(w * layer for w, layer in zip(weights, layers))


def _masked_normalize(layer: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    keep = mask.unsqueeze(-1).to(layer.dtype)
    count = (keep.sum() * layer.size(-1)).clamp(min=1)
    mean = (layer * keep).sum() / count
    variance = (((layer - mean) * keep) ** 2).sum() / count
    return (layer - mean) / torch.sqrt(variance + 1e-12)
