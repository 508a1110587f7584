"""The documentation says what is true: README.md and docs/*.md.

- every ```bash command that starts one of the project's command-line programs (./run_all.sh, python -m runner...,
  python -m elmo_module / probes SUBCOMMAND, python tools/X.py, allennlp SUBCOMMAND) names a program and subcommand
  that exist: its `--help` exits 0, shows that subcommand in its usage line, and lists every --option the docs give
  it. One `--help` per distinct program and subcommand, all in one child process (importing allennlp once costs
  ~20 s on a loaded 2-core machine), plus ./run_all.sh itself;
- every ```python block runs as written (from the repository root);
- every relative link points to a file that exists, and its #anchor to a heading of that file;
- README.md stays a user's guide of at most 160 lines (the rest is in docs/).
"""
import contextlib
import io
import json
import os
import re
import runpy
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
README_MAX_LINES = 160
OUR_PACKAGES = {"elmo_module", "runner", "probes", "tasks", "tools"}
SEPARATORS = {";", "&&", "||", "|", "&"}
FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```", re.M | re.S)
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
OPTION = re.compile(r"--[A-Za-z0-9][\w-]*")


def doc_files():
    return [REPO / "README.md"] + sorted((REPO / "docs").glob("*.md"))


def code_blocks(text: str, language: str):
    return [body for lang, body in FENCE.findall(text) if lang == language]


def _program(words):
    """(program key, subcommand, the words after them) for a command of ours, else None. A key is
    ("script", path) for ./run_all.sh, ("module", name) for python -m name, ("path", file) for python file.py,
    ("allennlp",) for allennlp."""
    while words and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", words[0]):  # VAR=value before the command
        words = words[1:]
    if not words:
        return None
    head, rest = words[0], words[1:]
    if head == "./run_all.sh":
        return ("script", "run_all.sh"), None, rest
    if Path(head).name == "allennlp":
        key, rest = ("allennlp",), rest
    elif re.fullmatch(r"python3?(\.\d+)?", Path(head).name):
        if rest[:1] == ["-m"] and len(rest) > 1 and rest[1].split(".")[0] in OUR_PACKAGES:
            key, rest = ("module", rest[1]), rest[2:]
        elif rest and rest[0].endswith(".py") and rest[0].split("/")[0] in OUR_PACKAGES:
            return ("path", rest[0]), None, rest[1:]
        else:
            return None  # python -c, someone else's module
    else:
        return None
    sub = rest[0] if rest and not rest[0].startswith(("-", "[")) else None
    return key, sub, rest


def documented_commands(text: str):
    """{(program key, subcommand): set of --options} for every command of ours in the text's bash blocks."""
    found = {}
    for block in code_blocks(text, "bash"):
        block = re.sub(r"<[A-Za-z][^<>\n]*>", "PLACEHOLDER", block.replace("\\\n", " "))  # <what goes here>
        block = re.sub(r"\[[^\]\n]*\]", lambda m: m.group(0).replace("|", " "), block)  # [--x a|b]: not a pipe
        for line in block.splitlines():
            lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
            lexer.whitespace_split, lexer.commenters = True, "#"
            segment = []
            for word in list(lexer) + [";"]:
                if word not in SEPARATORS:
                    segment.append(word)
                    continue
                parsed = _program(segment)
                if parsed:
                    key, sub, rest = parsed
                    found.setdefault((key, sub), set()).update(o for w in rest for o in OPTION.findall(w))
                segment = []
    return found


def help_invocation(key, sub):
    """What the child process runs: ("module", name, argv) or ("path", file, argv); None for ./run_all.sh."""
    args = ([sub] if sub else []) + ["--help"]
    if key[0] == "module":
        return ["module", key[1], args]
    if key[0] == "path":
        return ["path", key[1], args]
    if key[0] == "allennlp":
        return ["module", "allennlp", args]
    return None


def child_main() -> None:
    """Run each JSON-given [kind, target, argv] as `python -m target argv` (or `python target argv`) in this process,
    and each ["python", code] block; print one JSON list of [exit status, output]."""
    results = []
    for job in json.loads(sys.stdin.read()):
        out = io.StringIO()
        code = 0
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            try:
                if job[0] == "python":
                    exec(compile(job[1], "<python block>", "exec"), {"__name__": "__doc_block__"})
                else:
                    kind, target, argv = job
                    sys.argv = [target] + argv
                    if kind == "module":
                        runpy.run_module(target, run_name="__main__", alter_sys=True)
                    else:
                        runpy.run_path(str(REPO / target), run_name="__main__")
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            except Exception as e:  # reported, not raised: the next job still runs
                out.write(f"{type(e).__name__}: {e}")
                code = 1
        results.append([code, out.getvalue()])
    sys.__stdout__.write("\n" + json.dumps(results) + "\n")


def run_child(jobs):
    completed = subprocess.run([sys.executable, __file__, "--child"], input=json.dumps(jobs), cwd=REPO,
                               capture_output=True, text=True, timeout=600)
    assert completed.returncode == 0, completed.stderr[-3000:]
    return json.loads(completed.stdout.strip().splitlines()[-1])


def help_problems(commands):
    """One line per documented command whose help fails, lacks its subcommand or lacks a documented option."""
    keys = sorted(commands, key=str)
    jobs = [help_invocation(*k) for k in keys]
    scripts = {k: subprocess.Popen(["./" + k[0][1], "--help"], cwd=REPO, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, text=True) for k in keys if k[0][0] == "script"}
    outputs = dict(zip([k for k, j in zip(keys, jobs) if j], run_child([j for j in jobs if j])))
    for key, process in scripts.items():  # ./run_all.sh --help ran beside the child
        outputs[key] = [process.wait(timeout=600), process.stdout.read()]
    problems = []
    for (program, sub), options in sorted(commands.items(), key=str):
        code, text = outputs[(program, sub)]
        name = " ".join(program[1:] + ((sub,) if sub else ())) or program[0]
        usage = " ".join(text.split("usage:", 1)[-1].split()[:12]) if "usage:" in text else ""
        if code != 0:
            last = (text.strip().splitlines() or [""])[-1]
            problems.append(f"{name} --help: exit {code}: {last}")
        elif sub and not re.search(rf"(?<![\w-]){re.escape(sub)}(?![\w-])", usage):
            problems.append(f"{name}: the usage line does not show the subcommand {sub!r}: {usage}")
        else:
            problems += [f"{name}: no option {o} in its --help" for o in sorted(options)
                         if not re.search(rf"(?<![\w-]){re.escape(o)}(?![\w-])", text)]
    return problems


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation but - and _ dropped, spaces to hyphens."""
    text = re.sub(r"[`*]", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path):
    text = FENCE.sub("", path.read_text(encoding="utf-8"))
    return {slug(m) for m in re.findall(r"^#+\s+(.*)$", text, re.M)}


