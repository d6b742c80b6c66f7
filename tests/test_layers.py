"""The core's layer order (README, Architecture): each module imports only modules below it, at module level.

    render → limits → files → kernel → tasks → noise_free → params → config → presets → moments → model → variants
    → checkpoints → convert → run → train → ...

No import cycle, no function-local import of interp hiding one, and nothing in the core reaching up into the
report or the CLI (which may import lazily inside functions, to keep `interp --help` fast).
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "interp"
# Bottom to top: each of these imports nothing listed after it.
ORDER = [
    "render",
    "limits",
    "files",
    "kernel",
    "tasks",
    "noise_free",
    "params",
    "config",
    "presets",
    "moments",
    "model",
    "variants",
    "checkpoints",
    "convert",
    "run",
    "train",
]
ALONE = [*ORDER, "evalset", "spectral", "baselines", "tuning", "evaluate", "evalcache", "patching", "sweep", "table"]
# The sweep package by concern, bottom to top (its __init__ puts them together): each imports no sibling after it.
SWEEP_ORDER = ["grid", "planning", "summary", "progress", "executors"]

# In a fresh interpreter: interp.<m> with only what it imports itself (a bare `interp` package, so that
# interp/__init__.py, which imports everything, does not fix the order), then `import interp.<m>` as a user does.
IMPORT_ALONE = """
import json, sys, types
bare = types.ModuleType("interp")
bare.__path__ = [{package!r}]
sys.modules["interp"] = bare
import interp.{module}
loaded = sorted(k for k in sys.modules if k.startswith("interp."))
for k in [k for k in sys.modules if k == "interp" or k.startswith("interp.")]:
    del sys.modules[k]
import interp.{module}
print(json.dumps(loaded))
"""


@pytest.fixture(scope="module")
def imported_alone() -> dict[str, subprocess.CompletedProcess]:
    """IMPORT_ALONE for every module of ALONE, a few interpreters at a time (each pays for importing torch)."""

    def run(module: str) -> subprocess.CompletedProcess:
        code = IMPORT_ALONE.format(package=str(PACKAGE), module=module)
        return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)

    with ThreadPoolExecutor(max_workers=4) as pool:
        return dict(zip(ALONE, pool.map(run, ALONE)))


def core_files() -> list[Path]:
    """interp/*.py, interp/probes/*.py and interp/sweep/*.py: everything but the report and the CLI."""
    return [
        *sorted(PACKAGE.glob("*.py")),
        *(p for sub in ("probes", "sweep") for p in sorted((PACKAGE / sub).glob("*.py"))),
    ]


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_module(name: str) -> bool:
    path = PACKAGE.parent / Path(*name.split("."))
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def interp_imports(node: ast.AST, path: Path) -> list[str]:
    """The interp modules an import statement in `path` names ('interp.x' for `from interp import x` when x is a
    module, else the package 'interp' itself)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name == "interp" or a.name.startswith("interp.")]
    if not isinstance(node, ast.ImportFrom):
        return []
    if node.level:  # relative: resolve against the importing module's package
        package = module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
        parts = package.split(".")
        base = parts[: len(parts) - (node.level - 1)]
        name = ".".join(base + ([node.module] if node.module else []))
    else:
        name = node.module or ""
    if name != "interp" and not name.startswith("interp."):
        return []
    return [f"{name}.{a.name}" if is_module(f"{name}.{a.name}") else name for a in node.names]


def graph() -> dict[str, set[str]]:
    """Module-level interp imports of every core module (a package import counts as its __init__)."""
    edges: dict[str, set[str]] = {}
    for path in core_files():
        name = module_name(path)
        tree = ast.parse(path.read_text(), str(path))
        targets = set()
        for node in tree.body:
            stmts = [node]
            if isinstance(node, (ast.If, ast.Try)):  # `if TYPE_CHECKING:` and try/except ImportError blocks
                stmts = list(ast.walk(node))
            for stmt in stmts:
                targets.update(t for t in interp_imports(stmt, path) if t != name)
        edges[name] = targets
    return edges


@pytest.mark.slow
@pytest.mark.parametrize("module", ALONE)
def test_each_core_module_imports_alone(module, imported_alone):
    """A fresh interpreter imports interp.<module> first: no cycle that only a lucky import order hides. A module
    of ORDER loads nothing of interp but itself and modules below it."""
    proc = imported_alone[module]
    assert proc.returncode == 0, proc.stderr
    loaded = {name.removeprefix("interp.").split(".")[0] for name in json.loads(proc.stdout.splitlines()[-1])}
    if module in ORDER:
        outside = loaded - set(ORDER[: ORDER.index(module) + 1])
        assert not outside, f"importing interp.{module} loads interp.{', interp.'.join(sorted(outside))}"


def test_no_function_local_imports_of_interp_in_the_core():
    local = []
    for path in core_files():
        tree = ast.parse(path.read_text(), str(path))
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                continue
            for node in ast.walk(fn):
                if interp_imports(node, path):
                    local.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}: {ast.unparse(node)}")
    assert not local, "imports of interp inside functions:\n" + "\n".join(local)


def test_core_import_graph_is_acyclic():
    edges = graph()
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                cycle = path[path.index(nxt) :] + [nxt] if nxt in path else [node, nxt]
                pytest.fail("import cycle: " + " -> ".join(cycle))
            if nxt not in state:
                visit(nxt, path + [nxt])
        state[node] = 2

    for node in sorted(edges):
        if node not in state:
            visit(node, [node])


def test_layer_order():
    """Each module of ORDER imports only modules listed before it: render, limits, files, kernel, tasks, params,
    config, presets, moments, model, variants, checkpoints, convert, run import nothing above them, train nothing of
    evalset, evaluate, probes, ... (which all sit above it)."""
    edges = graph()
    wrong = []
    for i, module in enumerate(ORDER):
        below = {f"interp.{m}" for m in ORDER[:i]}
        wrong += [f"interp.{module} imports {t}" for t in sorted(edges[f"interp.{module}"] - below)]
    assert not wrong, "\n".join(wrong)


def test_sweep_package_order():
    """interp.sweep's modules import only siblings listed before them in SWEEP_ORDER, never the package itself."""
    edges = graph()
    assert sorted(f"interp.sweep.{m}" for m in SWEEP_ORDER) == sorted(k for k in edges if k.startswith("interp.sweep."))
    wrong = []
    for i, module in enumerate(SWEEP_ORDER):
        siblings = {t for t in edges[f"interp.sweep.{module}"] if t == "interp.sweep" or t.startswith("interp.sweep.")}
        below = {f"interp.sweep.{m}" for m in SWEEP_ORDER[:i]}
        wrong += [f"interp.sweep.{module} imports {t}" for t in sorted(siblings - below)]
    assert not wrong, "\n".join(wrong)


def test_core_never_imports_report_or_cli():
    wrong = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE)
        if rel.parts[0] in ("report", "cli"):
            continue
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):  # anywhere in the file, function bodies too
            for target in interp_imports(node, path):
                if target.split(".")[:2] in (["interp", "report"], ["interp", "cli"]):
                    wrong.append(f"interp/{rel}:{node.lineno}: {ast.unparse(node)}")
    assert not wrong, "\n".join(wrong)
