"""Where an unfinished run goes on from: the checkpoint of an earlier attempt, or nothing (it starts over, saying why).

A run goes on (``allennlp train --recover``) only from a checkpoint made with the same knobs, the same input files
(reads.json), the same machine and torch (runner/execution/training.py hardware()) and the same training code
(TRAINING_CODE, its docs aside): so that a run cut off by the end of a session (a small SQuAD run takes hours) loses at
most one epoch and ends as the run never stopped would have: the same epochs, the same best epoch's model tested, the
same predictions (tests/runner/test_resume.py). allennlp restores the weights, optimizer, learning-rate schedule and
early-stopping state; the random_state callback (tasks/checkpoint_loading.py) the random generators; _last_checkpoint
the best model, which allennlp's checkpoint does not always name (_keep_best).
"""
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from runner.paths import REPO
from runner.records import differs_from_head
from runner.task_configs import elmo_embedder

ATTEMPTS = "attempts.json"  # beside log.txt: each start of an unfinished run (resume_from)
# What an allennlp training of ours imports and reads; its docs (a task's README.md) are not read by any training: an
# edit there restarted a resumable run from epoch 0 with no word (2026-11-29)
TRAINING_CODE = ("elmo_module", "tasks", "jsonnet_configs", ":(exclude)*.md")


def training_code_changed(repo: Path = REPO) -> bool:
    """Whether the code a training reads (TRAINING_CODE) differs from HEAD: a tracked change or a file git does not
    know yet. An edit elsewhere (a README, the runner) makes git_commit() "+changes" but leaves this False."""
    try:
        return differs_from_head(TRAINING_CODE, TRAINING_CODE, repo)
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


def _keep_best(model_dir: Path, epochs: int, state_path: Path, training_state: dict,
               model_state: dict) -> Optional[str]:
    """Makes the checkpoint after ``epochs`` epochs give the best epoch's model at the end of the training, or says
    why it cannot. allennlp (gradient_descent_trainer.py, _try_train) writes the checkpoint before it names best.th
    in its state: the checkpoint of the epoch that is the best so far names the one before (after the first epoch:
    none, and a run resumed there that never beat its first epoch was tested on its last epoch's weights, 2026-11-29);
    and a kill between the two leaves best.th an older best. Here best.th is made the checkpoint's own state when its
    epoch is the best, and the checkpoint names best.th (at this run directory's path) whenever an epoch was best."""
    import torch

    best_epoch = (training_state.get("metric_tracker") or {}).get("best_epoch")
    if best_epoch is None:  # no epoch validated yet: allennlp tests the last weights, as the run never stopped would
        return None
    best, partial = model_dir / "best.th", model_dir / "best.th.partial"
    if best_epoch == epochs - 1:
        average = (training_state.get("moving_average") or {}).get("shadows")
        if average:  # allennlp saves the best model with the averaged weights (SQuAD: document-qa's average)
            torch.save({**model_state, **average}, partial)
            os.replace(partial, best)
        elif not (best.is_file() and best.samefile(model_dir / f"model_state_e{epochs}_b0.th")):
            shutil.copyfile(model_dir / f"model_state_e{epochs}_b0.th", partial)
            os.replace(partial, best)
    else:
        try:
            torch.load(best, map_location="cpu", weights_only=False)
        except Exception as e:  # noqa: BLE001  (missing, cut short: any unpickling error)
            return (f"the weights of its best epoch ({best_epoch + 1}), {best}, do not load "
                    f"({type(e).__name__}); its checkpoint after epoch {epochs} cannot give the model to test")
    if training_state.get("best_model_filename") != str(best):
        training_state["best_model_filename"] = str(best)
        torch.save(training_state, state_path.with_name(state_path.name + ".partial"))
        os.replace(state_path.with_name(state_path.name + ".partial"), state_path)
    return None


