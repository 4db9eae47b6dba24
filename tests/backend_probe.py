"""What one Keras backend does with NeuPSL, written to a folder for tests/test_backends.py to compare.

Run as ``KERAS_BACKEND=jax python tests/backend_probe.py OUT [PREVIOUS_MODEL]`` (the backend is fixed when Keras
is imported, so each backend needs its own interpreter). It writes ``OUT/<backend>.npz`` and ``.json``:

- ``fit_gradient``: the gradient that reached the network in one ``NeuPSLModel.fit`` step, read off an SGD step of
  rate 1 on a bias-free linear layer whose kernel *is* the predictions (inputs: the identity), and
  ``learn_step_gradient``: ``learn_step``'s ``neural_gradients`` on a fresh copy of the program at the same
  predictions; with torch installed also ``torch_api_gradient`` (:func:`pslbridge.torch.psl_loss`);
- a short training run (loss per epoch, callback counts), the MAP values of its saved model on a test program,
  and, given ``PREVIOUS_MODEL`` (another backend's save), that model's MAP values loaded here;
- the errors (type, message) of the bad-network catalogue: wrong output shape, values outside [0, 1], NaN.
- :class:`~pslbridge.keras.LogGradientSoftmax`: its logits' gradient for a loss linear in the predictions and
  cross-entropy's through Keras' softmax (``log_gradient_linear``, ``crossentropy``), and the two SGD steps of
  one switched on by a callback with their closed forms (``switched_steps``, ``switched_expected``).
"""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path
from typing import Any

import keras
import numpy as np

from pslbridge import Bridge
from pslbridge.examples.mnist_addition import add1_spec, digit_sum_rows, possible_digit_rows
from pslbridge.keras import LogGradientSoftmax, NeuPSLModel, ProgramData, load_neupsl

ADDITIONS = [(0, 1), (2, 3), (4, 5)]
SUMS = [7, 3, 12]
ROWS = 2 * len(ADDITIONS)


def learn_bridge() -> Bridge:
    return Bridge(add1_spec(ADDITIONS, sums=SUMS, phase="learn"))


def predictions() -> np.ndarray:
    logits = np.random.default_rng(5).normal(size=(ROWS, 10))
    p = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    return p.astype(np.float32)


def kernel_network(kernel: np.ndarray, head: tuple = ()) -> keras.Model:
    """A network whose output on the identity is ``kernel`` (so d loss / d kernel = d loss / d prediction), then
    the layers ``head`` (the kernel then holds a softmax head's logits)."""
    rows, classes = kernel.shape
    net = keras.Sequential([keras.Input((rows,)), keras.layers.Dense(classes, use_bias=False), *head])
    net.layers[0].set_weights([kernel])
    return net


