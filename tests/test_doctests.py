"""Every docstring example of every module runs (none is skipped).

Examples of the engine room use a few shared names, as a reader would have them at hand: ``bridge`` (the
simple-acquaintances model, solved), ``program`` (its engine room), ``np``, ``pd``, ``Path``, ``ModelSpec``
and ``Bridge``. They run in the test session's one JVM.
"""

import doctest
import importlib
import importlib.util
import inspect
import pkgutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import benchmarks
import experiments
import pslbridge
from pslbridge import Bridge
from pslbridge.model import ModelSpec

from conftest import EXAMPLES, REPO

SLOW = {
    # Each of these trains or loads a network: the slow tier runs them.
    "benchmarks.official_model",
    "benchmarks.problems",
    "benchmarks.worker",
    "pslbridge.demo",
    "pslbridge.examples.mnist_addition",
    "experiments.citation.runner",
    "experiments.mnist_add.runner",
    "experiments.visual_sudoku.model",
    "pslbridge.networks",
    "pslbridge.quiet",  # imports TensorFlow twice in fresh interpreters
    "pslbridge.training",
}

#: Modules of an optional backend: their examples need that package (skipped, with the reason, without it).
OPTIONAL = {
    "pslbridge.psl_op.jax": "jax",
    "pslbridge.psl_op.tensorflow": "tensorflow",
    "pslbridge.psl_op.torch": "torch",
    "pslbridge.torch": "torch",
}


def _modules() -> list[str]:
    names = []
    for package in (pslbridge, experiments, benchmarks):
        names.append(package.__name__)
        for info in pkgutil.walk_packages(package.__path__, f"{package.__name__}."):
            names.append(info.name)
    return sorted(names)


MODULES = _modules()


@pytest.fixture(scope="module")
def solved(jvm_started):
    """The simple-acquaintances bridge, solved; rebuilt when an example closed it (``close_all``'s does)."""
    holder = []

    def current() -> Bridge:
        if not holder or repr(holder[0]) == "<Bridge closed>":
            bridge = Bridge(EXAMPLES / "simple-acquaintances" / "simple-acquaintances.json")
            bridge.infer()
            holder[:] = [bridge]
        return holder[0]

    yield current
    if holder:
        holder[0].close()


@pytest.fixture
def shared(solved):
    bridge = solved()
    return {
        "bridge": bridge,
        "program": bridge.program,
        "np": np,
        "pd": pd,
        "Path": Path,
        "Bridge": Bridge,
        "ModelSpec": ModelSpec,
    }


def test_every_module_is_listed():
    assert len(MODULES) > 40 and "pslbridge.engine.failures" in MODULES and "pslbridge.program.ground" in MODULES


@pytest.mark.parametrize("name", [pytest.param(m, marks=pytest.mark.slow) if m in SLOW else m for m in MODULES])
def test_docstring_examples(name, shared, monkeypatch):
    monkeypatch.chdir(REPO)
    if name in OPTIONAL:
        pytest.importorskip(OPTIONAL[name], reason=f"{name} needs {OPTIONAL[name]}")
    module = importlib.import_module(name)
    finder = doctest.DocTestFinder()
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    tests = finder.find(module, name, globs={**vars(module), **shared})
    for test in tests:
        assert not any(e.options.get(doctest.SKIP) for e in test.examples), f"a skipped example in {test.name}"
        runner.run(test)
    assert runner.failures == 0, f"{runner.failures} failing example(s) in {name}"


def _public_objects(name: str) -> list[tuple[str, object]]:
    if name in OPTIONAL and importlib.util.find_spec(OPTIONAL[name]) is None:
        return []
    module = importlib.import_module(name)
    objects = []
    for attr in getattr(module, "__all__", []):
        obj = getattr(module, attr)
        if (inspect.isclass(obj) or inspect.isfunction(obj)) and getattr(obj, "__module__", None) == name:
            objects.append((f"{name}.{attr}", obj))
    return objects


def test_every_public_object_of_the_library_has_an_example():
    """Classes and functions in ``__all__`` of the library's modules carry a runnable example (the experiment
    runners and benchmarks are programs with a command line and are not held to it)."""
    library = [
        m for m in MODULES if m.startswith("pslbridge") and not any(part.startswith("_") for part in m.split(".")[1:])
    ]
    missing = [name for m in library for name, obj in _public_objects(m) if ">>>" not in (obj.__doc__ or "")]
    assert not missing, f"public objects without an example: {missing}"
