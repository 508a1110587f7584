"""Downstream tasks of the ELMo paper (Sec. 4): one sub-package per task."""
from tasks.knobs import apply_defaults

apply_defaults()

# Shared task infrastructure and the task packages (registered AllenNLP components).
from tasks import elmo_input_sized, lr_schedulers, spacy_blank_tokenizer, subsample  # noqa: E402,F401
from tasks import ner  # noqa: E402,F401
from tasks import snli, sst  # noqa: E402,F401
from tasks import squad  # noqa: E402,F401
from tasks import coref, srl  # noqa: E402,F401
