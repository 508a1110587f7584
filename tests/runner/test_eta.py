"""runner/execution/eta.py: unfinished runs are costed from the finished runs most like them."""
from runner.execution.eta import Estimator


def knobs(elmo="none", fraction="1.0", epochs="20", batches=""):
    return {"ELMO": elmo, "TRAIN_FRACTION": fraction, "NUM_EPOCHS": epochs, "BATCHES_PER_EPOCH": batches}


def test_the_most_like_finished_runs_set_the_cost():
    e = Estimator([("snli", knobs(), 1000.0, 10), ("snli", knobs(), 1400.0, 10),      # baseline: 120 s/epoch, 10
                   ("snli", knobs("both"), 1000.0, 5),                                  # ELMo: 200 s/epoch, 5
                   ("snli", knobs("both", "0.1", batches="172"), 90.0, 9)])            # ELMo at 10 %: 10 s/epoch
    assert e.seconds("snli", knobs()) == 1200.0
    assert e.seconds("snli", knobs("both")) == 1000.0
    assert e.seconds("snli", knobs("both", "0.1", batches="172")) == 90.0
    # no finished run at this fraction: the ELMo runs of the task (median of 200 and 10 s/epoch, of 5 and 9 epochs)
    assert e.seconds("snli", knobs("input", "0.5")) == 105.0 * 7
    assert e.seconds("snli", knobs(epochs="4")) == 120.0 * 4  # at most its own cap
    assert e.seconds("squad", knobs()) is None


def test_the_line_says_what_it_could_not_estimate():
    e = Estimator()
    e.add_result({"task": "srl", "knobs": knobs(epochs="40"), "wall_time_s": 3600.0, "epochs": [{}] * 30})
    e.add_result(None)  # a run without a readable result adds nothing
    line = e.describe([("srl", knobs(epochs="40"), 0), ("srl", knobs(epochs="40"), 0), ("squad", knobs(), 0),
                       ("squad", knobs("both"), 0)], 2)
    assert line.startswith("about 2.0 h of runs, about 60 min of wall time at 2 at a time")
    assert line.endswith("no finished run of their task yet: squad x2")
    assert e.left([("srl", knobs(epochs="40"), 0), ("srl", knobs(epochs="40"), 0)], 2) == "about 60 min left"
    assert e.left([("srl", knobs(epochs="40"), 0), ("squad", knobs(), 0)], 1) == "over 60 min left"  # squad: unknown


def test_nothing_estimated_says_only_why():
    """Before any run of its task finished, the line said "~0.0 h of runs, ~0.0 h of wall time" before the reason."""
    e = Estimator()
    assert e.describe([("coref", knobs(), 0)] * 4 + [("ner", knobs(), 0)], 2) == \
        "not estimated, no finished run of their task yet: coref x4, ner x1"
    assert e.left([("coref", knobs(), 0)], 2) == ""


def test_a_run_under_way_costs_the_epochs_it_has_left():
    """A run cut off by a session's end goes on from its checkpoint: counting it whole overstated what was left (two
    SQuAD baselines after 7 of ~40 epochs)."""
    e = Estimator([("squad", knobs(epochs="50"), 4000.0, 40)])  # 100 s per epoch, 40 epochs
    assert e.seconds("squad", knobs(epochs="50")) == 4000.0
    assert e.seconds("squad", knobs(epochs="50"), done=7) == 3300.0
    assert e.seconds("squad", knobs(epochs="50"), done=45) == 100.0  # past the usual length: one epoch at least
    assert e.describe([("squad", knobs(epochs="50"), 30)], 1).startswith("about 17 min of runs")
