"""A profile's ``bilm.finetune.from`` stage (no pretraining): fine-tunes given (official-layout) weights per task
once, skips it when done, and names a missing source file in one line."""
import json
import shutil
from pathlib import Path

import h5py
import numpy as np
import pytest

from runner.profile import Profile, SpecError
from runner.stages.bilm_stages import bilm_markdown, bilm_report, prepare_bilm
from tasks.knobs import KNOBS

pytestmark = pytest.mark.slow  # trains models or starts runners throughout

REPO = Path(__file__).resolve().parents[2]
BUNDLED = REPO / "elmo_module" / "bundled"


def _profile(tmp_path, source):
    return {"name": "t", "device": "cpu", "bilm": {"finetune": {
        "from": source, "tasks": ["ner"], "out": str(tmp_path / "bilm-{task}"),
        "args": ["--epochs", "1", "--batch-size", "4", "--unroll", "5", "--threads", "1"]}}}


def test_finetune_from_weights_runs_once_then_is_skipped(tmp_path, capsys):
    official = tmp_path / "official"  # stands in for ${ELMO_DIR}: weights without softmax or vocabulary
    official.mkdir()
    for name in ("tiny_options.json", "tiny_weights.hdf5"):
        shutil.copy(BUNDLED / name, official / name)
    profile = _profile(tmp_path, {"options": str(official / "tiny_options.json"),
                                  "weights": str(official / "tiny_weights.hdf5")})
    knobs = {"ner": {**KNOBS, "SIZE": "tiny"}}  # the bundled NER sample data

    prepare_bilm(Profile(sweeps=("table1",), **profile), knobs)
    tuned = tmp_path / "bilm-ner"
    record = json.loads((tuned / "perplexity.json").read_text())
    assert record["softmax"] == "new" and record["source"]["weights"] == str(official / "tiny_weights.hdf5")
    assert record["dev"]["average"] < record["dev_before"]["average"]  # the LM learned the task text
    with h5py.File(official / "tiny_weights.hdf5") as a, h5py.File(tuned / "weights.hdf5") as b:
        assert not np.array_equal(a["CNN_proj/W_proj"][...], b["CNN_proj/W_proj"][...])  # fine-tuned, not copied
    stages = json.loads((tuned / "stages.json").read_text())
    assert len(stages) == 1 and "--weights " + str(official / "tiny_weights.hdf5") in stages[0]["command"]
    assert "--device cpu" in stages[0]["command"]

    capsys.readouterr()
    prepare_bilm(Profile(sweeps=("table1",), **profile), knobs)  # done: not run again
    assert "biLM fine-tuning on ner: done" in capsys.readouterr().out
    assert len(json.loads((tuned / "stages.json").read_text())) == 1

    report = bilm_report(profile["bilm"])
    assert report["pretrain"] is None and set(report["finetune"]) == {"ner"}
    assert "No pretraining: fine-tuned from" in bilm_markdown(report, []) and "| ner | " in bilm_markdown(report, [])


def test_missing_source_weights_are_named(tmp_path, monkeypatch):
    monkeypatch.delenv("ELMO_DIR", raising=False)
    profile = _profile(tmp_path, {"options": str(BUNDLED / "tiny_options.json"), "weights": "${ELMO_DIR}/w.hdf5"})
    profile["requires"] = {"ELMO_WEIGHTS": "set ELMO_DIR to the official weights"}
    with pytest.raises(SpecError, match=r"bilm.finetune.from.weights = \$\{ELMO_DIR\}/w.hdf5: an environment "
                                        r"variable is not set; set ELMO_DIR"):
        prepare_bilm(Profile(sweeps=("table1",), **profile), {"ner": dict(KNOBS)})
    profile["bilm"]["finetune"]["from"] = {"options": str(BUNDLED / "tiny_options.json")}
    with pytest.raises(SpecError, match="needs a pretrain stage or 'from'"):
        prepare_bilm(Profile(sweeps=("table1",), **profile), {"ner": dict(KNOBS)})
    assert not (tmp_path / "bilm-ner").exists()
