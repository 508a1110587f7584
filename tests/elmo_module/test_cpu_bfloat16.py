"""bfloat16 asked of a CPU without oneDNN's bfloat16 kernels (elmo_module/precision.py): a one-line refusal before any
work, from every entry point (the CLI's --precision, a biLM built without its device at its first forward, the task
model's TASK_PRECISION, the runner's stages and runs); ELMO_ALLOW_SLOW_BFLOAT16=1 runs it anyway.

Everywhere: torch's test faked false (``no_kernels``). On a CPU that really lacks the kernels (an AVX2 one), the real
commands are run too. Before the refusal, on such a CPU the small profile's bfloat16 pretraining ran at 0.11x
float32's speed and TASK_PRECISION=bfloat16 crashed in torch's LSTM (test_task_precision's coref case failed there).
"""
import os
import subprocess
import sys
from dataclasses import replace
from types import SimpleNamespace

import pytest
import torch

from elmo_module import ElmoInputError, batch_to_ids, load_bilm, precision
from runner.profile import Profile, SpecError
from tests.conftest import REPO_ROOT
from tests.elmo_fixtures import SENTENCES, write_random_elmo
from tests.elmo_module.test_pretrain import TRAIN_ARGS, write_corpus


@pytest.fixture
def no_kernels(monkeypatch):
    monkeypatch.setattr(precision, "cpu_has_bfloat16", lambda: False)
    monkeypatch.delenv(precision.ALLOW_SLOW, raising=False)
    precision._check_cpu.cache_clear()
    yield monkeypatch
    precision._check_cpu.cache_clear()


def _one_line(error, start: str) -> None:
    message = str(error.value)
    assert "\n" not in message and message.startswith(start), message
    assert "has no bfloat16 kernels" in message and f"{precision.ALLOW_SLOW}=1" in message, message


def test_check_precision_refuses_bfloat16_on_such_a_cpu_and_the_flag_lets_it_run(no_kernels):
    with pytest.raises(ElmoInputError) as error:
        precision.check_precision("bfloat16", "cpu", what="--precision")
    _one_line(error, "--precision bfloat16: this CPU (")
    precision.check_precision("float32", "cpu")  # nothing to refuse
    precision.check_precision("bfloat16", None)  # the device is not known yet: checked at the first forward
    no_kernels.setenv(precision.ALLOW_SLOW, "1")
    precision._check_cpu.cache_clear()
    precision.check_precision("bfloat16", "cpu")


def test_a_kernelless_cpu_is_refused_and_one_with_kernels_is_not(monkeypatch):
    monkeypatch.delenv(precision.ALLOW_SLOW, raising=False)
    for has in (True, False):
        monkeypatch.setattr(precision, "cpu_has_bfloat16", lambda has=has: has)
        assert (precision.cpu_bfloat16_problem() is None) == has


def test_a_bilm_built_without_its_device_refuses_at_its_first_bfloat16_forward(no_kernels, tmp_path):
    options, weights = write_random_elmo(tmp_path)
    bilm = load_bilm(options, weights, precision="bfloat16")  # allennlp builds on the CPU, then moves the model
    with pytest.raises(ElmoInputError) as error, torch.no_grad():
        bilm(batch_to_ids(SENTENCES[:2]))
    _one_line(error, "bfloat16 autocast: this CPU (")
    with torch.no_grad():  # float32 is untouched
        load_bilm(options, weights)(batch_to_ids(SENTENCES[:2]))


def test_task_precision_bfloat16_is_refused_when_training_starts_on_the_cpu(no_kernels):
    from tasks.task_precision import TaskPrecisionCallback

    callback = TaskPrecisionCallback("/nonexistent", "bfloat16")  # the config is read before the device is known
    trainer = SimpleNamespace(model=torch.nn.Linear(2, 2))
    with pytest.raises(ElmoInputError) as error:
        callback.on_start(trainer)
    _one_line(error, "TASK_PRECISION bfloat16: this CPU (")


def _runs(**knobs):
    return [SimpleNamespace(task="ner", knob_dict={"ELMO": "input", **knobs})]


