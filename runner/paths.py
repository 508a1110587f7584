"""Paths as profiles and knobs write them: the repository, the data root ``${DATA_DIR}`` and other ``${NAME}``
variables, and the default root that run ids are computed with (so that a profile run on another DATA_DIR keeps
the ids of its archived runs)."""
import os
import re
from pathlib import Path

REPO = Path(__file__).parent.parent


VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


# The data root that ``${DATA_DIR}`` in a profile names when the variable is unset: the folder beside the repository
# where the suite was built. ``python -m runner.data fetch PROFILE --into DIR`` fills another (runner/data/fetch.py).
DATA_DIR_DEFAULT = "../shared/data"


def data_dir() -> str:
    """The data root: $DATA_DIR (absolute, or relative to the repository), else DATA_DIR_DEFAULT."""
    return os.environ.get("DATA_DIR") or DATA_DIR_DEFAULT


def expand(value: str) -> str:
    """``${NAME}`` -> the environment variable NAME (profiles name the user's data and weights this way); an unset
    variable stays as written, and ``missing_inputs`` reports it; ``${DATA_DIR}`` is never unset (data_dir)."""
    return VARIABLE.sub(lambda m: data_dir() if m.group(1) == "DATA_DIR" else os.environ.get(m.group(1), m.group(0)),
                    value)


def canonical(value: str) -> str:
    """A value under the data root written with the default root: what run ids are computed from, so that a profile
    run on another DATA_DIR keeps the ids of the runs archived in results/<profile>/runs (where the default was)."""
    root = data_dir().rstrip("/")
    if root != DATA_DIR_DEFAULT and (value == root or value.startswith(root + "/")):
        return DATA_DIR_DEFAULT + value[len(root):]
    return value


def data_hint(value: str) -> str:
    """Where to get a missing file under the data root, '' for any other."""
    return (f"a file of DATA_DIR ({data_dir()}): python -m runner.data fetch PROFILE --into DIR makes it where it "
            f"can (docs/data.md), then set DATA_DIR=DIR" if canonical(value).startswith(DATA_DIR_DEFAULT + "/") else "")


def repo_path(value: str) -> Path:
    """A path as profiles and knobs give it: absolute, or relative to the repository (where runs start)."""
    return Path(value) if os.path.isabs(value) else REPO / value
