"""One run = one ``allennlp train`` of a task config with its knobs, in its own directory; executors run many.

A run directory holds ``log.txt`` (the run's full output, progress bars included), ``model/`` (allennlp's
serialization dir), ``inputs.json`` (the checksums of the files the run reads, written by the runner before it
starts) and, once finished, ``result.json`` (written last, atomically, with those checksums): a run is finished if
and only if that file holds a complete JSON result. Anything else is unfinished and is started again, from its last
epoch checkpoint where it can (``attempts.json``, _resume_from) or from scratch; a crash leaves ``failed.json``
(removed again when the run later finishes: a result always wins).

Interrupts: ``stop_runs()`` (called on Ctrl-C or a full disk) terminates every training this process started and
keeps queued runs from starting; an interrupted run writes nothing, so it is simply unfinished.
"""
import ctypes
import errno
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from runner.evidence import BATCHING_SCREEN, PREDICTIONS, SCREENED, adopt
from runner.spec import REPO

INCLUDES = ["--include-package", "tasks", "--include-package", "elmo_module.allennlp_adapter"]
HEAVY_FILES = ("best.th", "model.tar.gz")  # the frozen biLM is inside; results do not need them
NO_SPACE = (errno.ENOSPC, errno.EDQUOT)


def _die_with_parent():  # a killed runner must not leave trainings behind that write into run directories
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


# an absolute path up to one of a checkout's own folders: /work/wt/x/runs/p/... -> runs/p/...
_OTHER_CHECKOUT = re.compile(r"(?<![\w.~-])/(?:[^\s\"'/]+/)+?(?=(?:runs|artifacts|\.venv|cache|tasks|elmo_module)/)")


def repo_relative(data):
    """``data`` (a JSON value) with this checkout's absolute path taken out of every string: what is committed under
    results/ names files relative to the repository, never the machine that made them (issue 26)."""
    prefix = f"{REPO}{os.sep}"
    if isinstance(data, str):  # this checkout's path, then any other checkout's (records made elsewhere)
        return _OTHER_CHECKOUT.sub("", data.replace(prefix, ""))
    if isinstance(data, dict):
        return {repo_relative(k): repo_relative(v) for k, v in data.items()}
    if isinstance(data, list):
        return [repo_relative(v) for v in data]
    return data


def make_portable(results_dir: Path) -> int:
    """Rewrite the archived records of a multi-session profile (runs/, bilm/, vectors/ under ``results_dir``) whose
    strings still hold this checkout's absolute path (records archived before they were written portable). Returns
    how many files changed."""
    changed = 0
    for path in sorted(p for sub in ("runs", "bilm", "vectors") for p in (results_dir / sub).rglob("*.json")):
        try:
            data = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            continue  # a broken record is reported where it is read
        portable = repo_relative(data)
        if portable != data:
            write_json(path, portable)
            changed += 1
    return changed


def write_json(path: Path, data) -> None:
    """Write-then-rename; on a failed write (a full disk) the partial file is removed, never left to look whole."""
    tmp = path.with_name(path.name + ".partial")
    try:
        with open(tmp, "w") as f:
            f.write(json.dumps(data, indent=2))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def load_result(path: Path) -> Tuple[Optional[dict], Optional[str]]:
    """(result, None) for a complete result.json; (None, what is wrong) for an empty or truncated one (a disk that
    filled up, a copy that was cut short): such a run counts as unfinished; (None, None) when there is none."""
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        return None, None
    except IsADirectoryError:
        return None, f"{path}: expected a result file, found a directory"
    try:
        result = json.loads(text)
    except json.JSONDecodeError as e:
        found = "an empty file" if not text.strip() else f"invalid JSON at line {e.lineno} ({e.msg})"
        return None, f"{path}: expected a complete JSON result, found {found}"
    if not isinstance(result, dict):
        return None, f"{path}: expected a JSON object, found {type(result).__name__}"
    # a task run's result (not a failed.json, not a probe's result, which names its probe and sweep) has its metric: 'dev' and
    # 'test' numbers or null, one of them a number (runner/results.py read_run reads them)
    numbers = [isinstance(result.get(k), (int, float)) and not isinstance(result.get(k), bool) for k in ("dev", "test")]
    if "returncode" not in result and "sweep" not in result and "probe" not in result and (
            not any(numbers) or any(not n and result.get(k) is not None for n, k in zip(numbers, ("dev", "test")))):
        return None, (f"{path}: expected a run's result with 'dev' and 'test' numbers (or one null), found "
                      f"{result.get('dev')!r} and {result.get('test')!r}")
    return result, None


