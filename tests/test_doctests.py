"""Every docstring example of every module runs (none is skipped).

Examples of the engine room use a few shared names, as a reader would have them at hand: ``bridge`` (the
simple-acquaintances model, solved), ``program`` (its engine room), ``np``, ``pd``, ``Path``, ``ModelSpec``
and ``Bridge``. They run in the test session's one JVM.
"""

import doctest
import importlib
import pkgutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import pslbridge
from pslbridge import Bridge
from pslbridge.model_files import ModelSpec

from conftest import MODELS, REPO

SLOW = {
    # Each of these trains or loads a network: the slow tier runs them.
    "pslbridge.benchmarks.official_model",
    "pslbridge.benchmarks.problems",
    "pslbridge.benchmarks.worker",
    "pslbridge.experiments.mnist_add",
    "pslbridge.experiments.visual_sudoku",
    "pslbridge.networks",
    "pslbridge.training",
}


def _modules() -> list[str]:
    names = ["pslbridge"]
    for info in pkgutil.walk_packages(pslbridge.__path__, "pslbridge."):
        names.append(info.name)
    return sorted(names)


MODULES = _modules()


@pytest.fixture(scope="module")
def shared(jvm_started):
    bridge = Bridge(MODELS / "simple-acquaintances" / "simple-acquaintances.json")
    bridge.infer()
    yield {
        "bridge": bridge,
        "program": bridge.program,
        "np": np,
        "pd": pd,
        "Path": Path,
        "Bridge": Bridge,
        "ModelSpec": ModelSpec,
    }
    bridge.close()


def test_every_module_is_listed():
    assert len(MODULES) > 40 and "pslbridge._java" in MODULES and "pslbridge.program.ground" in MODULES


@pytest.mark.parametrize("name", [pytest.param(m, marks=pytest.mark.slow) if m in SLOW else m for m in MODULES])
def test_docstring_examples(name, shared, monkeypatch):
    monkeypatch.chdir(REPO)
    module = importlib.import_module(name)
    finder = doctest.DocTestFinder()
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    tests = finder.find(module, name, globs={**vars(module), **shared})
    for test in tests:
        assert not any(e.options.get(doctest.SKIP) for e in test.examples), f"a skipped example in {test.name}"
        runner.run(test)
    assert runner.failures == 0, f"{runner.failures} failing example(s) in {name}"
