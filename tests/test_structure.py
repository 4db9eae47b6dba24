"""The package's layout rules, checked on the source (no JVM): Java stays behind the JVM layer, modules, classes
and functions stay small, no import circle, no module reaches into another's underscore names, and the package
holds the library only."""

import ast
import re
from pathlib import Path

from conftest import REPO

PACKAGE = REPO / "pslbridge"


def _sources() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _in_jvm_layer(path: Path) -> bool:
    return path.name == "jvm.py" or "engine" in path.relative_to(PACKAGE).parts


def test_only_the_jvm_layer_names_java():
    pattern = re.compile(r"jpype|JClass|JArray|org\.linqs")
    offenders = [p for p in _sources() if pattern.search(p.read_text())]
    assert offenders and all(_in_jvm_layer(p) for p in offenders), [str(p) for p in offenders if not _in_jvm_layer(p)]


def test_no_module_is_over_700_lines():
    long = {str(p.relative_to(REPO)): n for p in _sources() if (n := len(p.read_text().splitlines())) > 700}
    assert not long, long


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """pslbridge modules a module imports, anywhere in it (function-level imports count too)."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("pslbridge")}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(
                    package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else [])
                )
            if base.startswith("pslbridge"):
                found.add(base)
                found |= {f"{base}.{a.name}" for a in node.names}
    return found


def test_no_import_circle():
    modules = {_module_name(p): p for p in _sources()}
    graph = {
        m: {i for i in _imports(p) if i in modules and i != m and not m.startswith(i + ".")} for m, p in modules.items()
    }
    # a package's __init__ re-exporting lazily is not an edge back into it
    state: dict[str, int] = {}
    cycles = []

    def visit(node: str, trail: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append(trail[trail.index(nxt) :] + [nxt] if nxt in trail else [node, nxt])
            elif nxt not in state:
                visit(nxt, [*trail, nxt])
        state[node] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    assert not cycles, cycles


def test_the_package_holds_the_library_only():
    names = {p.name for p in PACKAGE.iterdir()}
    assert not names & {"experiments", "benchmarks"}
    assert not [p for p in _sources() if re.search(r"\bshared\b.*data|\.\./shared", p.read_text())]


def test_classes_and_functions_stay_small():
    """No class over 300 lines; no function over 80 outside the experiment runners."""
    too_long = []
    for path in _sources():
        for node in ast.walk(ast.parse(path.read_text())):
            length = getattr(node, "end_lineno", 0) - getattr(node, "lineno", 0) + 1
            if isinstance(node, ast.ClassDef) and length > 300:
                too_long.append(f"{path.relative_to(REPO)}: class {node.name} ({length} lines)")
            is_function = isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            if is_function and length > 80 and "experiments" not in path.parts:
                too_long.append(f"{path.relative_to(REPO)}: {node.name} ({length} lines)")
    assert not too_long, too_long


def test_no_underscore_access_across_modules():
    """``other._name`` (or ``from other import _name``) only for a private name of the same module (set there on
    ``self``) or a private module (``_version``, ...). The JVM layer is left out: there ``_name`` can
    be a Java field."""
    private_modules = {p.stem for p in PACKAGE.rglob("_*.py") if not p.name.startswith("__")}
    found = []
    for path in _sources():
        if _in_jvm_layer(path):
            continue
        tree = ast.parse(path.read_text())
        own = {
            n.attr
            for n in ast.walk(tree)
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id in ("self", "cls")
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
                owner = node.value.id if isinstance(node.value, ast.Name) else ""
                if owner not in ("self", "cls") and not owner.startswith("_") and node.attr not in own:
                    found.append(f"{path.relative_to(REPO)}:{node.lineno}: {ast.unparse(node)}")
            # ``from .other import _name`` reaches in just the same (a private module's names are its own).
            if isinstance(node, ast.ImportFrom) and not (node.module or "").rsplit(".", 1)[-1].startswith("_"):
                for alias in node.names:
                    name = alias.name
                    if name.startswith("_") and not name.startswith("__") and name not in private_modules:
                        found.append(f"{path.relative_to(REPO)}:{node.lineno}: import {name}")
    assert not found, found
