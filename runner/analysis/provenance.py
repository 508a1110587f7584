"""The provenance block that opens every results markdown file: how the results were made, in at most ~15 lines of
at most 300 characters, so the first screen of a file is its result. What does not fit is summarised here and kept
in full elsewhere: the commits that made the runs in runs_made.tsv beside the results (one row per commit), the
description, data and weights in summary.json's "provenance"."""
import os
import re
from pathlib import PurePosixPath

LINE = 300  # the longest line of the block
DATA_LINES = 4  # the data's packed lines shown before "... and N more"
TSV = "runs_made.tsv"
TSV_COLUMNS = ("commit", "runs", "first_finished", "last_finished", "machine")
# keys shown in parentheses on another key's line rather than on their own
BESIDE = {"executor": "hardware", "wall_time_s": "date", "run_wall_time_s": "date"}


def runs_made(results: list) -> list:
    """Where the finished runs come from, one row per commit and machine they were made at (a multi-session profile
    restores earlier sessions' runs), in the order they finished: the commit, how many runs, the first and last date one
    finished, the machine (runner/execution/training.py made_record). Runs archived before results carried that record
    are one row with commit None."""
    groups = {}
    for result in results:
        if result:
            made = result.get("made") or {}
            groups.setdefault((made.get("git_commit"), made.get("hardware")), []).append(made.get("finished"))
    rows = [{"commit": commit, "runs": len(dates), "first_finished": min(d or "" for d in dates) or None,
             "last_finished": max(d or "" for d in dates) or None, "machine": machine}
            for (commit, machine), dates in groups.items()]
    return sorted(rows, key=lambda r: (r["first_finished"] or "", r["commit"] or ""))


def runs_made_tsv(rows: list) -> str:
    """runs_made.tsv: the full list that the block's runs_made line summarises."""
    lines = ["\t".join(TSV_COLUMNS)]
    for row in rows:
        values = {**row, "commit": row["commit"] or "not recorded (made before runs recorded their commit)"}
        lines.append("\t".join("" if values[c] is None else str(values[c]).replace("\t", " ") for c in TSV_COLUMNS))
    return "\n".join(lines) + "\n"


def runs_made_text(rows: list, link: str = TSV) -> str:
    """One line for the rows of runs_made: how many runs at how many commits (how many of them '+changes': tracked
    code differed from the commit), the first and the last, the machine (or how many), and where the full list is."""
    if not rows:
        return "none finished"
    dated = [r for r in rows if r["commit"]]
    undated = sum(r["runs"] for r in rows if not r["commit"])
    if not dated:
        return f"{_n(undated, 'run')}, made before runs recorded their commit and date"
    commits = list(dict.fromkeys(r["commit"] for r in dated))
    first, last = dated[0], max(dated, key=lambda r: r["last_finished"] or "")
    text = f"{_n(sum(r['runs'] for r in dated), 'run')} at "
    if len(commits) == 1:
        span = sorted({first["first_finished"], last["last_finished"]})
        text += f"commit {commits[0]}, finished {' to '.join(span)}, on "
    else:
        changes = sum(1 for c in commits if c.endswith("+changes"))
        text += (f"{len(commits)} commits ({changes} of them +changes), the first {first['commit']} (finished "
                 f"{first['first_finished']}), the last {last['commit']} (finished {last['last_finished']}), on ")
    end = (f"; {undated} more made before runs recorded their commit and date" if undated else "") + \
        f"; every commit: {link}"
    machines = sorted({r["machine"] or "a machine not recorded" for r in dated})
    named = text + machines[0] + end
    return named if len(machines) == 1 and len(named) <= LINE - len("- **runs_made**: ") else \
        f"{text}{_n(len(machines), 'machine')}{end}"


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def provenance_lines(provenance: dict) -> list:
    """The header block of every markdown file, at most ~15 lines of at most LINE characters. runs_made (rows of
    runs_made()) is summarised and links runs_made.tsv; a longer value (the description) is cut to its first sentence
    or to LINE characters, saying where it is in full; the data, one entry per task or probe, packed a few to a
    line."""
    beside = {}
    for key, target in BESIDE.items():
        if key in provenance and target in provenance:
            beside.setdefault(target, []).append(f"{key} {_flat(provenance[key])}")
    lines = []
    for key, value in provenance.items():
        if key in BESIDE and BESIDE[key] in provenance:
            continue
        shortened = False
        if key == "runs_made" and isinstance(value, list):
            text = runs_made_text(value, f"[{TSV}]({TSV})")
        elif key == "description":
            text = _first_sentence(str(value))
            shortened = text != str(value).strip()
        elif key == "weights" and isinstance(value, (list, tuple)):
            text = _weights_text(list(value))
        elif isinstance(value, dict) and any(isinstance(v, dict) for v in value.values()):
            lines += [f"- **{key}**:"] + [f"  - {line}" for line in _packed(key, value)]
            continue
        else:
            text = _flat(value)
        if key in beside:
            text += f" ({', '.join(beside[key])})"
        lines.append(_cut(f"- **{key}**: {text}", key, shortened))
    return lines


