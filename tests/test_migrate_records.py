"""tools/migrate_records.py: an archive in an older format (absolute checkout paths, predictions not yet the runs'
numbers of record) brought to the current one, once; the runner itself reads the current format only."""
import json

import pytest

from runner.execution.evidence import PREDICTIONS
from runner.paths import REPO
from runner.spec import SpecError
from runner.stages.bilm_stages import SETTINGS, check_stage_settings
from tests.runner.test_claims import accuracy, write_run
from tools.migrate_records import main, migrate


def test_an_older_archive_is_migrated_once(tmp_path, capsys):
    results = tmp_path / "small"
    run_dir = write_run(tmp_path / "made" / "ner-1", "ner", 1, accuracy([True, True, False, True]))
    result = json.loads((run_dir / "result.json").read_text())
    result["dev"] = result["test"] = 0.7500001  # allennlp's number, a rounding away from the predictions'
    result["log"] = f"{REPO}/runs/small/ner/ner-1/log.txt"
    archived = results / "runs" / "ner"
    archived.mkdir(parents=True)
    (archived / "ner-1.json").write_text(json.dumps(result))
    (archived / f"ner-1.{PREDICTIONS}").write_bytes((run_dir / PREDICTIONS).read_bytes())
    (results / "bilm" / "bilm").mkdir(parents=True)
    (results / "bilm" / "bilm" / "stages.json").write_text(json.dumps([{"command": f"{REPO}/.venv/bin/python"}]))

    assert migrate(results) == (2, [])
    migrated = json.loads((archived / "ner-1.json").read_text())
    assert migrated["log"] == "runs/small/ner/ner-1/log.txt" and str(REPO) not in (results / "bilm").rglob(
        "*.json").__next__().read_text()
    assert migrated["reported"] == {"dev": 0.7500001, "test": 0.7500001} and migrated["dev"] == 0.75
    assert migrated["predictions"]["sha256"]  # now checked against the file wherever it is read
    assert migrate(results) == (0, [])  # once
    (archived / "ner-2.json").write_text("{cut")
    assert main([str(results)]) == 1 and "ner-2.json: expected a JSON record" in capsys.readouterr().err


def test_the_freshness_records_of_an_earlier_version_take_the_one_format(tmp_path):
    """Runs recorded {KNOB: sha256}, probes {path: sha256}, the biLM stages {args, inputs, outputs} and the vectors
    {settings, inputs, files[].sha256}: one format now, {settings, reads, writes} (runner/execution/freshness.py)."""
    run = {"run_id": "ner-1", "task": "ner", "seed": 1, "knobs": {"ELMO": "none", "TRAIN_PATH": "data/train.txt",
                                                                   "GLOVE_PATH": ""},
           "inputs": {"TRAIN_PATH": "a" * 64, "DEV_PATH": "b" * 64, "GLOVE_PATH": None}}
    run_dir = tmp_path / "runs" / "ner" / "ner-1"
    run_dir.mkdir(parents=True)
    (run_dir / "result.json").write_text(json.dumps(run))
    (run_dir / "inputs.json").write_text(json.dumps(run["inputs"]))
    (run_dir / "attempts.json").write_text(json.dumps([{"commit": "abc", "inputs": run["inputs"]}]))
    probe = tmp_path / "runs" / "probes" / "p-1"
    probe.mkdir(parents=True)
    (probe / "result.json").write_text(json.dumps({"probe": "pos", "inputs": {"w.hdf5": "c" * 64}}))
    stage = tmp_path / "bilm"
    stage.mkdir()
    (stage / "stage_args.json").write_text(json.dumps({"args": ["--epochs", "1"], "inputs": {"t.txt": "d" * 64},
                                                       "outputs": {"weights.hdf5": "e" * 64}}))
    vectors = tmp_path / "vectors"
    vectors.mkdir()
    (vectors / "vectors.json").write_text(json.dumps({"settings": {"train": ["t.txt"]}, "files": {
        "50": {"path": "vectors.50d.lowercase.txt", "sha256": "f" * 64}}}))

    assert migrate(tmp_path) == (6, [])
    reads = {"data/train.txt": "a" * 64, "tasks/ner/sample_data/dev.txt": "b" * 64}  # the bundled dev file
    assert json.loads((run_dir / "result.json").read_text())["reads"] == reads
    assert json.loads((run_dir / "reads.json").read_text()) == reads and not (run_dir / "inputs.json").exists()
    assert json.loads((run_dir / "attempts.json").read_text())[0]["reads"] == reads
    assert json.loads((probe / "result.json").read_text())["reads"] == {"w.hdf5": "c" * 64}
    assert json.loads((stage / "stage_args.json").read_text()) == {
        "settings": ["--epochs", "1"], "reads": {"t.txt": "d" * 64}, "writes": {"weights.hdf5": "e" * 64}}
    made = json.loads((vectors / "vectors.json").read_text())
    assert made["reads"] == {"t.txt": None} and "not checked" in made["reads_not_recorded"]  # nothing made up
    assert made["writes"] == {"vectors.50d.lowercase.txt": "f" * 64} and "sha256" not in made["files"]["50"]
    assert migrate(tmp_path) == (0, [])


def test_a_stage_record_of_an_earlier_version_is_refused_in_one_line(tmp_path):
    """Not taken for a stale stage (its hours of pretraining thrown away): the line names the migration tool."""
    (tmp_path / SETTINGS).write_text(json.dumps({"args": ["--epochs", "1"], "inputs": {}}))
    with pytest.raises(SpecError, match=r"stage_args.json: expected a record with 'reads' .* found one of an earlier "
                                        r"version \(args, inputs\): run python -m tools.migrate_records once"):
        check_stage_settings({"pretrain": {"out": str(tmp_path), "args": ["--epochs", "1"]}})