def _last_checkpoint(model_dir: Path) -> Tuple[Optional[int], Optional[str]]:
    """Epochs completed at the newest checkpoint of allennlp's in ``model_dir`` whose two files load, made to give the
    best epoch's model (_keep_best); or (None, why not). A training killed while writing a checkpoint leaves it cut
    short, or leaves its model_state without its training_state (allennlp checkpointer.py:206-214 writes the model's
    first); that one is removed and the one before is used: `--recover` takes the newest model_state for the
    checkpoint (checkpointer.py find_latest_checkpoint) and crashed on the training_state it lacked."""
    import torch

    epochs_seen = set()
    for path in model_dir.glob("*_state_e*_b0.th"):
        match = re.fullmatch(r"(?:training|model)_state_e(\d+)_b0\.th", path.name)
        if match:
            epochs_seen.add(int(match.group(1)))
    for epochs in sorted(epochs_seen, reverse=True):
        files = [model_dir / f"training_state_e{epochs}_b0.th", model_dir / f"model_state_e{epochs}_b0.th"]
        try:
            training_state, model_state = [torch.load(f, map_location="cpu", weights_only=False) for f in files]
        except Exception:  # noqa: BLE001  (a missing or cut-short file: any unpickling error)
            for f in files:
                f.unlink(missing_ok=True)
            continue
        if not isinstance(training_state, dict):
            return None, f"its checkpoint {files[0]} holds no training state"
        why = _keep_best(model_dir, epochs, files[0], training_state, model_state)
        return (None, why) if why else (epochs, None)
    return None, f"no checkpoint of an epoch is left in {model_dir}"


def resume_from(run_dir: Path, started: dict) -> Tuple[List[dict], Optional[int], Optional[str]]:
    """The earlier attempts of an unfinished run, the epochs completed at the checkpoint the next attempt goes on
    from (``allennlp train --recover``), or None to start from scratch, and then why (None where no attempt was made
    before). ``started``: the attempt about to start (its commit, hardware, knobs, reads: runner/execution/training.py
    _attempt)."""
    if (run_dir / "failed.json").is_file():  # the last attempt crashed: going on could only crash the same way
        return [], None, "its last attempt crashed (failed.json)"
    if not (run_dir / ATTEMPTS).is_file():
        return [], None, None
    try:
        attempts = json.loads((run_dir / ATTEMPTS).read_text())
        last = attempts[-1]
        changed = [what for key, what in (("knobs", "its knobs"), ("reads", "the files it reads (reads.json)"),
                                          ("hardware", "the machine or torch")) if last.get(key) != started[key]]
        if not _same_code_between(last, started):
            changed.append("the training code (" + ", ".join(TRAINING_CODE[:3]) + ")")
    except (OSError, ValueError, KeyError, IndexError, TypeError, AttributeError) as e:
        return [], None, f"{run_dir / ATTEMPTS} is unreadable ({type(e).__name__})"
    if changed:
        return [], None, " and ".join(changed) + " changed since its last attempt"
    epochs, why = _last_checkpoint(run_dir / "model")
    return (attempts, epochs, None) if epochs else ([], None, why)


def _recorded_cache(model_dir: Path) -> Optional[str]:
    """The activation cache (ELMO_CACHE; '' for none) that a run's checkpoints were trained with, from the config
    allennlp saved beside them, or None if that names no elmo_module embedder."""

    try:
        embedder = elmo_embedder(json.loads((model_dir / "config.json").read_text()))
    except (OSError, ValueError):
        return None
    return None if embedder is None else embedder.get("cache_dir") or ""


def resume_cache(model_dir: Path, extra_env: Dict[str, str]) -> Tuple[Optional[Dict[str, str]], Optional[str]]:
    """``extra_env`` for a run going on from its checkpoint, or (None, why) if it cannot go on. `allennlp train
    --recover` refuses a configuration other than the one the run started with, and the activation cache's path is in
    it: a cache built afresh under another name since (its key changed, runner/stages/caches.py) would crash the run at
    once. The run goes on with the cache it started with while that is still whole (the same biLM layers of the same
    texts)."""
    recorded, given = _recorded_cache(model_dir), extra_env.get("ELMO_CACHE", "")
    if recorded is None or recorded == given:
        return extra_env, None
    if recorded and not (Path(recorded) / "meta.json").is_file():
        return None, f"the activation cache it trained with, {recorded}, is gone"
    return {**extra_env, "ELMO_CACHE": recorded}, None
