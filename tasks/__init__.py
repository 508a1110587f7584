"""Downstream tasks of the ELMo paper (Sec. 4): one sub-package per task."""
from tasks import error_report

error_report.install()  # first: bad input (data, knobs) is one line on stderr, not a traceback

from tasks.knobs import apply_defaults, check_environment  # noqa: E402

apply_defaults()
check_environment()

from tasks.checkpoint_loading import allow_numpy_scalars_in_checkpoints  # noqa: E402

allow_numpy_scalars_in_checkpoints()  # allennlp train --recover under torch >= 2.6 (coref's numpy metrics)
# (importing it also registers the random_state callback: a resumed run goes on with the random state of its checkpoint)

# Shared task infrastructure and the task packages (registered AllenNLP components).
from tasks import (  # noqa: E402,F401
    coref,
    elmo_input_sized,
    lr_schedulers,
    ner,
    predictions,  # the unit_predictions callback
    snli,
    spacy_blank_tokenizer,
    squad,
    srl,
    sst,
    subsample,
    task_precision,  # the task_precision callback: TASK_PRECISION
    unpacked_rnn,
)