def _flat(value) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k}={_flat(v)}" for k, v in value.items())
    return ", ".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)


def _cut(text: str, key: str, shortened: bool = False, limit: int = LINE) -> str:
    """text if it fits in ``limit`` characters (and is not ``shortened`` already), else cut at a word and pointed to
    its full form in summary.json."""
    where = f"… (in full: summary.json, provenance.{key})"
    if len(text) <= limit and not shortened:
        return text
    keep = text if len(text) + len(where) <= limit else text[:limit - len(where)].rsplit(" ", 1)[0]
    return keep.rstrip(" ,;:.") + where


def _first_sentence(text: str) -> str:
    """Up to the first full stop followed by a capital ("Sec. 5.3" and "et al. (2017)" do not end one)."""
    return re.split(r"(?<=[a-z0-9)\]'])\.\s+(?=[A-Z])", text.strip(), maxsplit=1)[0].rstrip(".")


def _common_dir(paths: list) -> str:
    """The folder the paths share, "" when they share none (or are fewer than two)."""
    if len(paths) < 2 or len({PurePosixPath(p).is_absolute() for p in paths}) > 1:
        return ""
    common = os.path.commonpath(paths)
    return "" if common in ("", ".", "..", "/") or common in paths else common


def _weights_text(weights: list) -> str:
    """"options.json + weights.hdf5 of artifacts/small/{bilm, bilm-ner}" when every entry pairs the same two file
    names in one folder; else the entries as they are."""
    pairs = [w.split(" + ") for w in weights]
    names = {tuple(PurePosixPath(p).name for p in pair) for pair in pairs}
    folders = [str(PurePosixPath(pair[0]).parent) for pair in pairs]
    if (len(names) != 1 or "." in folders
            or any(len({str(PurePosixPath(p).parent) for p in pair}) != 1 for pair in pairs)):
        return _flat(weights)
    common = _common_dir(folders)
    where = (f"{common}/{{{', '.join(str(PurePosixPath(f).relative_to(common)) for f in folders)}}}" if common
             else ", ".join(folders))
    return f"{' + '.join(next(iter(names)))} of {where}"


def _data_entry(name: str, values: dict) -> str:
    """One task's (or probe's) data: the paths' shared folder said once, e.g. "ner: ../shared/data/conll2003/
    TRAIN_PATH=eng.train, DEV_PATH=eng.testa, TEST_PATH=eng.testb"; one value when all are the same."""
    if len(set(map(str, values.values()))) == 1:
        return f"{name}: {next(iter(values.values()))}"
    common = _common_dir([str(v) for v in values.values() if "/" in str(v) and "(" not in str(v)])
    items = [f"{k}={PurePosixPath(str(v)).relative_to(common) if common and str(v).startswith(common + '/') else v}"
             for k, v in values.items()]
    return f"{name}: {common + '/ ' if common else ''}{', '.join(items)}"


def _packed(key: str, value: dict) -> list:
    """The entries of a dict of dicts (the data per task), a few to a line of at most LINE characters."""
    lines = []
    for entry in (_data_entry(name, v) if isinstance(v, dict) else f"{name}: {_flat(v)}" for name, v in value.items()):
        entry = _cut(entry, key, limit=LINE - 4)  # under "  - "
        if lines and len(lines[-1]) + 2 + len(entry) <= LINE - 4:
            lines[-1] += f"; {entry}"
        else:
            lines.append(entry)
    if len(lines) > DATA_LINES:
        lines = lines[:DATA_LINES - 1] + [f"… and {len(lines) - DATA_LINES + 1} more lines (in full: summary.json, "
                                          f"provenance.{key})"]
    return lines
