"""The confirmatory replication of Table 1 (runner/profiles/small_confirm.json): the small profile's protocol with
fresh seeds only. Its runs must share nothing with the small profile's but the seed, and no run with it."""
import json
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]


def _cells(name):
    from runner.profile import load_profile
    from runner.spec import expand_cells, load_sweeps

    profile, path = load_profile(name)
    return profile, expand_cells(profile, load_sweeps(profile, path))


def test_the_confirmatory_profile_is_small_table1_with_seeds_no_small_run_used():
    confirm, cells = _cells("small_confirm")
    small, small_cells = _cells("small")
    assert {c.sweep for c in cells} == {"table1"} and len({c.run for c in cells}) == 60
    assert sorted({c.seed for c in cells}) == [6, 7, 8, 9, 10]  # small: seeds 1-3, SNLI 1-5
    assert sorted({c.task for c in cells}) == sorted(small.tasks)
    # the protocol: every knob of every run is the small profile's Table 1 run's of the same task and column, but SEED
    small_t1 = {(c.task, c.column): {k: v for k, v in c.run.knobs if k != "SEED"}
                for c in small_cells if c.sweep == "table1"}
    for c in cells:
        assert {k: v for k, v in c.run.knobs if k != "SEED"} == small_t1[(c.task, c.column)], (c.task, c.column)
    # the same stages (so the same files under artifacts/small) and no run in common with the small profile
    for key in ("vectors", "bilm", "knobs", "task_knobs"):
        assert getattr(confirm, key) == getattr(small, key), key
    # seeds 4-8 would have re-made four: SNLI's Table 2 seeds 4 and 5 are the same runs as Table 1's cells there
    assert not {c.run.run_id for c in cells} & {c.run.run_id for c in small_cells}
    assert not {c.seed for c in small_cells} & {c.seed for c in cells}


def test_first_seed_counts_the_seeds_from_it_and_bad_values_are_one_line():
    from runner.spec import SpecError, check_sweep, sweep_seeds

    sweep = json.loads((REPO_ROOT / "runner" / "sweeps" / "table1.json").read_text())
    assert sweep_seeds(sweep, "ner") == [1, 2, 3, 4, 5] and sweep_seeds(sweep, "squad") == [1]
    assert sweep_seeds(dict(sweep, first_seed=4, seeds={"default": 5}), "squad") == [4, 5, 6, 7, 8]
    for bad in (0, "4", True):
        with pytest.raises(SpecError, match=r"first_seed': expected an integer >= 1"):
            check_sweep(dict(sweep, first_seed=bad), "p")
    # a seed added later must be one of the sweep's own seeds
    check_sweep(dict(sweep, first_seed=4, seeds={"default": 5}, seeds_added_later={"ner": {"seeds": [8]}}), "p")
    with pytest.raises(SpecError, match=r"seeds_added_later.ner': expected .*4..8"):
        check_sweep(dict(sweep, first_seed=4, seeds={"default": 5}, seeds_added_later={"ner": {"seeds": [3]}}), "p")


def _git(repo, *args, when=None):
    import os
    import subprocess

    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t",
           **({"GIT_AUTHOR_DATE": f"@{when} +0000", "GIT_COMMITTER_DATE": f"@{when} +0000"} if when else {})}
    return subprocess.check_output(["git", *args], cwd=repo, env=env, text=True).strip()


