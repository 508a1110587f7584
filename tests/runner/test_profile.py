"""The typed profile (runner/profile.py Profile): every key a profile file may give is a field with its default, checked
when the file is loaded; a wrong key or value is one line naming the file, the key, what was expected and what was
found; every shipped profile loads; nothing writes into a loaded profile."""
import dataclasses
import json

import pytest

import runner.__main__ as runner_main
from runner.profile import Profile, SpecError, load_profile
from runner.spec import load_sweeps
from tests.runner.fakes import ONE_COLUMN, REPO, runner_args, write_profile

PROFILES = REPO / "runner" / "profiles"
NOT_PROFILES = ("mini_bilm_options.json",)  # the small biLM's options (bilm.pretrain's --options), kept beside them


def load_error(tmp_path, **changes) -> str:
    path = write_profile(tmp_path, **changes)
    with pytest.raises(SpecError) as error:
        load_profile(str(path))
    message = str(error.value)
    assert "\n" not in message and message.startswith(f"profile '{path}': "), message
    return message


@pytest.mark.parametrize("change, key, expected, found", [
    ({"jobs": "2"}, "jobs", "an integer", "'2'"),
    ({"jobs": 0}, "jobs", "an integer >= 1", "int 0"),
    ({"jobs": True}, "jobs", "an integer", "bool True"),
    ({"cache": "no"}, "cache", "true or false", "'no'"),
    ({"archive_runs": 1}, "archive_runs", "true or false", "int 1"),
    ({"description": 3}, "description", "a string", "int 3"),
    ({"device": "gpu"}, "device", "cpu or cuda", "'gpu'"),
    ({"run_order": "random"}, "run_order", "tasks or sweeps", "'random'"),
    ({"sweeps": "table1"}, "sweeps", "a list", "'table1'"),
    ({"sweeps": ["table1", 2]}, "sweeps", "a list of sweep names", "list ['table1', 2]"),
    ({"sweeps": []}, "sweeps", "a non-empty list of", "list []"),
    ({"tasks": "ner"}, "tasks", "a list", "'ner'"),
    ({"tasks": ["ner", "ner"]}, "tasks", "each task once", "'ner'"),
    ({"knobs": {"SIZE": ["tiny"]}}, "knobs.SIZE", "a string", "list ['tiny']"),
    ({"reuse_runs_from": "results/small"}, "reuse_runs_from", "a list", "'results/small'"),
    ({"reuse_runs_from": [1]}, "reuse_runs_from", "a list of results directories", "list [1]"),
    ({"vectors": {"out": "v", "train": "corpus.txt"}}, "vectors.train", "a list", "'corpus.txt'"),
    ({"vectors": {"out": "v", "train": ["c.txt"], "dims": [300]}}, "vectors.dims", "a list of strings", "list [300]"),
    ({"vectors": {"train": ["c.txt"]}}, "vectors.out", "present", "nothing"),
    ({"bilm": {"pretrain": {"out": "b"}}}, "bilm.pretrain.args", "a list of the stage's command-line arguments",
     "nothing"),
    ({"bilm": {"pretrain": {"out": 5, "args": []}}}, "bilm.pretrain.out", "a directory (a string)", "int 5"),
    ({"bilm": {"finetune": {"out": "b-{task}", "tasks": "ner"}}}, "bilm.finetune.tasks", "a non-empty list of tasks",
     "'ner'"),
    ({"bilm": {"finetune": {"out": "b-{task}", "args": ["--epochs", 1]}}}, "bilm.finetune.args",
     "a list of the stage's command-line arguments", "list ['--epochs', 1]"),
    ({"bilm_of_record": {"from": "results/x/bilm/bilm"}}, "bilm_of_record.to", "a path (a string)", "nothing"),
    ({"sweep_overrides": {"table1": []}}, "sweep_overrides.table1", "an object of sweep fields", "list []"),
])
def test_a_wrong_value_is_one_line_naming_the_file_the_key_the_expected_and_the_found(change, key, expected, found,
                                                                                      tmp_path):
    message = load_error(tmp_path, **change)
    assert f"key '{key}': expected {expected}" in message, message
    assert message.endswith(f"found {found}"), message


