"""Context-independent token layer: char embeddings -> CNN -> max-pool -> highway -> projection
(arXiv:1802.05365v2 Sec. 3.4, p. 4 (2048 character filters, two highway layers, projection to 512))."""
from collections import OrderedDict

import torch
from torch import nn

from elmo_module import precision
from elmo_module.options import BiLmOptions


class CharCnnTokenEncoder(nn.Module):
    """Maps (N, max_chars) character ids to (N, projection_dim) token vectors.

    Parameters are stored in the TensorFlow layout of the released weights so loading is a plain copy:
    highway ``out = g * relu(transform(x)) + (1 - g) * x`` with ``g = sigmoid(carry(x))`` (bilm-tf).

    ``encode_distinct`` keeps the vectors of the last ``cache_size`` distinct words it saw while autograd was not
    recording through the token layer (inference, or a downstream task with ELMo frozen), and recomputes only words it
    has not seen: text repeats its words, so after a few batches most tokens are hits. Any change to the parameters
    (an optimiser step, loading weights, moving the module) empties it. ``cache_size = 0`` turns it off.
    """

    cache_size = 50_000  # 100 MB at the released model's 512-wide token layer

    def __init__(self, options: BiLmOptions):
        super().__init__()
        self.options = options
        self._cache: "OrderedDict[bytes, torch.Tensor]" = OrderedDict()  # char ids of a word -> its vector, LRU order
        self._cache_owner = None  # the parameters' (address, version) when the cache was filled
        # row 0 is the masking id and stays zero; rows 1..261 are the file's 261 characters
        self.char_embed = nn.Parameter(torch.zeros(262, options.char_embed_dim))
        nn.init.uniform_(self.char_embed.data[1:], -1.0, 1.0)  # bilm-tf's initialiser
        self.convs = nn.ModuleList(
            nn.Conv1d(options.char_embed_dim, number, width) for width, number in options.filters)
        n = options.n_filters
        # one GEMM per highway layer: output rows [transform; carry]
        self.highways = nn.ModuleList(nn.Linear(n, 2 * n) for _ in range(options.n_highway))
        # bilm-tf skips the projection when the filters already have the projection width
        self.projection = nn.Linear(n, options.projection_dim) if n != options.projection_dim else nn.Identity()
        self._activation = torch.relu if options.activation == "relu" else torch.tanh

    def forward(self, char_ids: torch.Tensor) -> torch.Tensor:
        x = nn.functional.embedding(self._trim(char_ids), self.char_embed).transpose(1, 2)  # (N, dim, chars)
        # max over positions, then the activation (monotone, so the same as activation then max)
        x = torch.cat([self._activation(conv(x).max(dim=-1).values) for conv in self.convs], dim=-1)
        for highway in self.highways:
            # g * relu(transform) + (1 - g) * x with g = sigmoid(carry), written through the keep gate 1 - g =
            # sigmoid(-carry) so the float rounding is the same as allennlp's
            transform, carry = highway(x).chunk(2, dim=-1)
            keep = torch.sigmoid(-carry)
            x = keep * x + (1 - keep) * torch.relu(transform)
        return self.projection(x)

    def _trim(self, char_ids: torch.Tensor) -> torch.Tensor:
        """Drop trailing character positions that cannot change the max-pooled CNN output (exact, for speed).

        Past its last character a token's row repeats one id (the padding character), so every window lying wholly
        in that tail gives the same value. Keeping the batch's longest non-repeating prefix plus the widest filter
        keeps every other window and at least one tail window of each row; the rest only repeat it. The CNN's cost
        then follows the batch's longest word instead of max_characters_per_token (5x less for ordinary text).
        """
        chars = char_ids.size(-1)
        positions = torch.arange(1, chars + 1, device=char_ids.device)
        prefix = int(((char_ids != char_ids[:, -1:]) * positions).max()) if char_ids.numel() else 0
        keep = prefix + max(width for width, _ in self.options.filters)
        return char_ids[:, :keep] if keep < chars else char_ids

    def encode_distinct(self, char_ids: torch.Tensor):
        """Runs the CNN once per distinct token of (..., max_chars) ids (and not at all for words in the cache):
        returns the distinct tokens' vectors (U, P) and, for each position of ``char_ids``, the index of its vector
        (``char_ids.shape[:-1]``)."""
        flat = char_ids.reshape(-1, char_ids.size(-1))
        unique, inverse = torch.unique(flat, dim=0, return_inverse=True)
        return self._cached(unique), inverse.view(char_ids.shape[:-1])

    def clear_cache(self) -> None:
        self._cache.clear()

    def _cached(self, unique: torch.Tensor) -> torch.Tensor:
        parameters = list(self.parameters())
        if not self.cache_size or (torch.is_grad_enabled() and any(p.requires_grad for p in parameters)):
            return self(unique)
        # vectors computed under bfloat16 autocast are not float32's: the precision is part of the owner
        owner = (tuple((p.data_ptr(), p._version) for p in parameters), precision.bfloat16_active(unique.device.type))
        if owner != self._cache_owner:
            self._cache.clear()
            self._cache_owner = owner
        keys = [row.tobytes() for row in unique.cpu().numpy()]
        vectors = [self._cache.get(key) for key in keys]
        missing = [k for k, vector in enumerate(vectors) if vector is None]
        if missing:
            for k, vector in zip(missing, self(unique[missing])):
                vectors[k] = self._cache[keys[k]] = vector.clone()  # a row of its own, not a view keeping the batch
        for key in keys:
            self._cache.move_to_end(key)
        while len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)
        return torch.stack(vectors)
