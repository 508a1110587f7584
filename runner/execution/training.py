"""One run = one ``allennlp train`` of a task config with its knobs, in its own directory; executors run many.

A run directory holds ``log.txt`` (the run's full output, progress bars included), ``model/`` (allennlp's serialization
dir), ``reads.json`` (the checksums of the files the run reads, written by the runner before it starts) and, once
finished, ``result.json`` (written last, atomically, with those checksums): a run is finished if and only if that file
holds a complete JSON result. Anything else is unfinished and is started again, from its last epoch checkpoint where it
can (``attempts.json``, runner/execution/resume.py) or from scratch; a crash leaves ``failed.json`` (removed again when
the run later finishes: a result always wins).

Interrupts: ``stop_runs()`` (called on Ctrl-C or a full disk) terminates every training this process started and
keeps queued runs from starting; an interrupted run writes nothing, so it is simply unfinished.
"""
import ctypes
import errno
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence

from runner.execution.evidence import BATCHING_SCREEN, PREDICTIONS, SCREENED, adopt
from runner.execution.resume import ATTEMPTS, resume_cache, resume_from, training_code_changed
from runner.metrics import percent, split_metric
from runner.paths import REPO
from runner.records import READS_FILE, git_commit, hardware, load_result, made_record, write_json

INCLUDES = ["--include-package", "tasks", "--include-package", "elmo_module.allennlp_adapter"]
HEAVY_FILES = ("best.th", "model.tar.gz")  # the frozen biLM is inside; results do not need them
NO_SPACE = (errno.ENOSPC, errno.EDQUOT)


def die_with_parent():  # a killed runner must not leave trainings behind that write into run directories
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


# The trainings this process has running, so that an interrupt can stop them all (threads of run_local start them).
LIVE = set()
LIVE_LOCK = threading.Lock()
STOPPING = threading.Event()


def stop_runs(grace_s: float = 10.0) -> int:
    """Terminate every running training (SIGKILL after ``grace_s``) and start no more; returns how many ran."""
    with LIVE_LOCK:
        STOPPING.set()
        processes = list(LIVE)
    for process in processes:
        process.terminate()
    deadline = time.time() + grace_s
    for process in processes:
        try:
            process.wait(max(0.0, deadline - time.time()))
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    return len(processes)


def child_pythonpath() -> str:
    """The PYTHONPATH of the runs and stages: the repository first (its tasks, configs and elmo_module), then the
    caller's own, which may be where allennlp comes from (a ``pip install --target`` folder, a cluster's module
    system); dropping it crashed every run with "No module named allennlp" on such a machine (the lent GPU machine)."""
    caller = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and Path(p) != REPO]
    return os.pathsep.join([str(REPO), *caller])


def train_command(task: str, model_dir: Path) -> List[str]:
    config = REPO / "jsonnet_configs" / f"{task}.jsonnet"
    return [sys.executable, "-m", "allennlp", "train", str(config), "-s", str(model_dir), *INCLUDES]


def _attempt(run_dir: Path, knobs: Dict[str, str]) -> dict:
    """The attempt about to start: the code the training reads as it starts, the machine, knobs and what it reads."""
    reads_path = run_dir / READS_FILE
    return {"commit": git_commit(), "training_code_changed": training_code_changed(), "hardware": hardware(),
            "knobs": knobs, "started": round(time.time(), 1),
            "reads": json.loads(reads_path.read_text()) if reads_path.is_file() else None}


def under_way(run_dir: Path, knobs: Dict[str, str]) -> Optional[int]:
    """The epochs done at the checkpoint of an earlier attempt that an unfinished run would go on from
    (resume_from), or None. The runner trains such runs first: a session's end cuts off the runs it was training, and
    each of them is resumable only while the training code stays as it was (a later change makes it start over)."""
    if (run_dir / "result.json").is_file() or not (run_dir / ATTEMPTS).is_file():
        return None
    return resume_from(run_dir, _attempt(run_dir, knobs))[1]


