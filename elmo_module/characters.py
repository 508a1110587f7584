"""Character ids exactly as the released biLM expects them (bilm-tf UnicodeCharsVocabulary; the paper says only
that the input is purely character-based, arXiv:1802.05365v2 Sec. 3.4, p. 4).

A token becomes ``max_chars`` ids: begin-of-word, its UTF-8 bytes (truncated to leave room for the markers),
end-of-word, then padding. ``<S>``/``</S>`` get their own special ids. Every id is shifted by +1 so that 0 can mean
"no token here" (masking); this is the ``n_characters = 262`` inference convention.
"""
from typing import List, Sequence

import torch

BOS_CHAR, EOS_CHAR, BOW_CHAR, EOW_CHAR, PAD_CHAR = 256, 257, 258, 259, 260
BOS_TOKEN, EOS_TOKEN = "<S>", "</S>"
MAX_CHARS = 50


def _special(char: int, max_chars: int) -> List[int]:
    ids = [PAD_CHAR] * max_chars
    ids[0], ids[1], ids[2] = BOW_CHAR, char, EOW_CHAR
    return [i + 1 for i in ids]


def token_to_ids(token: str, max_chars: int = MAX_CHARS) -> List[int]:
    """The ``max_chars`` character ids of one token (shifted by +1)."""
    if token == BOS_TOKEN:
        return _special(BOS_CHAR, max_chars)
    if token == EOS_TOKEN:
        return _special(EOS_CHAR, max_chars)
    data = token.encode("utf-8", "ignore")[: max_chars - 2]
    ids = [BOW_CHAR, *data, EOW_CHAR] + [PAD_CHAR] * (max_chars - len(data) - 2)
    return [i + 1 for i in ids]


def boundary_ids(max_chars: int = MAX_CHARS) -> torch.Tensor:
    """(2, max_chars): the ids of ``<S>`` and ``</S>``, which the biLM adds around every sentence."""
    return torch.tensor([_special(BOS_CHAR, max_chars), _special(EOS_CHAR, max_chars)], dtype=torch.long)


def batch_to_ids(sentences: Sequence[Sequence[str]], max_chars: int = MAX_CHARS) -> torch.Tensor:
    """(batch, longest sentence, max_chars) ids; padding tokens are all zeros."""
    longest = max((len(s) for s in sentences), default=0)
    out = torch.zeros(len(sentences), longest, max_chars, dtype=torch.long)
    cache = {}
    for row, sentence in enumerate(sentences):
        for col, token in enumerate(sentence):
            if token not in cache:
                cache[token] = torch.tensor(token_to_ids(token, max_chars))
            out[row, col] = cache[token]
    return out
