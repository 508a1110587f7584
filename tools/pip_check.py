"""``pip check``, less the broken requirements that requirements.lock breaks on purpose (requirements.overrides).

Exits 0 when pip check reports exactly the listed lines; otherwise prints every unexpected line (a real broken
requirement) and every listed line pip check no longer reports (the list is stale: edit requirements.overrides),
and exits 1. Usage: ``.venv/bin/python tools/pip_check.py [OVERRIDES]`` (run with the environment's python).
"""
import subprocess
import sys
from pathlib import Path
from typing import List, Tuple

OVERRIDES = Path(__file__).resolve().parent.parent / "requirements.overrides"


OPTIONAL = "optional: "  # a line pip check reports only where an optional lock was installed (never stale)


def expected_lines(path: Path, optional: bool = False) -> List[str]:
    """The non-comment, non-blank lines of the overrides file: each one exact line of ``pip check`` output; with
    ``optional``, those marked ``optional: `` (an optional lock's package installed --no-deps), else the others."""
    lines = [line.strip() for line in path.read_text().splitlines() if line.strip() and not line.startswith("#")]
    return [line.removeprefix(OPTIONAL) for line in lines if line.startswith(OPTIONAL) == optional]


def compare(report: str, expected: List[str], optional: List[str] = ()) -> Tuple[List[str], List[str]]:
    """(unexpected lines of the pip check ``report``, expected lines it does not contain); ``optional`` lines are
    neither."""
    lines = [line.strip() for line in report.splitlines()
             if line.strip() and line.strip() != "No broken requirements found."]
    return ([line for line in lines if line not in expected and line not in optional],
            [line for line in expected if line not in lines])


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    overrides = Path(argv[0]) if argv else OVERRIDES
    process = subprocess.run([sys.executable, "-m", "pip", "check", "--disable-pip-version-check"],
                             capture_output=True, text=True)
    unexpected, missing = compare(process.stdout + process.stderr, expected_lines(overrides),
                                  expected_lines(overrides, optional=True))
    for line in unexpected:
        print(f"pip check: broken requirement: {line}", file=sys.stderr)
    for line in missing:
        print(f"pip check: {overrides.name} lists a conflict pip check no longer reports (remove it): {line}",
              file=sys.stderr)
    if unexpected or missing:
        return 1
    print(f"pip check: no broken requirements but the {len(expected_lines(overrides))} listed in {overrides.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
