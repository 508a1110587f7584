"""A stand-in for `allennlp train`, a one-column NER profile, and the runner's command line and process around it:
the runner's own logic under test in seconds, real runner processes where a test needs real signals."""
import json
import os
import subprocess
import sys
from pathlib import Path

from runner.execution.training import child_pythonpath

REPO = Path(__file__).resolve().parents[2]
NER_TRAIN = REPO / "tasks" / "ner" / "sample_data" / "train.txt"
ONE_COLUMN = {"table1": {"tasks": ["ner"], "seeds": {"default": 1},
                         "columns": [{"label": "baseline", "knobs": {"ELMO": "none"}}]}}

# What `allennlp train` leaves in its serialization directory, as far as the runner reads it.
FAKE_TRAINING = """
import json, os, sys
model = sys.argv[1]
os.makedirs(model, exist_ok=True)
json.dump({"trainer": {"validation_metric": "+f1-measure-overall"}}, open(os.path.join(model, "config.json"), "w"))
json.dump({"best_validation_f1-measure-overall": 0.5, "test_f1-measure-overall": 0.25},
          open(os.path.join(model, "metrics.json"), "w"))
"""


def write_profile(tmp_path, **changes) -> Path:
    profile = {"sweeps": ["table1"], "tasks": ["ner"], "knobs": {"SIZE": "tiny", "NUM_EPOCHS": "1"},
               "sweep_overrides": ONE_COLUMN, **changes}
    path = tmp_path / "p.json"
    path.write_text(json.dumps(profile))
    return path


def runner_args(tmp_path, profile_path, *extra):
    return ["--profile", str(profile_path), "--runs-dir", str(tmp_path / "runs"), "--results-dir",
            str(tmp_path / "results"), "--cache-dir", str(tmp_path / "cache"), "--no-cache", *extra]


def start_runner(tmp_path, profile_path):
    """A real runner process of its own session (its process group), one run at a time: (env, command, process)."""
    env = {**os.environ, "PYTHONPATH": child_pythonpath(), "WANDB_MODE": "offline", "NLTK_DATA": str(tmp_path),
           "ALLENNLP_CACHE_ROOT": str(tmp_path / "allennlp")}
    command = [sys.executable, "-m", "runner", *runner_args(tmp_path, profile_path), "--jobs", "1"]
    return env, command, subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                          text=True, start_new_session=True)
