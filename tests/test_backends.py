"""NeuPSLModel on every Keras 3 backend: the same gradient, training, cross-backend loading and errors.

Each backend runs tests/backend_probe.py in its own interpreter (Keras fixes its backend at import), in the
order TensorFlow, JAX, PyTorch, each loading the model the previous one saved. The oracle of the gradient is
``Bridge.learn_step``'s ``neural_gradients`` on a fresh copy of the program at the same predictions.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import numpy as np
import pytest

from conftest import REPO

pytestmark = [pytest.mark.slow, pytest.mark.subprocess]

BACKENDS = ["tensorflow", "jax", "torch"]
AVAILABLE = [b for b in BACKENDS if importlib.util.find_spec(b) is not None]


@pytest.fixture(scope="module")
def probes(tmp_path_factory):
    out = tmp_path_factory.mktemp("backends")
    found, previous = {}, None
    for backend in AVAILABLE:
        args = [sys.executable, str(REPO / "tests" / "backend_probe.py"), str(out)] + ([previous] if previous else [])
        env = {**__import__("os").environ, "KERAS_BACKEND": backend, "PYTHONPATH": str(REPO)}
        proc = subprocess.run(args, capture_output=True, text=True, timeout=600, env=env, cwd=str(REPO))
        assert proc.returncode == 0, f"{backend}:\n{proc.stderr[-3000:]}"
        report = json.loads((out / f"{backend}.json").read_text())
        assert report["backend"] == backend
        found[backend] = {"report": report, "arrays": dict(np.load(out / f"{backend}.npz"))}
        previous = report["training"]["saved"]
    return found


def _needs(*backends):
    missing = [b for b in backends if b not in AVAILABLE]
    if missing:
        pytest.skip(f"not installed: {missing}")


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_gradient_reaching_the_network_is_learn_steps(probes, backend):
    _needs(backend)
    arrays = probes[backend]["arrays"]
    assert np.abs(arrays["learn_step_gradient"]).max() > 0.1  # a gradient worth comparing
    np.testing.assert_allclose(arrays["fit_gradient"], arrays["learn_step_gradient"], atol=1e-6, rtol=0)


def test_every_backend_and_the_torch_api_give_the_same_gradient(probes):
    _needs(*BACKENDS)
    reference = probes["tensorflow"]["arrays"]["fit_gradient"]
    for backend in ("jax", "torch"):
        np.testing.assert_allclose(probes[backend]["arrays"]["fit_gradient"], reference, atol=1e-6, rtol=0)
    np.testing.assert_allclose(
        probes["torch"]["arrays"]["torch_api_gradient"], probes["torch"]["arrays"]["learn_step_gradient"], atol=1e-6
    )


@pytest.mark.parametrize("backend", BACKENDS)
def test_log_gradient_softmax_gives_a_linear_loss_crossentropys_gradient_and_switches_from_a_callback(probes, backend):
    _needs(backend)
    arrays = probes[backend]["arrays"]
    assert np.abs(arrays["crossentropy"]).max() > 0.05  # a gradient worth comparing
    np.testing.assert_allclose(arrays["log_gradient_linear"], arrays["crossentropy"], atol=1e-6, rtol=0)
    # switched on by a callback at epoch 1: the softmax's own gradient, then the log-probability one
    assert np.abs(arrays["switched_expected"][0] - arrays["switched_expected"][1]).max() > 0.05
    np.testing.assert_allclose(arrays["switched_steps"], arrays["switched_expected"], atol=1e-5, rtol=0)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_short_training_run_lowers_the_loss_and_calls_the_callbacks(probes, backend):
    _needs(backend)
    training = probes[backend]["report"]["training"]
    assert training["callbacks"] == {"batch": 6 * 2 * 3, "epoch": 6}  # 6 epochs x 2 programs x 3 passes
    assert training["loss"][-1] < 0.5 * training["loss"][0]
    assert len(training["val_loss"]) == 6 and training["val_loss"][-1] < training["val_loss"][0]  # test_step runs


@pytest.mark.parametrize(("saved_on", "loaded_on"), [("tensorflow", "jax"), ("jax", "torch")])
def test_a_model_saved_on_one_backend_gives_the_same_map_values_on_another(probes, saved_on, loaded_on):
    _needs(saved_on, loaded_on)
    assert probes[loaded_on]["report"]["previous"] == probes[saved_on]["report"]["training"]["saved"]
    np.testing.assert_allclose(
        probes[loaded_on]["arrays"]["previous_map"], probes[saved_on]["arrays"]["own_map"], atol=1e-5, rtol=0
    )


@pytest.mark.parametrize("backend", BACKENDS)
def test_bad_networks_give_the_same_typed_errors_on_every_backend(probes, backend):
    _needs(backend)
    bad = probes[backend]["report"]["bad"]
    assert bad["wrong_shape"]["error"] == "NeuralInputError" and "(6, 10)" in bad["wrong_shape"]["message"]
    assert bad["outside_range"]["error"] == "NeuralInputError" and "[0, 1]" in bad["outside_range"]["message"]
    assert bad["nan"]["error"] is None and np.isnan(bad["nan"]["loss"]).all()
    assert "PslBridgeWarning" in bad["nan"]["warnings"]
    if backend != "tensorflow":
        assert bad == {**probes["tensorflow"]["report"]["bad"], "nan": bad["nan"]}


@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_the_readmes_keras_example_trains_unchanged_on_another_backend(backend, tmp_path):
    """KERAS_BACKEND=jax / torch run the README's blocks as written, in order, in one interpreter."""
    _needs(backend)
    import re

    code = "\n".join(re.findall(r"```python\n(.*?)```", (REPO / "README.md").read_text(), re.S))
    code = f"import keras\nassert keras.backend.backend() == {backend!r}\n" + code
    env = {**__import__("os").environ, "KERAS_BACKEND": backend, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=600, env=env, cwd=str(tmp_path)
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    accuracy = float(re.search(r"held-out accuracy ([\d.]+)", proc.stdout).group(1))
    assert accuracy > 0.7  # 15 labelled nodes of 90; the collective rules carry the labels along the links
