"""The tree's shape: no import circle among the project's own packages, no file too long to read in one sitting.

Read from the source (``ast``), nothing imported or run: every ``import`` and ``from ... import``, at module level or
inside a function (a lazy import is still a dependency), draws an arrow from the importing module to the module it
names (``from pkg import sub``: to pkg.sub when that is a module of the tree, else to pkg).
"""
import ast
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("runner", "elmo_module", "tasks", "probes", "tools")
MAX_LINES, MAX_TEST_LINES = 600, 800


def modules(root: Path = REPO) -> dict:
    """module name -> its file, for every .py of PACKAGES under ``root``."""
    found = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            name = ".".join(path.relative_to(root).with_suffix("").parts)
            found[name.removesuffix(".__init__")] = path
    return found


def import_graph(found: dict) -> dict:
    """module -> the modules of ``found`` it imports (itself excluded)."""
    def known(name):  # the longest prefix of a dotted name that is a module of the tree
        while name and name not in found:
            name = name.rpartition(".")[0]
        return name

    graph = {}
    for module, path in found.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        targets = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                targets.update(known(alias.name) for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative: from the package, one level up per dot after the first
                    parts = package.split(".")[:len(package.split(".")) - node.level + 1]
                    base = ".".join(parts + ([base] if base else []))
                targets.update(known(f"{base}.{alias.name}") if f"{base}.{alias.name}" in found else known(base)
                               for alias in node.names)
        graph[module] = sorted(t for t in targets if t and t != module)
    return graph


def circles(graph: dict) -> list:
    """The strongly connected components of more than one module (Tarjan), each as a sorted list."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def test_no_import_circle_among_the_projects_packages():
    found = circles(import_graph(modules()))
    assert not found, "import circles (each: modules that import each other in a loop): " + "; ".join(
        " <-> ".join(c) for c in found)


def test_the_circle_finder_sees_a_lazy_import_circle(tmp_path):
    """A function-level import closes a circle as a module-level one does (the preflight and its GPU estimate were
    one such circle)."""
    (tmp_path / "runner").mkdir()
    (tmp_path / "runner" / "__init__.py").write_text("")
    (tmp_path / "runner" / "a.py").write_text("from runner.b import f\n")
    (tmp_path / "runner" / "b.py").write_text("def f():\n    from runner import a\n")
    (tmp_path / "runner" / "c.py").write_text("from . import b\n")
    graph = import_graph(modules(tmp_path))
    assert graph["runner.c"] == ["runner.b"]
    assert circles(graph) == [["runner.a", "runner.b"]]


def test_no_file_too_long_to_read_in_one_sitting():
    too_long = []
    for path in sorted(REPO.glob("*.py")) + [p for d in (*PACKAGES, "tests") for p in sorted((REPO / d).rglob("*.py"))]:
        limit = MAX_TEST_LINES if path.relative_to(REPO).parts[0] == "tests" else MAX_LINES
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > limit:
            too_long.append(f"{path.relative_to(REPO)}: {lines} lines, at most {limit}")
    assert not too_long, "split these by subject: " + "; ".join(too_long)


def test_no_tracker_numbers_in_the_tree():
    """Code, docs, results and tests say what a thing is or why, not a tracker number a reader cannot look up
    (git log keeps the history). Files git does not track are not read."""
    import subprocess

    if not (REPO / ".git").exists():
        import pytest

        pytest.skip("not a git checkout")
    found = subprocess.run(["git", "grep", "-inE", "issue [0-9]+"], cwd=REPO, capture_output=True, text=True).stdout
    assert not found, found[:2000]


def test_every_committed_results_page_opens_with_a_short_provenance_block():
    """results/*/*.md: the block of '- **key**: ...' lines from '- **command**' to the next blank line, at most 15 lines
    of at most 300 characters, so that a reader's first screen is the result (runner/analysis/provenance.py)."""
    pages = sorted((REPO / "results").glob("*/*.md"))
    assert pages
    for page in pages:
        lines = page.read_text(encoding="utf-8").split("\n")
        start = next((i for i, line in enumerate(lines) if line.startswith("- **command**: ")), None)
        assert start is not None, f"{page}: no provenance block"  # at the top, or at the end (vectors.md, bilm.md)
        block = lines[start:next(i for i in range(start, len(lines)) if not lines[i].strip())]
        assert len(block) <= 15 and max(map(len, block)) <= 300, (page, len(block), max(map(len, block)))


HEAVY = ("torch", "allennlp", "allennlp_models", "ray", "gensim", "matplotlib", "transformers", "h5py", "jinja2",
         "numpy", "scipy", "wandb", "datasets", "spacy", "nltk", "submitit")


def private_imports(found: dict) -> list:
    """``from our.module import _name`` across modules: a private name is its module's own."""
    bad = []
    for module, path in found.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in PACKAGES:
                bad += [f"{module}: {node.module}.{a.name}" for a in node.names
                        if a.name.startswith("_") and not a.name.startswith("__")]
    return bad


def unexplained_local_imports(found: dict) -> list:
    """A function-level import of the project's own modules hides an arrow of the graph: allowed only with a comment
    on its line saying why (a heavy library's import inside a function needs no such word from the project)."""
    bad = []
    for module, path in found.items():
        if not module.startswith("runner"):
            continue
        lines = path.read_text(encoding="utf-8").splitlines()
        tree = ast.parse("\n".join(lines), str(path))
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                if isinstance(node, ast.ImportFrom):
                    names = [node.module or ""]
                elif isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                else:
                    continue
                ours = [n for n in names if n.split(".")[0] in PACKAGES]
                if ours and "#" not in lines[node.lineno - 1] and "#" not in lines[node.end_lineno - 1]:
                    bad.append(f"{module}:{node.lineno} imports {ours[0]} inside {fn.name}()")
    return bad


def test_the_runner_folders_are_the_map():
    """Each job of the runner a folder (spec and the ground floor at the top), none holding more than ~12 modules."""
    runner = REPO / "runner"
    folders = [runner, *(d for d in runner.iterdir() if (d / "__init__.py").exists())]
    assert {d.name for d in folders} >= {"runner", "preflight", "execution", "stages", "data", "analysis"}
    for folder in folders:
        count = len(list(folder.glob("*.py")))
        assert count <= 12, f"{folder.relative_to(REPO)}: {count} modules"


def test_no_private_name_imported_across_modules():
    bad = private_imports(modules())
    assert not bad, "; ".join(bad)


def test_the_runners_own_imports_are_at_the_top_or_say_why():
    bad = unexplained_local_imports(modules())
    assert not bad, "\n".join(bad)


def test_the_structure_checks_can_fail(tmp_path):
    (tmp_path / "runner").mkdir()
    (tmp_path / "runner" / "__init__.py").write_text("")
    (tmp_path / "runner" / "a.py").write_text("from runner.b import _hidden\n")
    (tmp_path / "runner" / "b.py").write_text("_hidden = 1\ndef f():\n    from runner import a\n"
                                              "def g():\n    from runner import a  # cycle-free: a needs g first\n")
    found = modules(tmp_path)
    assert private_imports(found) == ["runner.a: runner.b._hidden"]
    assert [line.split(" ", 1)[1] for line in unexplained_local_imports(found)] == ["imports runner inside f()"]


def test_no_runner_function_takes_the_parsed_command_line():
    """The command line is read once (runner/__main__.py) into Settings (runner/settings.py); the pipeline's entry
    takes those, and every other function takes the fields it uses, never ``args``."""
    bad = []
    for path in sorted((REPO / "runner").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if path.name == "__main__.py" or 'if __name__ == "__main__":' in text:  # a command line's own module
            continue
        for fn in ast.walk(ast.parse(text)):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and "args" in [a.arg for a in fn.args.args]:
                bad.append(f"{path.relative_to(REPO)}: {fn.name}(args)")
    assert not bad, "; ".join(bad)
