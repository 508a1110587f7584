"""What the runner's tests share: a stand-in for `allennlp train`, a one-column profile and the runner's command
line around it (tests/runner/fakes.py), and the fixture that puts the stand-in in every run."""
import sys
from pathlib import Path

import pytest

import runner.execution.training as execute
from tests.runner.fakes import FAKE_TRAINING


@pytest.fixture
def fake_training(monkeypatch):
    """Every run's `allennlp train` is the stand-in above; returns the list of model dirs it trained."""
    trained = []

    def command(task, model_dir):
        trained.append(Path(model_dir))
        return [sys.executable, "-c", FAKE_TRAINING, str(model_dir)]

    monkeypatch.setattr(execute, "train_command", command)
    monkeypatch.setenv("WANDB_MODE", "offline")
    return trained
