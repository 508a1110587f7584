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
    of at most 300 characters, so that a reader's first screen is the result (runner/provenance.py)."""
    pages = sorted((REPO / "results").glob("*/*.md"))
    assert pages
    for page in pages:
        lines = page.read_text(encoding="utf-8").split("\n")
        start = next((i for i, line in enumerate(lines) if line.startswith("- **command**: ")), None)
        assert start is not None, f"{page}: no provenance block"  # at the top, or at the end (vectors.md, bilm.md)
        block = lines[start:next(i for i in range(start, len(lines)) if not lines[i].strip())]
        assert len(block) <= 15 and max(map(len, block)) <= 300, (page, len(block), max(map(len, block)))