def test_the_runner_refuses_a_profile_asking_bfloat16_of_the_cpu_before_any_stage_or_run(no_kernels):
    from runner.stages.schedule import check_bfloat16

    profile = Profile(name="p", sweeps=("table1",), bilm={"pretrain": {"args": ["--precision", "bfloat16"]},
                                                          "finetune": {"args": ["--epochs", "1"]}})
    with pytest.raises(SpecError) as error:
        check_bfloat16(profile, _runs(TASK_PRECISION="bfloat16"), True, "cpu")
    message = str(error.value)
    assert "\n" not in message and message.startswith("profile 'p' asks for bfloat16 on the CPU (the biLM's pretrain "
                                                      "stage (--precision bfloat16), 1 run(s) with TASK_PRECISION="
                                                      "bfloat16), but this CPU ("), message
    assert "finetune" not in message and precision.ALLOW_SLOW in message
    check_bfloat16(profile, _runs(), False, "cpu")  # the stages are made already, the runs are float32
    check_bfloat16(profile, _runs(), True, "cuda")  # the stages run on a GPU
    check_bfloat16(replace(profile, device="cuda"), _runs(ELMO_PRECISION="bfloat16"), False, "cuda")
    with pytest.raises(SpecError, match=r"1 run\(s\) with ELMO_PRECISION=bfloat16"):
        check_bfloat16(profile, _runs(ELMO_PRECISION="bfloat16"), False, "cpu")
    no_kernels.setattr(precision, "cpu_has_bfloat16", lambda: True)
    check_bfloat16(profile, _runs(TASK_PRECISION="bfloat16"), True, "cpu")


needs_a_kernelless_cpu = pytest.mark.skipif(precision.cpu_has_bfloat16(),
                                            reason="this CPU has oneDNN bfloat16 kernels (the fake above covers it)")


@pytest.mark.slow
@needs_a_kernelless_cpu
def test_on_this_cpu_the_real_pretrain_command_stops_in_one_line_and_writes_nothing(tmp_path):
    data = write_corpus(tmp_path / "corpus")
    env = {k: v for k, v in os.environ.items() if k != precision.ALLOW_SLOW}
    done = subprocess.run([sys.executable, "-m", "elmo_module", "pretrain", "--options", str(data / "options.json"),
                           "--train", str(data / "train.txt"), "--heldout", str(data / "heldout.txt"),
                           "--out", str(tmp_path / "lm"), *TRAIN_ARGS, "--tokens", "80", "--precision", "bfloat16"],
                          cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("error: --precision bfloat16: this CPU (") and done.stderr.count("\n") == 1, (
        done.stderr)
    assert not (tmp_path / "lm").exists()


@pytest.mark.slow
@needs_a_kernelless_cpu
def test_on_this_cpu_the_real_runner_stops_in_one_line_before_any_run(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != precision.ALLOW_SLOW}
    done = subprocess.run([sys.executable, "-m", "runner", "--profile", "default", "--task-precision", "bfloat16",
                           "--runs-dir", str(tmp_path / "runs"), "--results-dir", str(tmp_path / "results")],
                          cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("error: profile 'default' asks for bfloat16 on the CPU (48 run(s) with TASK_PRECISION="
                           "bfloat16), but this CPU ("), last
    assert not list(tmp_path.glob("runs/**/result.json")) and not (tmp_path / "results" / "table1.md").exists()


def test_check_notes_the_refusal_without_stopping(no_kernels):
    from runner.preflight.checks import bfloat16_note

    profile = Profile(name="p", sweeps=("table1",),
                      bilm={"pretrain": {"out": "/nonexistent/bilm", "args": ["--precision", "bfloat16"]}})
    note = bfloat16_note(profile, _runs())
    assert len(note) == 1 and note[0].startswith(
        "bfloat16, refused when a stage or run that asks for it is still to do: profile 'p' asks for bfloat16 on the "
        "CPU (the biLM's pretrain"), note
    assert bfloat16_note(replace(profile, device="cuda"), _runs()) == []
    no_kernels.setattr(precision, "cpu_has_bfloat16", lambda: True)
    assert bfloat16_note(profile, _runs()) == []


def test_the_cpu_check_tool_says_what_this_cpu_does_and_what_the_suite_decides(capsys, monkeypatch):
    from tools.cpu_bfloat16_check import main

    monkeypatch.delenv(precision.ALLOW_SLOW, raising=False)
    assert main(["--reps", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("CPU: ") and f"bf16_supported): {precision.cpu_has_bfloat16()}" in lines[0]
    assert "bfloat16 runs at" in lines[1] and "under bfloat16 autocast" in lines[2]
    assert lines[3].startswith("torch.nn.LSTM under bfloat16 autocast: ")
    assert lines[4] == "elmo_module: bfloat16 allowed here" if precision.cpu_has_bfloat16() else (
        lines[4].startswith("elmo_module refuses bfloat16 here: this CPU ("))


def test_the_machine_record_tells_an_avx2_cpu_from_an_avx512_one_of_the_same_name(monkeypatch):
    """A run resumes from its checkpoint only on the same machine (runner/execution/resume.py compares hardware()); the
    VM's AVX-512 and AVX2-only machines were both 'AMD EPYC'."""
    from runner.execution import training as execute

    seen = {}
    for unit in ("AVX2", "AVX512"):
        monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda unit=unit: unit)
        seen[unit] = execute.hardware()
    assert ", AVX2), " in seen["AVX2"] and seen["AVX2"] != seen["AVX512"], seen