def execute_run(task: str, knobs: Dict[str, str], run_dir: str, extra_env: Dict[str, str],
                keep_models: bool = False) -> dict:
    """Train (and test) one run; returns a status dict. Safe to call again on a finished run (it skips); an
    unfinished one goes on from its last checkpoint where it can (resume_from)."""
    run_dir = Path(run_dir)
    result_path = run_dir / "result.json"
    result, _ = load_result(result_path)
    if result is not None:
        return {"status": "done", "skipped": True, **result}
    if STOPPING.is_set():
        return {"status": "interrupted"}
    model_dir = run_dir / "model"
    attempt = _attempt(run_dir, knobs)
    attempts, resume, why = resume_from(run_dir, attempt)
    if resume is not None:
        resumed_env, why = resume_cache(model_dir, extra_env)
        resume, extra_env = (resume, resumed_env) if resumed_env is not None else (None, extra_env)
    if why:  # an earlier attempt's work is thrown away: never without a word (runner/execution/resume.py)
        print(f"runner: {task} {run_dir.name} starts from scratch: {why}", flush=True)
    if resume is None:
        shutil.rmtree(model_dir, ignore_errors=True)
        attempts = []
    else:  # the earlier attempt's work that counts: up to its newest checkpoint (what came after it is redone)
        checkpoint = model_dir / f"training_state_e{resume}_b0.th"
        attempts[-1]["kept_s"] = round(max(0.0, checkpoint.stat().st_mtime - attempts[-1]["started"]), 1)
    (run_dir / "failed.json").unlink(missing_ok=True)
    (run_dir / PREDICTIONS).unlink(missing_ok=True)  # an earlier attempt's, not this run's
    run_dir.mkdir(parents=True, exist_ok=True)
    (model_dir / "unit_predictions.json.gz").unlink(missing_ok=True)
    attempts.append({**attempt, "from_epoch": resume or 0})
    write_json(run_dir / ATTEMPTS, attempts)
    env = {**os.environ, **knobs, **extra_env, "PYTHONPATH": child_pythonpath()}
    command = train_command(task, model_dir) + (["--recover"] if resume else [])
    log = run_dir / "log.txt"
    start = time.time()
    with open(log, "a" if resume else "w") as out:
        if resume:
            out.write(f"\n# attempt {len(attempts)}: goes on from the checkpoint after epoch {resume} "
                      f"(runner/execution/resume.py resume_from)\n")
        elif why:
            out.write(f"# starts from scratch: {why} (runner/execution/resume.py resume_from)\n")
        out.write(f"# {' '.join(command)}\n# knobs: {json.dumps(knobs, sort_keys=True)}\n")
        out.flush()
        with LIVE_LOCK:  # checked and registered together: a run starting during stop_runs() is not missed
            if STOPPING.is_set():
                return {"status": "interrupted"}
            process = subprocess.Popen(command, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT,
                                       preexec_fn=die_with_parent)
            LIVE.add(process)
        try:
            returncode = process.wait()
        finally:
            with LIVE_LOCK:
                LIVE.discard(process)
    if STOPPING.is_set():
        return {"status": "interrupted"}
    wall = round(time.time() - start + sum(a.get("kept_s", 0.0) for a in attempts[:-1]), 1)
    if returncode != 0:
        error = last_error_line(log)
        if "No space left on device" in error:  # every later run would fail the same way: stop the sweep
            raise OSError(errno.ENOSPC, f"No space left on device (training of {run_dir})", str(log))
        failure = {"task": task, "knobs": knobs, "seed": int(knobs["SEED"]), "returncode": returncode,
                   "log": str(log), "error": error, "wall_time_s": wall}
        write_json(run_dir / "failed.json", failure)
        return {"status": "crashed", **failure}
    metrics = json.loads((model_dir / "metrics.json").read_text())
    trainer = json.loads((model_dir / "config.json").read_text())["trainer"]
    metric = trainer.get("validation_metric", "-loss")
    metric = (metric[0] if isinstance(metric, list) else metric).lstrip("+-")
    undefined = [f"{key} {metrics[key]}" for key in (f"best_validation_{metric}", f"test_{metric}")
                 if isinstance(metrics.get(key), float) and not math.isfinite(metrics[key])]
    if undefined:  # the run's own number is not a number: a failure to report, not a result (nor one retried silently)
        failure = {"task": task, "knobs": knobs, "seed": int(knobs["SEED"]), "returncode": returncode,
                   "log": str(log), "wall_time_s": wall,
                   "error": f"{model_dir / 'metrics.json'}: {', '.join(undefined)}: expected a number (the training "
                            f"diverged?)"}
        write_json(run_dir / "failed.json", failure)
        return {"status": "crashed", **failure}
    epochs = sorted((json.loads(f.read_text()) for f in model_dir.glob("metrics_epoch_*.json")),
                    key=lambda m: m.get("epoch", 0))  # the learning curve: was the run still improving at its end?
    mix_path = model_dir / "elmo_mix_weights.json"
    result = {"run_id": run_dir.name, "task": task, "seed": int(knobs["SEED"]), "knobs": knobs, "metric": metric,
              "dev": metrics.get(f"best_validation_{metric}"), "test": metrics.get(f"test_{metric}"),
              "metrics": metrics, "epochs": [{"epoch": m.get("epoch"), "training": m.get(f"training_{metric}"),
                                              "validation": m.get(f"validation_{metric}")} for m in epochs],
              "mix_weights": json.loads(mix_path.read_text()) if mix_path.is_file() else None,
              "reads": attempt["reads"],
              "wall_time_s": wall, "log": str(log), "made": made_record(attempts[0]["commit"]),
              "attempts": [{k: a[k] for k in ("commit", "from_epoch", "started") if k in a} for a in attempts]
              if len(attempts) > 1 else None,
              "predictions": keep_predictions(model_dir, run_dir, metric, metrics, knobs)}
    # one evaluation per split: the predictions' (runner/execution/evidence.py)
    result = adopt(result, run_dir) or result
    if not keep_models:
        for name in HEAVY_FILES:
            (model_dir / name).unlink(missing_ok=True)
        for f in model_dir.glob("*_state_*.th"):
            f.unlink()
    write_json(result_path, result)
    (run_dir / "failed.json").unlink(missing_ok=True)
    return {"status": "done", "skipped": False, **result}




