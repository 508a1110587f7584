"""The SNLI and coref configs' learning-rate scheduler builds on the installed torch and halves the rate exactly as
allennlp's ``reduce_on_plateau`` did on torch 1.12 (tasks/lr_schedulers.py)."""
import pytest
import torch
from allennlp.common import Params
from allennlp.training.learning_rate_schedulers import LearningRateScheduler

from tests.conftest import REPO_ROOT


def config_scheduler(task: str) -> dict:
    import tasks.allennlp_plugin  # noqa: F401  (registers the components and sets the knobs, as allennlp does)

    trainer = Params.from_file(str(REPO_ROOT / "jsonnet_configs" / f"{task}.jsonnet")).as_dict()["trainer"]
    return trainer["learning_rate_scheduler"]


def rates(scheduler_params: dict, metrics) -> list:
    parameter = torch.nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.Adam([parameter], lr=1.0)
    scheduler = LearningRateScheduler.from_params(optimizer=optimizer, params=Params(dict(scheduler_params)))
    seen = []
    for metric in metrics:
        scheduler.step(metric)
        seen.append(optimizer.param_groups[0]["lr"])
    return seen


# Worked by hand from ReduceLROnPlateau's rule (mode max, threshold 1e-4 relative): a metric that does not beat the
# best by the threshold is a bad epoch; more than `patience` bad epochs in a row multiply the rate by `factor`.
@pytest.mark.parametrize("task, metrics, expected", [
    ("snli", [0.1, 0.2, 0.2, 0.3, 0.3, 0.29], [1.0, 1.0, 0.5, 0.5, 0.25, 0.125]),  # patience 0: each bad epoch halves
    ("coref", [0.1, 0.2, 0.2, 0.2, 0.2, 0.3], [1.0, 1.0, 1.0, 1.0, 0.5, 0.5]),  # patience 2: the 3rd in a row halves
])
def test_config_scheduler_halves_the_rate_on_plateaus(task_env, task, metrics, expected):
    params = config_scheduler(task)
    assert params["factor"] == 0.5 and params["mode"] == "max"
    assert rates(params, metrics) == expected


def test_same_schedule_as_torch_reduce_lr_on_plateau_with_every_argument():
    arguments = {"mode": "min", "factor": 0.3, "patience": 1, "threshold_mode": "abs", "threshold": 0.05,
                 "cooldown": 1, "min_lr": 0.05, "eps": 1e-3}
    metrics = [1.0, 0.99, 0.98, 0.9, 0.9, 0.9, 0.9, 0.5, 0.5, 0.5, 0.5, 0.5]
    parameter = torch.nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.SGD([parameter], lr=1.0)
    reference = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, **arguments)
    expected = []
    for metric in metrics:
        reference.step(metric)
        expected.append(optimizer.param_groups[0]["lr"])
    assert len(set(expected)) > 2  # the sequence exercises patience, cooldown and min_lr
    assert rates({"type": "reduce_on_plateau_compat", **arguments}, metrics) == expected
