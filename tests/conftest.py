"""Shared fixtures: one JVM per test session (JPype cannot restart it); start-up and
configuration cases run in fresh interpreters through :func:`run_python`."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
MODELS = REPO / "models"
EXAMPLES = REPO / "pslbridge" / "examples"

# A checkout keeps the jar and the data in its own folders (the Makefile sets the same); an installed pslbridge
# uses the user cache instead.
os.environ.setdefault("PSLBRIDGE_JAR_DIR", str(REPO / "jars"))
os.environ.setdefault("PSLBRIDGE_DATA", str(REPO / "data" / "cache"))
os.environ.setdefault("PSLBRIDGE_PLANETOID", str(REPO / "data" / "planetoid"))

#: ADMM tolerances tight enough for 1e-3 parity with the jar's Runtime.
TIGHT = {
    "admmreasoner.maxiterations": "20000",
    "admmreasoner.epsilonabs": "1e-7",
    "admmreasoner.epsilonrel": "1e-7",
}
#: The same tolerances with room for the larger programs of the batching oracles (their learning steps).
TIGHT_LONG = {**TIGHT, "admmreasoner.maxiterations": "50000"}


@pytest.fixture(scope="session")
def mnist():
    """MNIST as ``(x_train, y_train, x_test, y_test)``, loaded once; missing data fails the test."""
    from pslbridge.datasets.mnist import DataError, load_mnist

    try:
        return load_mnist()
    except DataError as exc:
        pytest.fail(f"MNIST missing: {exc}")  # `make test` prepares it with `make data`


@pytest.fixture(scope="session")
def jvm_started():
    """Start the process's one JVM (lazily, once) and return the jvm module."""
    from pslbridge import jvm

    jvm.start("tests/conftest.py")
    return jvm


def run_python(
    code: str, *, env: dict[str, str] | None = None, timeout: float = 300, cwd: str | Path | None = None
) -> subprocess.CompletedProcess:
    """Run code in a fresh interpreter with the repository importable."""
    full_env = dict(os.environ)
    full_env["PYTHONPATH"] = os.pathsep.join([str(REPO), full_env.get("PYTHONPATH", "")])
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=full_env,
        cwd=str(cwd or REPO),
    )
