"""A spaCy tokenizer that needs no downloaded model: the blank English pipeline (tokenizer rules only).

allennlp's ``SpacyTokenizer`` loads ``en_core_web_sm`` and tries to download it when it is missing, which fails
offline. The SQuAD and SNLI readers only need token boundaries (and character offsets for SQuAD spans), which the
blank pipeline's rule-based tokenizer gives.
"""
from typing import List, Optional

import spacy
from allennlp.data.tokenizers import Token, Tokenizer
from allennlp.data.tokenizers.spacy_tokenizer import SpacyTokenizer


@Tokenizer.register("spacy_blank_en")
class BlankEnglishSpacyTokenizer(SpacyTokenizer):
    def __init__(
        self,
        start_tokens: Optional[List[str]] = None,
        end_tokens: Optional[List[str]] = None,
    ) -> None:
        # SpacyTokenizer.__init__ would call spacy.load(); set its attributes here instead.
        self._language = "blank:en"
        self._pos_tags = self._parse = self._ner = False
        self._split_on_spaces = False
        self._keep_spacy_tokens = False
        self.spacy = spacy.blank("en")
        self._start_tokens = list(reversed(start_tokens or []))
        self._end_tokens = end_tokens or []
        self._is_version_3 = spacy.__version__ >= "3.0"

    def batch_tokenize(self, texts: List[str]) -> List[List[Token]]:
        # The parent uses n_process=-1 (one process per core); tokenizing is cheap, stay in-process.
        return [self.tokenize(text) for text in texts]

    def _to_params(self):
        return {
            "type": "spacy_blank_en",
            "start_tokens": list(reversed(self._start_tokens)),
            "end_tokens": self._end_tokens,
        }
