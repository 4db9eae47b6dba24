"""The engine room's layout rules, checked on the source (no JVM): Java stays behind the JVM layer, classes
and functions stay small, and no module reaches into another's underscore names."""

import ast
import re
from pathlib import Path

from conftest import REPO

PACKAGE = REPO / "pslbridge"
JVM_LAYER = {"_java.py", "_javalog.py", "jvm.py"}


def _sources() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def test_only_the_jvm_layer_names_java():
    pattern = re.compile(r"jpype|JClass|JArray|org\.linqs")
    offenders = [str(p.relative_to(REPO)) for p in _sources() if pattern.search(p.read_text())]
    assert sorted(offenders) == sorted(f"pslbridge/{name}" for name in JVM_LAYER)


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
    ``self``) or a private module (``_java``, ``_javalog``, ...). The JVM layer is left out: there ``_name`` can
    be a Java field."""
    private_modules = {p.stem for p in PACKAGE.rglob("_*.py") if not p.name.startswith("__")}
    found = []
    for path in _sources():
        if path.name in JVM_LAYER or path.name == "official_model.py":  # the latter subclasses pslpython's class
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