def link_problems(path: Path, text: str):
    problems = []
    for target in LINK.findall(FENCE.sub("", text)):
        if re.match(r"[a-z]+:", target):
            continue  # http:, https:, mailto:
        file, _, anchor = target.partition("#")
        resolved = (path.parent / file).resolve() if file else path
        where = f"{path.relative_to(REPO) if path.is_relative_to(REPO) else path.name}: link {target}"
        if not resolved.exists():
            problems.append(f"{where}: no such file")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            problems.append(f"{where}: no heading #{anchor} in {resolved.name}")
    return problems


def test_readme_is_a_one_screen_guide():
    lines = (REPO / "README.md").read_text(encoding="utf-8").count("\n")
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines, at most {README_MAX_LINES}: move detail to docs/"


def test_every_relative_link_points_to_a_file_and_heading_that_exist():
    problems = [p for f in doc_files() for p in link_problems(f, f.read_text(encoding="utf-8"))]
    assert not problems, "\n".join(problems)


@pytest.mark.slow
def test_every_documented_command_and_python_block_runs():
    commands, blocks = {}, []
    for f in doc_files():
        text = f.read_text(encoding="utf-8")
        for key, options in documented_commands(text).items():
            commands.setdefault(key, set()).update(options)
        blocks += code_blocks(text, "python")
    names = {k[0][1] if len(k[0]) > 1 else k[0][0] for k in commands}
    assert {"run_all.sh", "elmo_module", "probes", "allennlp"} <= names, names  # the parser finds them
    problems = help_problems(commands)
    for block, (code, text) in zip(blocks, run_child([["python", b] for b in blocks])):
        if code != 0:
            problems.append(f"python block starting {block.splitlines()[0]!r}: {text.strip()[-300:]}")
    assert not problems, "\n".join(problems)