def test_an_unknown_key_names_the_file_the_key_and_the_keys_expected(tmp_path):
    message = load_error(tmp_path, knobz={"SIZE": "tiny"})
    assert "key 'knobz': not a profile key (did you mean 'knobs'?); expected one of " in message, message
    assert all(name in message for name in ("archive_runs", "reuse_runs_from", "sweep_overrides")), message


def test_the_slurm_object_is_checked_at_load(tmp_path):
    """Its messages are those the command line printed when Settings read it (tests/runner/test_slurm.py)."""
    path = write_profile(tmp_path, slurm={"max_jobs": 0})
    with pytest.raises(SpecError, match=r"^profile key 'slurm': 'max_jobs' must be an integer >= 1, found 0$"):
        load_profile(str(path))


def test_seeds_not_a_positive_integer_names_the_profile_and_the_key(tmp_path):
    path = write_profile(tmp_path, sweep_overrides={"table1": {**ONE_COLUMN["table1"], "seeds": {"default": "3"}}})
    profile, _ = load_profile(str(path))
    with pytest.raises(SpecError) as error:
        load_sweeps(profile, path)
    message = str(error.value)
    assert f"with the overrides of '{path}'" in message and "key 'seeds.default': expected an integer >= 1, " \
        "found '3'" in message, message


def test_the_command_line_prints_a_wrong_value_as_one_line(tmp_path, capsys):
    path = write_profile(tmp_path, jobs="2")
    assert runner_main.main(runner_args(tmp_path, path)) == 2
    err = capsys.readouterr().err
    assert err == f"error: profile '{path}': key 'jobs': expected an integer, found '2'\n"
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("path", sorted(p for p in PROFILES.glob("*.json") if p.name not in NOT_PROFILES),
                         ids=lambda p: p.stem)
def test_every_shipped_profile_loads_and_its_keys_are_its_fields(path):
    profile, loaded_from = load_profile(path.stem)
    given = json.loads(path.read_text(encoding="utf-8"))
    assert loaded_from == path and profile.name == given.get("name", path.stem)
    for key, value in given.items():
        field = getattr(profile, key)
        assert (list(field) if isinstance(field, tuple) else field) == value, key
    assert Profile.of(profile.to_json(), path) == profile  # what to_json writes loads back the same


def test_defaults_are_the_fields_defaults(tmp_path):
    path = tmp_path / "minimal.json"
    path.write_text('{"sweeps": ["table1"]}')
    profile, _ = load_profile(str(path))
    assert profile == Profile(name="minimal", sweeps=("table1",))
    assert (profile.description, profile.tasks, profile.jobs, profile.cache, profile.archive_runs, profile.device,
            profile.run_order, profile.replicates, profile.reuse_runs_from) == \
        ("", None, 1, True, False, "cpu", "tasks", None, ())
    assert profile.knobs == profile.task_knobs == profile.bilm == profile.vectors == profile.slurm == {}
    assert profile.pretrain is None and profile.finetune == {}
    assert profile.to_json() == {"name": "minimal", "sweeps": ["table1"]}


def test_reuse_runs_from_is_a_list_of_results_directories(tmp_path):
    profile, _ = load_profile(str(write_profile(tmp_path, reuse_runs_from=["results/small"], archive_runs=True)))
    assert profile.reuse_runs_from == ("results/small",)
    for bad in ({"reuse_runs_from": [str(tmp_path)], "archive_runs": True},  # no runs/ there
                {"reuse_runs_from": ["results/small"]}):  # not archived with this profile's results
        with pytest.raises(SpecError, match="key 'reuse_runs_from': expected results directories with archived runs"):
            load_profile(str(write_profile(tmp_path, **bad)))


def test_a_loaded_profile_is_frozen():
    profile, _ = load_profile("small")
    with pytest.raises(dataclasses.FrozenInstanceError):
        profile.jobs = 3
    with pytest.raises(dataclasses.FrozenInstanceError):
        profile.device = "cuda"
    moved = dataclasses.replace(profile, device="cuda")  # the command line's device: a new profile
    assert (moved.device, profile.device) == ("cuda", "cpu")


def test_every_field_is_documented():
    text = (REPO / "docs" / "runner.md").read_text(encoding="utf-8")
    missing = [f.name for f in dataclasses.fields(Profile) if f"`{f.name}`" not in text]
    assert not missing, missing