def logit_step(head: tuple, loss: Any, logits: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """The loss's gradient in the logits through ``head``: minus one SGD step (rate 1) of Keras' own fit."""
    net = kernel_network(logits, head)
    net.compile(optimizer=keras.optimizers.SGD(learning_rate=1.0), loss=loss)
    net.fit(np.eye(len(logits), dtype="float32"), targets, batch_size=len(logits), epochs=1, verbose=0, shuffle=False)
    return logits - keras.ops.convert_to_numpy(net.layers[0].kernel)


def fit_gradient(p: np.ndarray) -> np.ndarray:
    net = kernel_network(p)
    model = NeuPSLModel({"Neural": net})
    model.compile(optimizer=keras.optimizers.SGD(learning_rate=1.0))
    with learn_bridge() as bridge:
        model.fit(ProgramData([(bridge, {"Neural": np.eye(ROWS, dtype="float32")})]), epochs=1, verbose=0)
    return p - keras.ops.convert_to_numpy(net.layers[0].kernel)


def learn_step_gradient(p: np.ndarray) -> np.ndarray:
    with learn_bridge() as bridge:
        return bridge.learn_step({"Neural": p}).neural_gradients["Neural"]


def torch_api_gradient(p: np.ndarray) -> np.ndarray | None:
    try:
        import torch

        from pslbridge.torch import psl_loss
    except ImportError:
        return None
    tensor = torch.tensor(p, requires_grad=True)
    with learn_bridge() as bridge:
        psl_loss(bridge, {"Neural": tensor}).backward()
    return tensor.grad.numpy()


def softmax_logit_gradients(p: np.ndarray) -> dict[str, np.ndarray]:
    """The logits' gradient (one SGD step of rate 1) at logits ``log p``: a loss linear in the predictions
    through :class:`LogGradientSoftmax`, and cross-entropy through Keras' own softmax (they must agree)."""
    targets = np.eye(10, dtype="float32")[np.arange(ROWS) % 10]

    def linear(y: Any, q: Any) -> Any:
        return 1.0 - keras.ops.sum(y * q, axis=-1)

    return {
        "log_gradient_linear": logit_step((LogGradientSoftmax(),), linear, np.log(p), targets),
        "crossentropy": logit_step((keras.layers.Softmax(),), "categorical_crossentropy", np.log(p), targets),
    }


def switched_softmax_steps(p: np.ndarray) -> dict[str, np.ndarray]:
    """Two epochs of one SGD step (rate 0.1, a loss linear in the predictions) through a
    :class:`LogGradientSoftmax` that starts inactive and a callback switches on at epoch 1: the steps taken, and
    the closed forms of the softmax's own gradient then the log-probability one at each epoch's logits."""
    targets = np.eye(10, dtype="float32")[np.arange(ROWS) % 10]
    head = LogGradientSoftmax(active=False)
    net = kernel_network(np.log(p), (head,))
    net.compile(optimizer=keras.optimizers.SGD(learning_rate=0.1), loss=lambda y, q: 1.0 - keras.ops.sum(y * q, -1))
    kernels = []

    def epoch_begin(epoch: int, logs: dict | None = None) -> None:
        kernels.append(keras.ops.convert_to_numpy(net.layers[0].kernel).copy())
        head.set_active(epoch >= 1)

    switch = keras.callbacks.LambdaCallback(on_epoch_begin=epoch_begin)
    net.fit(
        np.eye(ROWS, dtype="float32"), targets, batch_size=ROWS, epochs=2, verbose=0, shuffle=False, callbacks=[switch]
    )
    kernels.append(keras.ops.convert_to_numpy(net.layers[0].kernel))
    g, steps, expected = -targets / ROWS, [], []
    for epoch in (0, 1):
        q = np.exp(kernels[epoch]) / np.exp(kernels[epoch]).sum(axis=1, keepdims=True)
        steps.append((kernels[epoch] - kernels[epoch + 1]) / 0.1)
        expected.append(g - q * g.sum(1, keepdims=True) if epoch else q * (g - (q * g).sum(1, keepdims=True)))
    return {"switched_steps": np.stack(steps), "switched_expected": np.stack(expected)}


def short_training(out: Path) -> dict:
    keras.utils.set_random_seed(1)
    rng = np.random.default_rng(1)
    digits = rng.integers(0, 10, size=40)
    images = (np.eye(10)[digits] + rng.normal(scale=0.3, size=(40, 10))).astype("float32")
    pairs = [(2 * i, 2 * i + 1) for i in range(20)]
    sums = [int(digits[a] + digits[b]) for a, b in pairs]
    net = keras.Sequential([keras.Input((10,)), keras.layers.Dense(10, activation="softmax")])
    model = NeuPSLModel({"Neural": net})
    model.compile(optimizer=keras.optimizers.Adam(0.05))
    counts = {"batch": 0, "epoch": 0}
    counter = keras.callbacks.LambdaCallback(
        on_train_batch_end=lambda *_, **__: counts.__setitem__("batch", counts["batch"] + 1),
        on_epoch_end=lambda *_, **__: counts.__setitem__("epoch", counts["epoch"] + 1),
    )
    halves = [pairs[:10], pairs[10:]]
    bridges = [
        Bridge(add1_spec([(a - 20 * h, b - 20 * h) for a, b in half], sums=sums[10 * h : 10 * h + 10], phase="learn"))
        for h, half in enumerate(halves)
    ]
    data = ProgramData([(b, {"Neural": images[20 * h : 20 * h + 20]}) for h, b in enumerate(bridges)], passes=3)
    held = ProgramData([(bridges[1], {"Neural": images[20:40]})])
    history = model.fit(data, epochs=6, verbose=0, callbacks=[counter], validation_data=held)
    saved = model.save_neupsl(out / f"{keras.backend.backend()}.neupsl", bridges[0])
    for b in bridges:
        b.close()
    return {
        "loss": history.history["loss"],
        "val_loss": history.history["val_loss"],
        "callbacks": counts,
        "saved": str(saved),
    }


def map_values(path: str) -> np.ndarray:
    """The MAP values of a saved model on a fixed test program (three additions of six new images), by atom."""
    predictor = load_neupsl(path)
    images = np.random.default_rng(9).normal(size=(6, 10)).astype("float32")
    pairs = [(0, 1), (2, 3), (4, 5)]
    result = predictor.predict(
        {"Neural": images},
        entities={"Neural": list(range(6))},
        observations={"ImageSumBlock": pairs, "DigitSum": digit_sum_rows(), "PossibleDigits": possible_digit_rows()},
        targets={"ImageSum": [(a, b, z) for a, b in pairs for z in range(19)]},
    )
    values = result.to_frame("ImageSum")
    return values.sort_values(list(values.columns[:-1])).iloc[:, -1].to_numpy(np.float64)


def bad_networks(p: np.ndarray) -> dict:
    cases = {
        "wrong_shape": kernel_network(p[:, :4].copy()),  # 4 classes
        "outside_range": kernel_network(p * 3.0),
        "nan": kernel_network(np.where(np.arange(10) == 3, np.nan, p).astype("float32")),
    }
    found = {}
    for name, net in cases.items():
        model = NeuPSLModel({"Neural": net})
        model.compile(optimizer=keras.optimizers.SGD(0.1))
        with learn_bridge() as bridge, warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                history = model.fit(ProgramData([(bridge, {"Neural": np.eye(ROWS, dtype="float32")})]), verbose=0)
                found[name] = {
                    "error": None,
                    "loss": [float(x) for x in history.history["loss"]],
                    "warnings": [type(w.message).__name__ for w in caught],
                }
            except Exception as exc:  # noqa: BLE001 - the test compares what each backend raised
                found[name] = {"error": type(exc).__name__, "message": str(exc).splitlines()[0]}
    return found


def main() -> None:
    out = Path(sys.argv[1])
    previous = sys.argv[2] if len(sys.argv) > 2 else None
    backend = keras.backend.backend()
    p = predictions()
    arrays = {"fit_gradient": fit_gradient(p), "learn_step_gradient": learn_step_gradient(p)}
    arrays.update(softmax_logit_gradients(p))
    arrays.update(switched_softmax_steps(p))
    torch_grad = torch_api_gradient(p)
    if torch_grad is not None:
        arrays["torch_api_gradient"] = torch_grad
    training = short_training(out)
    arrays["own_map"] = map_values(training["saved"])
    if previous:
        arrays["previous_map"] = map_values(previous)
    report = {"backend": backend, "training": training, "bad": bad_networks(p), "previous": previous}
    np.savez(out / f"{backend}.npz", **arrays)
    (out / f"{backend}.json").write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
