"""Run the docstring examples of the modules that need no JVM."""

import doctest
import importlib

import pytest

MODULES = [
    "pslbridge",
    "pslbridge.errors",
    "pslbridge.jars",
    "pslbridge.model_files",
    "pslbridge.neural_inputs",
    "pslbridge.learning",
    "pslbridge.oracle",
    "pslbridge.experiments",
    "pslbridge.experiments.mnist_add",
    "pslbridge.datasets.mnist",
    "pslbridge.training",
    "pslbridge.datasets.planetoid",
    "pslbridge.experiments.citation",
    "pslbridge.experiments.reporting",
    "pslbridge.diagnostics",
    "pslbridge.benchmarks.step_time",
    "pslbridge.benchmarks.overhead",
    "pslbridge.experiments.visual_sudoku",
    "pslbridge.benchmarks.resident",
    "pslbridge.benchmarks.processes",
    "pslbridge.benchmarks.problems",
    "pslbridge.benchmarks.build_cost",
    "pslbridge.benchmarks.report",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0