@pytest.mark.slow
def test_a_doc_naming_a_missing_subcommand_option_or_file_is_caught(tmp_path):
    doc = tmp_path / "doc.md"
    doc.write_text("```bash\n"
                   "source env.sh; OMP_NUM_THREADS=1 .venv/bin/python -m elmo_module embed --input x.txt \\\n"
                   "    --output y.hdf5   # exists\n"
                   ".venv/bin/python -m elmo_module embedd --input x.txt   # no such subcommand\n"
                   "python -m probes pos --no-such-option 3 && python -m probes wsd\n"
                   "```\n"
                   "[fine](doc.md) [gone](missing.md) [no heading](doc.md#nowhere)\n\n# A heading\n",
                   encoding="utf-8")
    commands = documented_commands(doc.read_text(encoding="utf-8"))
    assert set(commands) == {(("module", "elmo_module"), "embed"), (("module", "elmo_module"), "embedd"),
                             (("module", "probes"), "pos"), (("module", "probes"), "wsd")}
    problems = help_problems(commands)
    assert len(problems) == 2, problems
    assert "embedd --help: exit 2" in problems[0] and "no option --no-such-option" in problems[1], problems
    links = link_problems(doc, doc.read_text(encoding="utf-8"))
    assert [p.split(": ", 1)[1] for p in links] == ["link missing.md: no such file",
                                                    "link doc.md#nowhere: no heading #nowhere in doc.md"], links


if __name__ == "__main__" and sys.argv[1:] == ["--child"]:
    os.chdir(REPO)
    sys.path.insert(0, str(REPO))
    child_main()


def knob_table(text: str) -> dict:
    """docs/knobs.md's table: each knob named in a row's first cell -> the `values` of its second cell, in order."""
    rows = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.startswith("| `") else []
        if len(cells) >= 2:
            values = re.findall(r"`([^`]*)`", "|".join(cells[1:]))
            rows.update({name: values for name in re.findall(r"`([A-Z_]+)`", cells[0])})
    return rows


def test_the_knob_table_is_tasks_knobs():
    """Every knob of tasks/knobs.py has its row, no other; its default first (where it has one); a knob with a fixed
    set of values lists exactly those (the rules' one place is tasks/knobs.py RULES)."""
    from tasks.knobs import KNOBS, RULES

    rows = knob_table((REPO / "docs" / "knobs.md").read_text(encoding="utf-8"))
    assert sorted(rows) == sorted(KNOBS)
    for name, default in KNOBS.items():
        if default:
            assert rows[name][:1] == [default], (name, rows[name])
        allowed = getattr(RULES.get(name), "allowed", None)
        if allowed:
            assert set(allowed) <= set(rows[name]), (name, allowed, rows[name])


def test_the_knob_table_check_can_fail():
    table = "| `ELMO` | `none` \\| `input` |\n| `SEED`, `SIZE` | `13370` |\n"
    assert knob_table(table) == {"ELMO": ["none", "input"], "SEED": ["13370"], "SIZE": ["13370"]}
