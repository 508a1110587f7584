"""Bad input reaches the user of ``allennlp train`` as one line, not at the end of a 40-line traceback.

The readers, the knob checks and the ELMo core raise one-line errors (``ConfigurationError``, of which
``tasks.line_errors.InputError`` is ours, and ``elmo_module.errors.ElmoInputError``). ``allennlp train`` lets them
propagate to the top, where Python (or the hook allennlp installs once training starts, which logs "Uncaught
exception" with the traceback) prints the whole stack. ``install()`` -- called when the ``tasks`` package is imported,
which ``allennlp`` does through ``.allennlp_plugins`` or ``--include-package tasks`` before it reads a config --
puts a ``sys.excepthook`` in front that prints ``error: <message>`` and nothing else for those error types, and
hands every other exception to the hook it replaced. ``ELMO_TRACEBACK=1`` prints the traceback after the line.

allennlp replaces ``sys.excepthook`` in ``prepare_global_logging`` (allennlp/common/logging.py:119-126, called from
allennlp/commands/train.py:268 and :417), so that function is wrapped to put our hook back in front afterwards.
"""
import sys

from allennlp.common.checks import ConfigurationError

TRACEBACK_VARIABLE = "ELMO_TRACEBACK"


def one_line_errors():
    from elmo_module.errors import ElmoInputError

    return ConfigurationError, ElmoInputError


def _wrap(previous):
    if getattr(previous, "_elmo_one_line", False):
        return previous

    def excepthook(exc_type, value, traceback):
        if issubclass(exc_type, one_line_errors()):
            message = " ".join(str(getattr(value, "message", value)).split("\n"))
            print(f"error: {message}", file=sys.stderr, flush=True)
            from elmo_module.flags import env_flag

            if env_flag(TRACEBACK_VARIABLE, False):
                previous(exc_type, value, traceback)
            return
        previous(exc_type, value, traceback)

    excepthook._elmo_one_line = True
    return excepthook


def install() -> None:
    sys.excepthook = _wrap(sys.excepthook)
    from allennlp.common import logging as common_logging

    prepare = common_logging.prepare_global_logging
    if getattr(prepare, "_elmo_one_line", False):
        return

    def prepare_global_logging(*args, **kwargs):
        prepare(*args, **kwargs)
        sys.excepthook = _wrap(sys.excepthook)

    prepare_global_logging._elmo_one_line = True
    common_logging.prepare_global_logging = prepare_global_logging
