"""Boolean-like environment variables read one way everywhere (elmo_module/flags.py): ELMO_CUDA_GRAPHS=false once
left CUDA graphs on (only 0 turned them off), while ELMO_TRACEBACK took anything but 0 as on."""
import subprocess
import sys

import pytest

from elmo_module.flags import env_flag
from tests.conftest import REPO_ROOT


@pytest.mark.parametrize("value, expected", [("0", False), ("false", False), ("OFF", False), ("no", False),
                                             ("1", True), ("true", True), ("On", True), ("yes", True), ("", True)])
def test_a_flag_reads_every_spelling_of_yes_and_no(monkeypatch, value, expected):
    monkeypatch.setenv("ELMO_CUDA_GRAPHS", value)
    assert env_flag("ELMO_CUDA_GRAPHS", True) is expected


@pytest.mark.slow
@pytest.mark.parametrize("variable", ["ELMO_CUDA_GRAPHS", "ELMO_ONEDNN", "ELMO_LSTM_RECURRENCE"])
def test_the_lstm_switches_read_false_as_off_and_say_what_they_cannot_read(variable):
    name = {"ELMO_CUDA_GRAPHS": "USE_CUDA_GRAPHS", "ELMO_ONEDNN": "USE_ONEDNN",
            "ELMO_LSTM_RECURRENCE": "USE_RECURRENCE"}[variable]
    for value, shown, said in (("false", "False", ""), ("off", "False", ""), ("maybe", "True", "expected one of")):
        done = subprocess.run([sys.executable, "-c", f"from elmo_module import lstm; print(lstm.{name})"],
                              cwd=REPO_ROOT, env={"PATH": "/usr/bin:/bin", variable: value},
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0 and done.stdout.strip() == shown, (value, done.stdout, done.stderr[-500:])
        if said:
            assert done.stderr.strip() == (f"warning: environment variable {variable}={value}: expected one of "
                                           f"1/true/yes/on or 0/false/no/off; read as 1 (the default)")


def test_the_traceback_switch_reads_the_same_words(monkeypatch):
    from elmo_module.errors import ElmoInputError
    from tasks.error_report import _wrap

    seen = []
    hook = _wrap(lambda *a: seen.append(a))
    for value, shown in (("off", False), ("false", False), ("yes", True)):
        monkeypatch.setenv("ELMO_TRACEBACK", value)
        seen.clear()
        hook(ElmoInputError, ElmoInputError("bad"), None)
        assert bool(seen) is shown, value
