"""The tasks package as ``allennlp`` loads it: every registered component, and the process set up for a training.

``.allennlp_plugins`` names this module, and ``--include-package tasks`` imports it with the rest of the package:
importing it is the setup, on purpose (allennlp's plugin mechanism is an import). Importing ``tasks`` or any task
module does nothing to the process; a program that evaluates the configs itself (the tests) calls ``set_up()``.
"""
import os

from tasks import (  # noqa: F401 (each import registers the package's allennlp components)
    coref,
    elmo_input_sized,
    error_report,
    knobs,
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
from tasks.checkpoint_loading import allow_numpy_scalars_in_checkpoints


def set_up(environ=os.environ) -> None:
    """Bad input (data, knobs) one line on stderr, not a traceback; every knob's default in the environment, where
    jsonnet reads it (std.extVar), and a bad knob value refused under ``allennlp`` before any data is read;
    ``allennlp train --recover`` under torch >= 2.6 (coref's numpy metrics in its checkpoints)."""
    error_report.install()
    knobs.apply_defaults(environ)
    knobs.check_environment(environ)
    allow_numpy_scalars_in_checkpoints()


set_up()
