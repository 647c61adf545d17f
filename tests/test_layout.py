"""The package's import graph and size: the stages import one way (no circles), a
function-local import states why it is there, no private name is imported from another module,
no module passes 500 lines and no function 60. Read from the source with ``ast`` (no module is
imported), so a new circle fails here, not at a user's first import."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# where each installed package's files lie (pyproject.toml's package-dir)
PACKAGES = {"eqsat": ROOT / "eqsat", "eqsat.rules": ROOT / "rules", "eqsat.lowering": ROOT / "lowering"}


def _modules() -> dict[str, Path]:
    out = {}
    for pkg, folder in PACKAGES.items():
        for path in folder.rglob("*.py"):
            rel = path.relative_to(folder).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            name = ".".join([pkg, *parts])
            if pkg == "eqsat" and parts[:1] in (["rules"], ["lowering"]):
                continue
            out[name] = path
    return out


MODULES = _modules()


def _package_of(name: str, path: Path) -> str:
    return name if path.name == "__init__.py" else name.rsplit(".", 1)[0]


def _type_checking_only(node, parents) -> bool:
    for p in parents:
        if isinstance(p, ast.If) and "TYPE_CHECKING" in ast.unparse(p.test):
            return True
    return False


def _imports(name: str, path: Path):
    """(imported module, names, local, line, text) for each import of an eqsat module."""
    source = path.read_text()
    tree = ast.parse(source)
    lines = source.splitlines()
    stack = [(tree, ())]
    while stack:
        node, parents = stack.pop()
        for child in ast.iter_child_nodes(node):
            stack.append((child, parents + (node,)))
        if not isinstance(node, (ast.Import, ast.ImportFrom)) or _type_checking_only(node, parents):
            continue
        local = any(isinstance(p, (ast.FunctionDef, ast.AsyncFunctionDef)) for p in parents)
        text = lines[node.lineno - 1] + (lines[node.lineno - 2] if node.lineno > 1 else "")
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == "eqsat":
                    yield a.name, (), local, node.lineno, text
            continue
        if node.level:
            base = _package_of(name, path).split(".")
            base = base[: len(base) - node.level + 1]
            mod = ".".join(base + ([node.module] if node.module else []))
        else:
            mod = node.module or ""
        if mod.split(".")[0] != "eqsat":
            continue
        names = tuple(a.name for a in node.names)
        submodules = [f"{mod}.{n}" for n in names if f"{mod}.{n}" in MODULES]
        for sub in submodules:
            yield sub, (), local, node.lineno, text
        rest = tuple(n for n in names if f"{mod}.{n}" not in MODULES)
        if rest:
            yield mod, rest, local, node.lineno, text


def _graph() -> dict[str, set[str]]:
    graph = {m: set() for m in MODULES}
    for name, path in MODULES.items():
        ancestors = {".".join(name.split(".")[:i]) for i in range(1, name.count(".") + 1)}
        for mod, _, _, _, _ in _imports(name, path):
            if mod in MODULES and mod != name:
                graph[name].add(mod)
            # importing a.b.c runs a and a.b first, unless they are running already (the
            # importing module's own packages)
            parts = mod.split(".")
            for i in range(1, len(parts)):
                target = ".".join(parts[:i])
                if target in MODULES and target not in ancestors and target != name:
                    graph[name].add(target)
    return graph


def _cycle(graph) -> list[str] | None:
    state, path = {}, []

    def visit(n):
        state[n] = 1
        path.append(n)
        for m in sorted(graph[n]):
            if state.get(m) == 1:
                return path[path.index(m) :] + [m]
            if not state.get(m):
                found = visit(m)
                if found:
                    return found
        path.pop()
        state[n] = 2
        return None

    for n in sorted(graph):
        if not state.get(n):
            found = visit(n)
            if found:
                return found
    return None


def test_the_stages_import_one_way():
    graph = _graph()
    assert _cycle(graph) is None, " -> ".join(_cycle(graph))


def test_a_function_local_import_says_why():
    unexplained = [
        f"{path.relative_to(ROOT)}:{line}"
        for name, path in MODULES.items()
        for _, _, local, line, text in _imports(name, path)
        if local and "#" not in text
    ]
    assert not unexplained, f"function-local imports without a stated reason: {unexplained}"


def test_no_private_name_is_imported_from_another_module():
    private = [
        f"{path.relative_to(ROOT)}:{line}: {mod}.{n}"
        for name, path in MODULES.items()
        for mod, names, _, line, _ in _imports(name, path)
        for n in names
        if n.startswith("_") and not n.startswith("__")
    ]
    assert not private, private


def test_the_folders_read_as_the_pipeline():
    stages = ["frontend", "ir", "egraph", "rules", "cost", "lowering", "pipeline"]
    for stage in stages:
        assert f"eqsat.{stage}" in MODULES, f"no stage package eqsat.{stage}"
    flat = sorted(n for n, p in MODULES.items() if n.count(".") == 1 and p.name != "__init__.py")
    # eqsat.deadline is imported by every stage that can stop (egraph, cost, lowering, pipeline),
    # so it lies below them all, as errors and defaults do; optimize keeps the old import path of the API
    assert flat == [
        "eqsat.cli",
        "eqsat.cli_commands",
        "eqsat.deadline",
        "eqsat.defaults",
        "eqsat.errors",
        "eqsat.optimize",
    ], flat


def test_the_stage_packages_import_one_way_too():
    """Folded to packages (eqsat.ir, eqsat.egraph, eqsat.rules, ...), the graph has no circle
    either: a stage never imports a later one (the rule registry lives in the e-graph, which the
    rules fill; lowering reads definitions through the frontend's reader, the frontend imports
    no lowering)."""

    def stage(name):
        parts = name.split(".")
        return ".".join(parts[:2])

    folded: dict[str, set[str]] = {}
    for a, deps in _graph().items():
        folded.setdefault(stage(a), set())
        for b in deps:
            if stage(b) != stage(a) and stage(b) != "eqsat":
                folded[stage(a)].add(stage(b))
    for deps in folded.values():
        deps.discard("eqsat")
    folded.pop("eqsat", None)  # the package's __init__ gathers the public API
    assert _cycle(folded) is None, " -> ".join(_cycle(folded))


def test_no_module_passes_500_lines_and_no_function_60():
    """A module over 500 lines holds more than one concept, a function over 60 more than one
    step (docs/architecture.md): split them."""
    long_modules, long_functions = [], []
    for path in MODULES.values():
        source = path.read_text()
        if len(source.splitlines()) > 500:
            long_modules.append(f"{path.relative_to(ROOT)}: {len(source.splitlines())} lines")
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > 60:
                    long_functions.append(
                        f"{path.relative_to(ROOT)}:{node.lineno} {node.name}: {length} lines"
                    )
    assert not long_modules, long_modules
    assert not long_functions, long_functions
