"""Which device the runner, `embed` and `pretrain` use: GPU slots of the local executor (simulated on CPU with a
fake GPU count and a stand-in for a training), the Ray GPU share, and one-line refusals of an unusable GPU."""
import re
import subprocess
import sys
import threading
import time
from collections import Counter

import pytest

from runner.execution.training import gpu_slots, run_local
from runner.profile import Profile, SpecError
from tests.runner.test_runner import PROFILE, REPO, runner_command, runner_env


def test_installed_torch_has_kernels_for_current_gpus():
    """The lock's torch build runs on V100 (7.0), T4 (7.5), A100 (8.0), A10/RTX 30xx (8.6), L4/RTX 40xx (8.9) and
    H100 (9.0); torch 1.12.1's CUDA 10.2 build (sm_37 sm_50 sm_60 sm_70) ran on none from 8.0 on."""
    import torch

    from elmo_module.device import kernels_run_on

    lock = re.search(r"^torch==(\S+)", (REPO / "requirements.lock").read_text(), re.M).group(1)
    if torch.__version__.split("+")[0] != lock:  # the GPU machine's own torch 2.11+cu130: CUDA 13 builds drop sm_70
        pytest.skip(f"torch {torch.__version__} is not the lock's {lock}")
    arch = torch._C._cuda_getArchFlags().split()  # what get_arch_list() returns once a GPU is there
    for capability in [(7, 0), (7, 5), (8, 0), (8, 6), (8, 9), (9, 0)]:
        assert kernels_run_on(capability, arch), (capability, arch)
    assert not kernels_run_on((8, 0), "sm_37 sm_50 sm_60 sm_70".split())


def test_gpu_slots_interleave_the_visible_gpus():
    assert gpu_slots(2) == ["0", "1"]
    assert gpu_slots(2, runs_per_gpu=3) == ["0", "1", "0", "1", "0", "1"]
    assert gpu_slots(2, 2, visible="3,5") == ["3", "5", "3", "5"]  # the parent's own CUDA_VISIBLE_DEVICES names them
    assert gpu_slots(0, 2) == []


@pytest.mark.parametrize("runs_per_gpu", [1, 2])
def test_local_executor_pins_each_run_to_one_gpu(runs_per_gpu):
    """12 stand-in runs on 3 fake GPUs: each sees one GPU as its cuda:0, never more than runs_per_gpu share one, and
    all GPUs work at once."""
    lock, busy, most, seen = threading.Lock(), Counter(), Counter(), []

    def stand_in(task, knobs, run_dir, extra_env, keep_models):  # what execute_run would pass to `allennlp train`
        gpu = extra_env["CUDA_VISIBLE_DEVICES"]
        with lock:
            busy[gpu] += 1
            most[gpu] = max(most[gpu], busy[gpu])
            most["all"] = max(most["all"], sum(busy.values()))
            seen.append((run_dir, gpu, extra_env["CUDA_DEVICE"], extra_env["OMP_NUM_THREADS"]))
        time.sleep(0.05)
        with lock:
            busy[gpu] -= 1
        return {"status": "done", "dev": 1.0, "test": 1.0, "wall_time_s": 0.05}

    jobs = [{"task": "ner", "knobs": {}, "run_dir": f"r{i}", "extra_env": {"CUDA_DEVICE": "-1"}} for i in range(12)]
    reports = []
    run_local(jobs, lambda job, status: reports.append(status), gpus=gpu_slots(3, runs_per_gpu, "0,1,2"),
              execute=stand_in)
    assert len(reports) == 12 and sorted(r for r, *_ in seen) == sorted(j["run_dir"] for j in jobs)
    assert {g for _, g, _, _ in seen} == {"0", "1", "2"}
    assert {d for _, _, d, _ in seen} == {"0"}  # the one visible GPU, whatever the profile's CUDA_DEVICE
    assert max(most[g] for g in "012") == runs_per_gpu
    assert most["all"] == 3 * runs_per_gpu


def plan_args(*argv):
    from runner.__main__ import parse_args
    from runner.settings import Settings

    return Settings.build(parse_args(list(argv)), Profile(name="t", sweeps=("table1",)))