def batch_dependent(knobs: Dict[str, str]) -> bool:
    """Whether a run's outputs for a sentence depend on the other sentences of its batch: ELMo with the paper code's
    layer norm (elmo_module/scalar_mix.py: one mean and variance over the whole batch, as bilm-tf's
    weight_layers). allennlp's evaluation batches by length with random padding noise, the predictions pass
    (tasks/predictions.py) in file order: the two see the same model in different batches."""
    return knobs.get("ELMO_LAYER_NORM") == "true" and knobs.get("ELMO", "none") != "none"


def keep_predictions(model_dir: Path, run_dir: Path, metric: str, metrics: dict, knobs: Dict[str, str]) -> dict:
    """Moves the training's per-example predictions beside result.json once their counts give back the metric allennlp
    reported for dev (best epoch) and test (to 0.01 points; for a batch-dependent model both numbers are recorded and
    the predictions' becomes the run's number of record: runner/execution/evidence.py); returns what result.json records
    about them."""
    import gzip

    source = model_dir / "unit_predictions.json.gz"
    error = model_dir / "unit_predictions.error"
    if error.is_file():
        return {"problem": f"no per-example predictions: writing them failed: {error.read_text().strip()}"}
    if not source.is_file():
        return {"problem": "no per-example predictions: this model has no extractor (tasks/predictions.py)"}
    data = json.loads(gzip.decompress(source.read_bytes()))
    record = {"file": PREDICTIONS, "metric": data["metric"], "units": {}, "seconds": data.get("seconds")}
    for split, key in (("dev", f"best_validation_{metric}"), ("test", f"test_{metric}")):
        if split not in data["splits"] or not isinstance(metrics.get(key), (int, float)):
            continue
        ours, reported = split_metric(data, split), percent(metrics[key])
        if abs(ours - reported) > (BATCHING_SCREEN if batch_dependent(knobs) else SCREENED):
            return {"problem": f"{source}: the {split} predictions give {data['metric']} {ours:.4f}, the run "
                               f"reported {reported:.4f}; not kept"}  # e.g. a stateful biLM: other outputs later
        if abs(ours - reported) > SCREENED:
            record.setdefault("batch_dependent", {"why": "ELMo with batch-wide layer norm: the predictions pass "
                                                         "batches in file order, allennlp's evaluation by length"})
            record["batch_dependent"][split] = {"predictions": round(ours, 4), "reported": round(reported, 4)}
        record["units"][split] = len(data["splits"][split]["ids"])
    os.replace(source, run_dir / PREDICTIONS)
    return record


def last_error_line(log: Path) -> str:
    lines = [line.strip() for line in log.read_text(errors="replace").splitlines() if line.strip()]
    errors = [line for line in lines if "Error" in line or "error:" in line]
    return (errors or lines or [""])[-1][:300]


Job = Dict  # {"task", "knobs", "run_dir", "extra_env"}, or {"call", "label"}: work of the runner in a slot


def gpu_slots(count: int, runs_per_gpu: int = 1, visible: Optional[str] = None) -> List[str]:
    """The CUDA_VISIBLE_DEVICES value of each parallel slot of the local executor: each of the ``count`` GPUs this
    process sees (named as its own CUDA_VISIBLE_DEVICES, ``visible``, names them), ``runs_per_gpu`` times, GPUs
    interleaved so that the first runs spread over all GPUs."""
    names = [v.strip() for v in visible.split(",") if v.strip()][:count] if visible else []
    names = names or [str(i) for i in range(count)]
    return [name for _ in range(max(1, runs_per_gpu)) for name in names]


