"""NER on CoNLL-2003 (paper Sec. 4): allennlp's crf_tagger with a checked CoNLL-2003 reader."""
import allennlp_models.tagging  # noqa: F401  (registers crf_tagger)

from tasks.ner.conll2003_reader import CheckedConll2003Reader  # noqa: F401  (registers conll2003_checked)
