"""Shared fixtures for the task tests: an isolated AllenNLP environment and in-process training of a task config."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from elmo_module.precision import cpu_has_bfloat16

REPO_ROOT = Path(__file__).resolve().parent.parent
SHARED_DATA = REPO_ROOT.parent / "shared" / "data"

# bfloat16 on a CPU without oneDNN's bfloat16 kernels is refused for users (elmo_module/precision.py); the tests
# check bfloat16's numbers on every CPU, slowly there, and tests/elmo_module/test_cpu_bfloat16.py takes the flag away
# to check the refusal itself.
os.environ.setdefault("ELMO_ALLOW_SLOW_BFLOAT16", "1")


# torch's own LSTM under bfloat16 autocast fails on such a CPU ("could not create a primitive descriptor for the LSTM
# forward propagation primitive", torch 2.9.1 on an AVX2 AMD EPYC): the task models' bfloat16 trainings need the kernels
needs_cpu_bfloat16 = pytest.mark.skipif(not cpu_has_bfloat16(),
                                        reason="this CPU has no oneDNN bfloat16 kernels (AVX-512 or ARM bf16): torch's "
                                               "LSTM fails under bfloat16 autocast here")


@pytest.fixture
def one_thread():
    """torch on one thread for the test (tiny models run faster so, and the 2-core machine is shared); used by the
    biLM test modules through ``pytestmark = pytest.mark.usefixtures("one_thread")``."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def task_env(tmp_path, monkeypatch):
    """Runs from the repo root (configs use repo-relative paths) with caches, wandb and nltk under tmp_path and every
    knob at its default, except SIZE=tiny and NUM_EPOCHS=2. Returns a setter for more knobs."""
    from tasks.knobs import KNOBS

    monkeypatch.chdir(REPO_ROOT)
    for name, value in KNOBS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("SIZE", "tiny")
    monkeypatch.setenv("NUM_EPOCHS", "2")
    for name in ("WANDB_DIR", "WANDB_CONFIG_DIR", "WANDB_CACHE_DIR", "ALLENNLP_CACHE_ROOT", "HF_HOME"):
        (tmp_path / name).mkdir()
        monkeypatch.setenv(name, str(tmp_path / name))
    monkeypatch.setenv("WANDB_MODE", "offline")
    (tmp_path / "nltk" / "tokenizers" / "punkt").mkdir(parents=True)
    monkeypatch.setenv("NLTK_DATA", str(tmp_path / "nltk"))

    def set_knobs(**knobs):
        for name, value in knobs.items():
            monkeypatch.setenv(name, str(value))

    return set_knobs


@pytest.fixture
def train_task(task_env, tmp_path):
    """train_task(task, overrides=None, **knobs) -> (model, serialization_dir): `allennlp train
    jsonnet_configs/<task>.jsonnet` in-process with the given knobs (and `-o` overrides)."""
    from allennlp.commands.train import train_model_from_file
    from allennlp.common.plugins import import_plugins

    import_plugins()  # .allennlp_plugins in the repo root: elmo_module.allennlp_adapter, tasks

    def train(task: str, overrides: dict = None, **knobs):
        task_env(**knobs)
        serialization_dir = tmp_path / ("run_" + "_".join([task] + [f"{k}={v}" for k, v in knobs.items()]))
        model = train_model_from_file(
            str(REPO_ROOT / "jsonnet_configs" / f"{task}.jsonnet"),
            str(serialization_dir),
            overrides=json.dumps(overrides or {}),
        )
        return model, serialization_dir

    return train


def allennlp_evaluate(archive: Path, data_path: str, output_file: Path) -> dict:
    """`allennlp evaluate` as a user runs it (a subprocess), returning the metrics it writes."""
    command = [sys.executable, "-m", "allennlp", "evaluate", str(archive), data_path, "--output-file", str(output_file)]
    result = subprocess.run(command, cwd=REPO_ROOT, env=dict(os.environ), capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(output_file.read_text())


def predictions_after_reload(model, archive: Path, data_path: str, output_keys):
    """The given outputs of the trained model and of the model loaded back from its archive, on the instances that
    the archive's validation reader reads from data_path."""
    from allennlp.models.archival import load_archive

    loaded_archive = load_archive(str(archive))
    instances = list(loaded_archive.validation_dataset_reader.read(data_path))
    model.eval()
    loaded_archive.model.eval()
    before = model.forward_on_instances(instances)
    after = loaded_archive.model.forward_on_instances(instances)
    return [[b[key] for key in output_keys] for b in before], [[a[key] for key in output_keys] for a in after]


def assert_read_error(reader, path: Path, message: str) -> None:
    """Reading ``path`` fails with a one-line error that names the file and contains ``message``."""
    from allennlp.common.checks import ConfigurationError

    with pytest.raises(ConfigurationError) as error:
        list(reader.read(str(path)))
    text = str(error.value)
    assert message in text and str(path) in text and "\n" not in text


def shared_data(*parts) -> Path:
    """A path under ../shared/data, or a pytest skip when it is absent."""
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"{path} not present")
    return path


def pytest_runtest_logreport(report):
    """ELMO_TEST_TIMES=FILE: each test's call time appended as 'seconds<TAB>node id' (how the `slow` marks were
    chosen: a test over ~2 s on a 2-core machine, or one that trains or starts a runner, is `slow`). Under
    pytest-xdist the controller writes each line (a worker's own hook would write it a second time)."""
    if report.when == "call" and os.environ.get("ELMO_TEST_TIMES") and not os.environ.get("PYTEST_XDIST_WORKER"):
        with open(os.environ["ELMO_TEST_TIMES"], "a") as f:
            f.write(f"{report.duration:.2f}\t{report.nodeid}\n")
