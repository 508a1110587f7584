"""tools/migrate_records.py: an archive in an older format (absolute checkout paths, predictions not yet the runs'
numbers of record) brought to the current one, once; the runner itself reads the current format only."""
import json

from runner.execution.evidence import PREDICTIONS
from runner.paths import REPO
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
