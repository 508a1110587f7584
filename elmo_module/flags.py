"""Boolean-like environment variables (``ELMO_CUDA_GRAPHS``, ``ELMO_ONEDNN``, ``ELMO_LSTM_RECURRENCE``,
``ELMO_TRACEBACK``), read one way everywhere: 1/true/yes/on and 0/false/no/off, any case. Before, each reader had
its own rule (``ELMO_CUDA_GRAPHS=false`` left graphs on: only ``0`` turned them off)."""
import os
import sys

TRUE, FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def env_flag(name: str, default: bool) -> bool:
    """The variable ``name`` as a boolean; unset or empty: ``default``. Another value is said in one line on stderr
    and read as the default (these are read as modules load, where an exception would be a traceback)."""
    value = os.environ.get(name, "").strip().lower()
    if value in TRUE or value in FALSE:
        return value in TRUE
    if value:
        print(f"warning: environment variable {name}={os.environ[name]}: expected one of {'/'.join(TRUE)} or "
              f"{'/'.join(FALSE)}; read as {'1' if default else '0'} (the default)", file=sys.stderr)
    return default