def test_the_claims_page_names_the_declaring_commit_and_the_first_runs_and_a_later_change(tmp_path):
    from runner.analysis.claims_files import declaration

    _git(tmp_path, "init", "-q")
    profile = tmp_path / "p.json"
    profile.write_text("{}\n")
    _git(tmp_path, "add", "p.json")
    _git(tmp_path, "commit", "-qm", "declare", when=1_000_000)
    declared = _git(tmp_path, "rev-parse", "--short", "HEAD")
    runs = [{"attempts": [{"commit": "aaaaaaa", "started": 2_000_000 + i}]} for i in range(3)] + [{"attempts": None}]
    # a run made in one go before attempts were recorded: started when it finished less its wall time
    runs += [{"made": {"git_commit": "bbbbbbb", "finished": "1970-01-24 03:34:30 UTC"}, "wall_time_s": 20}]
    line = declaration("p.json", runs, tmp_path)
    assert f"added at {declared} (1970-01-12 13:46 UTC), unchanged since" in line
    assert "first run started at aaaaaaa (1970-01-24 03:33 UTC): every change to the profile precedes" in line
    early = declaration("p.json", runs + [{"made": {"git_commit": "ccccccc", "finished": "1970-01-24 03:33:10 UTC"},
                                           "wall_time_s": 100}], tmp_path)
    assert "first run started at ccccccc (1970-01-24 03:31 UTC)" in early
    assert declaration("p.json", [], tmp_path).endswith("unchanged since")
    profile.write_text('{"seeds": 9}\n')  # a change after the first run started: said, with the count
    _git(tmp_path, "commit", "-qam", "change", when=3_000_000)
    assert "changed 1 time(s) since (git log)" in declaration("p.json", runs, tmp_path)
    assert declaration("other.json", runs, tmp_path) is None and declaration("p.json", runs, tmp_path / "no") is None


def test_the_replication_page_sets_each_verdict_beside_the_exploratory_one(tmp_path):
    """replication.md: per claim, the paper, the exploratory profile's difference, seeds and verdict, and this
    profile's, each read from its own claims.json (never pooled); a profile it cannot find is one line."""
    from runner.analysis.replication import write_replication
    from runner.spec import SpecError

    def claim(claim_id, diff, seeds, verdict, why=None):
        return {"id": claim_id, "section": "Table 1 (Sec. 4)", "text": f"ELMo improves {claim_id[7:]}",
                "paper": "+4.7", "diff": diff, "seeds": seeds, "verdict": verdict, **({"why": why} if why else {})}

    (tmp_path / "results" / "small").mkdir(parents=True)
    (tmp_path / "results" / "small" / "claims.json").write_text(json.dumps({"claims": [
        claim("table1.squad", 3.71, [1, 2, 3], "not decidable", "seeds p = 0.0521 (≥ 0.05)"),
        claim("table1.srl", 9.0, [1, 2, 3], "supports")]}))
    ours = tmp_path / "results" / "small_confirm"
    ours.mkdir()
    (ours / "claims.json").write_text(json.dumps({"claims": [
        claim("table1.squad", 3.2, [6, 7, 8, 9, 10], "supports"),
        claim("table1.srl", 8.1, [6, 7, 8, 9, 10], "supports"),
        claim("table1.sst", 0.1, [6, 7, 8, 9, 10], "not decidable")]}))
    write_replication(ours, "small", tmp_path, ["- **command**: test"])
    page = (ours / "replication.md").read_text()
    rows = {line.split(" | ")[0]: line.split(" | ") for line in page.splitlines() if line.startswith("| Table 1")}
    assert rows["| Table 1 (Sec. 4): ELMo improves squad"][2:] == [
        "+3.71", "1, 2, 3", "**not decidable** (seeds p = 0.0521 (≥ 0.05))", "+3.20", "6, 7, 8, 9, 10", "**supports**",
        "no |"]
    assert rows["| Table 1 (Sec. 4): ELMo improves srl"][-1] == "yes |"
    assert rows["| Table 1 (Sec. 4): ELMo improves sst"][2:5] == ["—", "—", "not tested"]
    assert "1 of 3 claims reach the same verdict in both profiles." in page and "- **command**: test" in page
    with pytest.raises(SpecError, match=r"key 'replicates' \('nowhere'\): .*results/nowhere/claims.json is missing"):
        write_replication(ours, "nowhere", tmp_path, [])


def test_a_profile_replicating_one_without_results_is_refused_at_once():
    from runner.profile import SpecError, check_profile

    profile = {"sweeps": ["table1"], "tasks": ["ner"], "replicates": "no_such_profile"}
    with pytest.raises(SpecError, match=r"key 'replicates': expected the name of a profile whose "
                                        r"results/<name>/claims.json exists .* found 'no_such_profile'"):
        check_profile(profile, "p.json")
    check_profile({**profile, "replicates": "small"}, "p.json")