def test_device_plan_on_fake_gpus(monkeypatch):
    import torch

    import elmo_module.device as device
    from runner.plan import device_plan

    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(device, "cuda_problem", lambda index=0: None)
    monkeypatch.setattr(device, "describe", lambda d: f"device {d}: Fake GPU (compute capability 9.0), torch x")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    slots, stages, line = device_plan(plan_args("--device", "cuda", "--runs-per-gpu", "2"))
    assert slots == ["0", "1", "0", "1"] and stages == "cuda"
    assert line.startswith("device cuda: 2 GPU(s) (Fake GPU") and "4 run(s) at a time, 2 per GPU" in line
    settings = plan_args("--device", "cuda", "--executor", "ray")
    assert device_plan(settings)[:2] == ([], "cuda") and settings.gpus_per_run == 1.0
    settings = plan_args("--device", "cuda", "--executor", "ray", "--gpus-per-run", "0.25")  # fractions stay as asked
    assert "0.25 GPU per run" in device_plan(settings)[2] and settings.gpus_per_run == 0.25
    monkeypatch.setattr(device, "cuda_problem", lambda index=0: f"GPU {index} (Fake) cannot run this torch's kernels")
    with pytest.raises(SpecError, match="^device cuda: GPU 0 \\(Fake\\) cannot run this torch's kernels$"):
        device_plan(plan_args("--device", "cuda"))
    with pytest.raises(SpecError, match="--gpus-per-run needs --device cuda"):
        device_plan(plan_args("--gpus-per-run", "1"))


def test_ray_runs_see_cuda_device_0():
    from runner.execution.jobs import job_for

    class Run:
        task, run_id, cache_key, uses_elmo = "ner", "x", "k", False
        knob_dict = {"ELMO": "none", "ELMO_MIX": "weighted", "ELMO_LAMBDA": "0", "TRAIN_FRACTION": "1", "SEED": "1"}

    class Cell:
        run, sweep, column, x, seed = Run, "table1", "baseline", None, 1

    job = job_for(Run, "d", {}, Profile(name="t", sweeps=("table1",)), [Cell],
                  plan_args("--executor", "ray", "--gpus-per-run", "0.5"))
    assert job["extra_env"]["CUDA_DEVICE"] == "0"


def errors(stderr: str) -> list:
    """stderr less Python warnings that imports print (google.api_core warns about Python 3.10 on import)."""
    lines = stderr.strip().splitlines()
    return [line for i, line in enumerate(lines)
            if "Warning: " not in line and not (i and "Warning: " in lines[i - 1] and line.startswith("  "))]


def no_usable_gpu() -> bool:
    import torch

    return not torch.cuda.is_available()


@pytest.mark.slow
@pytest.mark.skipif(not no_usable_gpu(), reason="this machine has a usable GPU")
def test_runner_refuses_cuda_without_a_usable_gpu_in_one_line(tmp_path):
    result = subprocess.run(runner_command(tmp_path, PROFILE, "--device", "cuda"), cwd=REPO, env=runner_env(tmp_path),
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 2, result.stderr
    # --device cuda is the profile's device for the preflight too, which lists the GPU among the problems
    assert len(errors(result.stderr)) == 2, result.stderr
    assert errors(result.stderr)[0] == "error: profile 't': 1 problem(s) with its inputs, nothing was run:"
    assert "  1. GPU 0: expected a CUDA GPU that torch runs kernels on" in result.stderr
    assert "found no CUDA GPU is usable by torch " in result.stderr
    assert not (tmp_path / "runs").exists()


@pytest.mark.slow
@pytest.mark.skipif(not no_usable_gpu(), reason="this machine has a usable GPU")
def test_embed_and_pretrain_refuse_cuda_and_say_their_device(tmp_path):
    (tmp_path / "in.txt").write_text("a b\n")
    common = ["--options", str(tmp_path / "o.json"), "--device", "cuda"]
    for argv in (["embed", *common, "--weights", "w", "--input", str(tmp_path / "in.txt"), "--output", "o.h5"],
                 ["pretrain", *common, "--train", "t", "--heldout", "h", "--out", str(tmp_path / "out")]):
        result = subprocess.run([sys.executable, "-m", "elmo_module", *argv], cwd=REPO, capture_output=True,
                                text=True, timeout=300, env=runner_env(tmp_path))
        assert result.returncode == 2, result.stderr
        assert len(errors(result.stderr)) == 1, result.stderr
        assert errors(result.stderr)[0].startswith("error: --device cuda: no CUDA GPU is usable by torch ")
    from elmo_module.device import resolve

    assert resolve("cpu")[1].startswith("device cpu: ")
    assert resolve(None)[0] == "cpu"
    with pytest.raises(ValueError, match="--device must be cpu, cuda or cuda:N, found 'gpu'"):
        resolve("gpu")