# The trainings this process has running, so that an interrupt can stop them all (threads of run_local start them).
_live = set()
_live_lock = threading.Lock()
_stopping = threading.Event()


def stop_runs(grace_s: float = 10.0) -> int:
    """Terminate every running training (SIGKILL after ``grace_s``) and start no more; returns how many ran."""
    with _live_lock:
        _stopping.set()
        processes = list(_live)
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


def hardware() -> str:
    cpu = ""
    try:
        cpu = next(l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name"))
    except (OSError, StopIteration):
        import platform

        cpu = platform.processor() or ""
    import torch

    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU"
    return f"{os.cpu_count()} CPU cores ({cpu}), {gpu}, torch {torch.__version__}"


CODE_DIRS = ("elmo_module", "tasks", "runner", "jsonnet_configs", "probes", "tools")


def _differs_from_head(tracked: Sequence[str], untracked: Sequence[str], repo: Path) -> bool:
    """Whether a tracked file under the pathspecs ``tracked`` differs from HEAD, or git does not know yet (and does
    not ignore) a file under ``untracked``. Raises OSError or CalledProcessError where git cannot tell."""
    changed = subprocess.run(["git", "diff", "--quiet", "HEAD", "--", *tracked], cwd=repo,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode != 0
    new = subprocess.check_output(["git", "ls-files", "--others", "--exclude-standard", "--", *untracked], cwd=repo,
                                  text=True, stderr=subprocess.DEVNULL).strip()
    return changed or bool(new)


def git_commit(repo: Path = REPO) -> str:
    """HEAD's short hash, with "+changes" when the code differs from it: a tracked file changed (results/ excluded:
    the runner itself writes there while it works) or a file git does not know yet (and does not ignore) in a code
    folder, e.g. a new module under tasks/ that a config imports (issue 25: it was not flagged)."""
    try:
        commit = subprocess.check_output(["git", "rev-parse", "--short", "HEAD"], cwd=repo, text=True,
                                         stderr=subprocess.DEVNULL).strip()
        return commit + ("+changes" if _differs_from_head([".", ":!results"], CODE_DIRS, repo) else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def made_record(commit: str) -> dict:
    """How a run was made, kept in its result.json (and so in a multi-session profile's archive): the code it
    started with, the date it finished, the machine."""
    return {"git_commit": commit, "finished": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
            "hardware": hardware()}


def child_pythonpath() -> str:
    """The PYTHONPATH of the runs and stages: the repository first (its tasks, configs and elmo_module), then the
    caller's own, which may be where allennlp comes from (a ``pip install --target`` folder, a cluster's module
    system); dropping it crashed every run with "No module named allennlp" on such a machine (the lent GPU machine)."""
    caller = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and Path(p) != REPO]
    return os.pathsep.join([str(REPO), *caller])


def train_command(task: str, model_dir: Path) -> List[str]:
    config = REPO / "jsonnet_configs" / f"{task}.jsonnet"
    return [sys.executable, "-m", "allennlp", "train", str(config), "-s", str(model_dir), *INCLUDES]


ATTEMPTS = "attempts.json"  # beside log.txt: each start of an unfinished run (_resume_from)
TRAINING_CODE = ("elmo_module", "tasks", "jsonnet_configs")  # what an allennlp training of ours imports and reads


def training_code_changed(repo: Path = REPO) -> bool:
    """Whether the code a training reads (TRAINING_CODE) differs from HEAD: a tracked change or a file git does not
    know yet. An edit elsewhere (a README, the runner) makes git_commit() "+changes" but leaves this False."""
    try:
        return _differs_from_head(TRAINING_CODE, TRAINING_CODE, repo)
    except (OSError, subprocess.CalledProcessError):
        return True


def _same_training_code(commit_a: str, commit_b: str, repo: Path = REPO) -> bool:
    """Whether two clean commits (git_commit()) hold the same code for a training (TRAINING_CODE)."""
    if "+changes" in commit_a or "+changes" in commit_b or "unknown" in (commit_a, commit_b):
        return False
    return subprocess.run(["git", "diff", "--quiet", commit_a, commit_b, "--", *TRAINING_CODE], cwd=repo,
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0


def _trained_with(attempt: dict) -> Optional[str]:
    """The commit whose TRAINING_CODE an attempt trained with, or None where it had changes of its own there. Records
    from before ``training_code_changed`` was kept count any "+changes" (then: any edit, a README's too)."""
    commit = attempt["commit"]
    if attempt.get("training_code_changed", "+changes" in commit):
        return None
    return commit.replace("+changes", "")


def _same_code_between(last: dict, started: dict) -> bool:
    """Whether two attempts of a run train with the same code. Until 2026-11-28 an uncommitted README edit made a
    run that was cut off start over (an hour of two SQuAD runs lost): only TRAINING_CODE counts."""
    a, b = _trained_with(last), _trained_with(started)
    return a is not None and b is not None and _same_training_code(a, b)


def _last_checkpoint(model_dir: Path) -> Optional[int]:
    """Epochs completed at the newest checkpoint of allennlp's in ``model_dir`` whose two files load (a training
    killed while writing one leaves it cut short: that one is removed and the one before is used), or None.
    allennlp links ``best.th`` to the newest model state only after writing the checkpoint
    (gradient_descent_trainer.py, _try_train): when the checkpoint's own epoch is the best so far, best.th is made
    that state here, so that a kill between the two cannot leave the test evaluated on an older best."""
    import torch

    states = {}
    for path in model_dir.glob("training_state_e*_b0.th"):
        match = re.fullmatch(r"training_state_e(\d+)_b0\.th", path.name)
        if match:
            states[int(match.group(1))] = path
    for epochs in sorted(states, reverse=True):
        files = [states[epochs], model_dir / f"model_state_e{epochs}_b0.th"]
        try:
            training_state, model_state = [torch.load(f, map_location="cpu", weights_only=False) for f in files]
        except Exception:  # noqa: BLE001  (a cut-short file: any unpickling error)
            for f in files:
                f.unlink(missing_ok=True)
            continue
        training_state = training_state if isinstance(training_state, dict) else {}
        best, partial = model_dir / "best.th", model_dir / "best.th.partial"
        average = (training_state.get("moving_average") or {}).get("shadows")
        if (training_state.get("metric_tracker") or {}).get("best_epoch") == epochs - 1:
            if average:  # allennlp saves the best model with the averaged weights (SQuAD: document-qa's average)
                torch.save({**model_state, **average}, partial)
                os.replace(partial, best)
            elif not (best.is_file() and best.samefile(files[1])):
                shutil.copyfile(files[1], partial)
                os.replace(partial, best)
        return epochs
    return None


def _resume_from(run_dir: Path, started: dict) -> Tuple[List[dict], Optional[int]]:
    """The earlier attempts of an unfinished run, and the epochs completed at the checkpoint the next attempt goes on
    from (``allennlp train --recover``), or None to start from scratch. A run goes on only from a checkpoint made with
    the same knobs, the same input files (inputs.json), the same machine and torch (hardware()) and the same
    training code (TRAINING_CODE unchanged from commits that hold the same of it: results committed or a README
    edited between sessions change nothing, _same_code_between): so that a
    run cut off by the end of a session (a small SQuAD run takes hours) loses at most one epoch. allennlp restores the
    weights, optimizer, learning-rate schedule, early-stopping state and the best model so far; the random_state
    callback (tasks/checkpoint_loading.py) the random generators, so the run goes on as if never stopped.
    ``started``: the attempt about to start (its commit, hardware, knobs, inputs)."""
    if (run_dir / "failed.json").is_file():  # the last attempt crashed: going on could only crash the same way
        return [], None
    try:
        attempts = json.loads((run_dir / ATTEMPTS).read_text())
        last = attempts[-1]
        if (all(last.get(key) == started[key] for key in ("knobs", "inputs", "hardware"))
                and _same_code_between(last, started)):
            epochs = _last_checkpoint(run_dir / "model")
            if epochs:
                return attempts, epochs
    except (OSError, ValueError, KeyError, IndexError, TypeError):
        pass
    return [], None


def _recorded_cache(model_dir: Path) -> Optional[str]:
    """The activation cache (ELMO_CACHE; '' for none) that a run's checkpoints were trained with, from the config
    allennlp saved beside them, or None if that names no elmo_module embedder."""
    from runner.cache import elmo_embedder

    try:
        embedder = elmo_embedder(json.loads((model_dir / "config.json").read_text()))
    except (OSError, ValueError):
        return None
    return None if embedder is None else embedder.get("cache_dir") or ""


def _resume_cache(model_dir: Path, extra_env: Dict[str, str]) -> Optional[Dict[str, str]]:
    """``extra_env`` for a run going on from its checkpoint, or None if it cannot go on. `allennlp train --recover`
    refuses a configuration other than the one the run started with, and the activation cache's path is in it: a
    cache built afresh under another name since (its key changed, runner/cache.py) would crash the run at once. The
    run goes on with the cache it started with while that is still whole (the same biLM layers of the same texts)."""
    recorded, given = _recorded_cache(model_dir), extra_env.get("ELMO_CACHE", "")
    if recorded is None or recorded == given:
        return extra_env
    if recorded and not (Path(recorded) / "meta.json").is_file():
        return None
    return {**extra_env, "ELMO_CACHE": recorded}


def _attempt(run_dir: Path, knobs: Dict[str, str]) -> dict:
    """The attempt about to start: the code the training reads as it starts, the machine, knobs and inputs."""
    inputs_path = run_dir / "inputs.json"
    return {"commit": git_commit(), "training_code_changed": training_code_changed(), "hardware": hardware(),
            "knobs": knobs, "started": round(time.time(), 1),
            "inputs": json.loads(inputs_path.read_text()) if inputs_path.is_file() else None}


def under_way(run_dir: Path, knobs: Dict[str, str]) -> Optional[int]:
    """The epochs done at the checkpoint of an earlier attempt that an unfinished run would go on from
    (_resume_from), or None. The runner trains such runs first: a session's end cuts off the runs it was training, and
    each of them is resumable only while the training code stays as it was (a later change makes it start over)."""
    if (run_dir / "result.json").is_file() or not (run_dir / ATTEMPTS).is_file():
        return None
    return _resume_from(run_dir, _attempt(run_dir, knobs))[1]


def execute_run(task: str, knobs: Dict[str, str], run_dir: str, extra_env: Dict[str, str],
                keep_models: bool = False) -> dict:
    """Train (and test) one run; returns a status dict. Safe to call again on a finished run (it skips); an
    unfinished one goes on from its last checkpoint where it can (_resume_from)."""
    run_dir = Path(run_dir)
    result_path = run_dir / "result.json"
    result, _ = load_result(result_path)
    if result is not None:
        return {"status": "done", "skipped": True, **result}
    if _stopping.is_set():
        return {"status": "interrupted"}
    model_dir = run_dir / "model"
    attempt = _attempt(run_dir, knobs)
    attempts, resume = _resume_from(run_dir, attempt)
    if resume is not None:
        resumed_env = _resume_cache(model_dir, extra_env)
        resume, extra_env = (resume, resumed_env) if resumed_env is not None else (None, extra_env)
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
                      f"(runner/execute.py _resume_from)\n")
        out.write(f"# {' '.join(command)}\n# knobs: {json.dumps(knobs, sort_keys=True)}\n")
        out.flush()
        with _live_lock:  # checked and registered together: a run starting during stop_runs() is not missed
            if _stopping.is_set():
                return {"status": "interrupted"}
            process = subprocess.Popen(command, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT,
                                       preexec_fn=_die_with_parent)
            _live.add(process)
        try:
            returncode = process.wait()
        finally:
            with _live_lock:
                _live.discard(process)
    if _stopping.is_set():
        return {"status": "interrupted"}
    wall = round(time.time() - start + sum(a.get("kept_s", 0.0) for a in attempts[:-1]), 1)
    if returncode != 0:
        error = _last_error_line(log)
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
    epochs = sorted((json.loads(f.read_text()) for f in model_dir.glob("metrics_epoch_*.json")),
                    key=lambda m: m.get("epoch", 0))  # the learning curve: was the run still improving at its end?
    mix_path = model_dir / "elmo_mix_weights.json"
    result = {"run_id": run_dir.name, "task": task, "seed": int(knobs["SEED"]), "knobs": knobs, "metric": metric,
              "dev": metrics.get(f"best_validation_{metric}"), "test": metrics.get(f"test_{metric}"),
              "metrics": metrics, "epochs": [{"epoch": m.get("epoch"), "training": m.get(f"training_{metric}"),
                                              "validation": m.get(f"validation_{metric}")} for m in epochs],
              "mix_weights": json.loads(mix_path.read_text()) if mix_path.is_file() else None,
              "inputs": attempt["inputs"],
              "wall_time_s": wall, "log": str(log), "made": made_record(attempts[0]["commit"]),
              "attempts": [{k: a[k] for k in ("commit", "from_epoch", "started") if k in a} for a in attempts]
              if len(attempts) > 1 else None,
              "predictions": keep_predictions(model_dir, run_dir, metric, metrics, knobs)}
    result = adopt(result, run_dir) or result  # one evaluation per split: the predictions' (runner/evidence.py)
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
    """Moves the training's per-example predictions beside result.json once their counts give back the metric
    allennlp reported for dev (best epoch) and test (to 0.01 points; for a batch-dependent model both numbers are
    recorded and the predictions' becomes the run's number of record: runner/evidence.py); returns what result.json
    records about them."""
    import gzip

    from runner.stats import metric_value

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
        units = data["splits"][split]
        ours, reported = float(metric_value(data["metric"], [sum(c) for c in zip(*units["counts"])])), metrics[key]
        reported = 100.0 * reported if reported <= 1.0 else float(reported)
        if abs(ours - reported) > (BATCHING_SCREEN if batch_dependent(knobs) else SCREENED):
            return {"problem": f"{source}: the {split} predictions give {data['metric']} {ours:.4f}, the run "
                               f"reported {reported:.4f}; not kept"}  # e.g. a stateful biLM: other outputs later
        if abs(ours - reported) > 0.01:
            record.setdefault("batch_dependent", {"why": "ELMo with batch-wide layer norm: the predictions pass "
                                                         "batches in file order, allennlp's evaluation by length"})
            record["batch_dependent"][split] = {"predictions": round(ours, 4), "reported": round(reported, 4)}
        record["units"][split] = len(units["ids"])
    os.replace(source, run_dir / PREDICTIONS)
    return record


def keep_predictions_again(run_dir: Path) -> bool:
    """A finished run whose predictions an earlier rule of keep_predictions refused, while they are still in its
    model/: checked again under the current rule, and kept (result.json updated, saying when and by which code) if
    it accepts them. True if the run changed."""
    result, _ = load_result(run_dir / "result.json")
    if not result or "problem" not in (result.get("predictions") or {}) \
            or not (run_dir / "model" / "unit_predictions.json.gz").is_file():
        return False
    record = keep_predictions(run_dir / "model", run_dir, result["metric"], result["metrics"], result["knobs"])
    if "problem" in record:
        return False
    record["kept_later"] = {"git_commit": git_commit(), "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())}
    result = {**result, "predictions": record}
    write_json(run_dir / "result.json", adopt(result, run_dir) or result)
    return True


def adopt_record(run_dir: Path) -> bool:
    """A finished run recorded before its predictions were its number of record gets them as such, allennlp's numbers
    kept beside them (runner/evidence.py adopt); True if result.json changed. A predictions file that is not the
    run's own is named in one line and left as it is (the claims then leave the run out: evidence.check_run)."""
    result, _ = load_result(run_dir / "result.json")
    try:
        adopted = adopt(result, run_dir) if result else None
    except (OSError, EOFError, ValueError, KeyError, TypeError) as e:  # cut, not gzip, not JSON, not the run's own
        print(f"warning: {run_dir / PREDICTIONS}: not made the run's number of record: {str(e)[:200]}", file=sys.stderr,
              flush=True)
        return False
    if adopted is None:
        return False
    write_json(run_dir / "result.json", dict(adopted, record_from_predictions={
        "git_commit": git_commit(), "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())}))
    return True


def _last_error_line(log: Path) -> str:
    lines = [l.strip() for l in log.read_text(errors="replace").splitlines() if l.strip()]
    errors = [l for l in lines if "Error" in l or "error:" in l]
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

    _stopping.clear()
    with ThreadPoolExecutor(max_workers=parallel) as pool:
        futures = {pool.submit(one, j): j for j in jobs}
        try:
            for future in as_completed(futures):
                status = future.result()
                if status["status"] != "interrupted":
                    report(futures[future], status)
        except BaseException:  # Ctrl-C, a full disk: stop the trainings now rather than wait for them to end
            previous = {}
            if threading.current_thread() is threading.main_thread():  # a second Ctrl-C or SIGTERM must not cut it short
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
    """The same runs as tasks on Ray: a local Ray instance by default, ``address`` for a cluster (the repository
    and the run directories must be at the same paths on every node, e.g. a shared file system)."""
    import ray

    if address is None:  # Ray starts its workers, and so the trainings they start, at nice 15: beside any other
        os.environ.setdefault("RAY_worker_niceness", "0")  # work they got ~4 % of a core here (the local executor: 0)
    ray.init(address=address, ignore_reinit_error=True, log_to_driver=False, include_dashboard=False,
             runtime_env={"env_vars": {"PYTHONPATH": child_pythonpath()}})
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