def run_local(jobs: List[Job], report: Callable[[Job, dict], None], keep_models: bool = False,
              parallel: int = 1, threads: Optional[int] = None, gpus: Sequence[str] = (),
              execute: Callable[..., dict] = execute_run) -> None:
    """Runs on this machine, ``parallel`` at a time, the CPU threads shared out between them (or ``threads``
    each). With ``gpus`` (gpu_slots()), one run per slot at a time instead, each pinned to its slot's GPU
    (CUDA_VISIBLE_DEVICES), which it sees as its only one (CUDA_DEVICE=0)."""
    import queue
    from concurrent.futures import ThreadPoolExecutor, as_completed

    free = queue.Queue()
    for gpu in gpus:
        free.put(gpu)
    parallel = len(gpus) or parallel
    threads = str(threads or max(1, (os.cpu_count() or 1) // parallel))

    def one(job: Job) -> dict:
        if "call" in job:  # work of the runner's own that takes a slot (the biLM stages): returns its status
            return job["call"]()
        if "after" in job and not job["after"]():  # waits for what the run reads (the word vectors); False: it failed
            return {"status": "interrupted"}
        gpu = free.get() if gpus else None
        try:
            pinned = {"CUDA_VISIBLE_DEVICES": gpu, "CUDA_DEVICE": "0"} if gpu is not None else {}
            return execute(job["task"], job["knobs"], job["run_dir"],
                           {"OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads, **job["extra_env"], **pinned},
                           keep_models)
        finally:
            if gpu is not None:
                free.put(gpu)

    STOPPING.clear()
    with ThreadPoolExecutor(max_workers=parallel) as pool:
        futures = {pool.submit(one, j): j for j in jobs}
        try:
            for future in as_completed(futures):
                status = future.result()
                if status["status"] != "interrupted":
                    report(futures[future], status)
        except BaseException:  # Ctrl-C, a full disk: stop the trainings now rather than wait for them to end
            previous = {}
            # a second Ctrl-C or SIGTERM must not cut it short
            if threading.current_thread() is threading.main_thread():
                previous = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM)}
            try:
                stop_runs()
                pool.shutdown(wait=True, cancel_futures=True)
            finally:  # an ignored SIGINT would be inherited by every process started later (and never stop them)
                for s, handler in previous.items():
                    signal.signal(s, handler)
            raise


def run_ray(jobs: List[Job], report: Callable[[Job, dict], None], keep_models: bool = False,
            address: Optional[str] = None, cpus_per_run: float = 1, gpus_per_run: float = 0) -> None:
    """The same runs as tasks on Ray: a local Ray instance of its own by default, ``address`` (or RAY_ADDRESS) for a
    cluster (the repository and the run directories must be at the same paths on every node, e.g. a shared file
    system), which it names. Ray's default (address=None) joins the cluster its temp directory records
    (ray_current_cluster) if there is one: a leftover `ray start --head` got the sweep, a dead one hung it
    (600 s, 2026-11-29); "local" always starts a new instance (ray/_private/services.py
    canonicalize_bootstrap_address)."""
    import ray

    address = address or os.environ.get("RAY_ADDRESS") or "local"
    if address == "local":  # Ray starts its workers, and so the trainings they start, at nice 15: beside any other
        os.environ.setdefault("RAY_worker_niceness", "0")  # work they got ~4 % of a core here (the local executor: 0)
    context = ray.init(address=address, ignore_reinit_error=True, log_to_driver=False, include_dashboard=False,
                       runtime_env={"env_vars": {"PYTHONPATH": child_pythonpath()}})
    where = "a local instance of its own" if address == "local" else f"the cluster at {address}"
    print(f"runner: ray: {where} ({getattr(context, 'address_info', {}).get('gcs_address', '?')}, "
          f"{ray.cluster_resources().get('CPU', 0):g} CPUs)", flush=True)
    remote = ray.remote(execute_run).options(num_cpus=cpus_per_run, num_gpus=gpus_per_run, max_retries=0)
    pending = {remote.remote(j["task"], j["knobs"], j["run_dir"], j["extra_env"], keep_models): j for j in jobs}
    try:
        while pending:
            try:
                ready, _ = ray.wait(list(pending), num_returns=1)
            except KeyboardInterrupt:  # stop the running tasks and drop the queued ones
                for ref in pending:
                    ray.cancel(ref, force=True)
                raise
            job = pending.pop(ready[0])
            try:
                report(job, ray.get(ready[0]))
            except ray.exceptions.RayError as e:
                report(job, {"status": "crashed", "log": str(Path(job["run_dir"]) / "log.txt"),
                             "error": str(e).splitlines()[0]})
    finally:
        ray.shutdown()
