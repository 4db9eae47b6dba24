"""``make demo``: train a NeuPSL model on MNIST-Addition, then save it, load it and predict new additions.

The network (the paper's LeNet) sees only images; the labels are the *sums* of pairs of images. PSL's rules
(``mnist-add1.psl`` of :mod:`pslbridge.examples.mnist_addition`) tie the digits the network predicts to the sums,
and training the network through PSL's energy loss (:class:`pslbridge.keras.NeuPSLModel`, Keras' ``fit`` with its
progress bar) teaches it to read digits it was never told. The demo prints digit and sum accuracy on
held-out additions before and after training, writes the learning curve (``learning-curve.png``), saves the
trained model (``add1.neupsl``: rules, rule weights, network) and ends by loading that file and predicting
the sums of a few additions neither training nor testing used.

Run: ``python -m pslbridge demo [--quick] [--out out/demo]`` (MNIST offline: ``make data``).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["run_demo"]


def _accuracies(model: Any, bridge: Any, inputs: np.ndarray, additions: Any, digits: np.ndarray) -> dict[str, float]:
    """Digit accuracy of the network and sum accuracy of PSL's MAP state on held-out additions."""
    result = model.infer(bridge, {"Neural": inputs})
    predicted = result.argmax("ImageSum")
    pairs = {tuple(map(int, g)): i for i, g in enumerate(additions.groups.tolist())}
    sums = np.full(additions.n_additions, -1)
    for row in predicted.itertuples(index=False):
        sums[pairs[(int(row.arg0), int(row.arg1))]] = int(row.arg2)
    import keras

    probs = keras.ops.convert_to_numpy(model.networks["Neural"](inputs, training=False))
    return {
        "digit_acc": 100 * float((probs.argmax(1) == digits).mean()),
        "sum_acc": 100 * float((sums == additions.sums).mean()),
    }


def run_demo(
    out: str | Path = "out/demo",
    *,
    additions: int = 300,
    epochs: int = 20,
    steps_per_epoch: int = 20,
    test_additions: int = 200,
    seed: int = 0,
    verbose: int = 1,
) -> dict[str, Any]:
    """Train, evaluate, save, load and predict (see the module docstring).

    Args:
        out: Output folder (created).
        additions: Training additions (``2 * additions`` MNIST training images, labelled only by their sums).
        epochs: Keras epochs.
        steps_per_epoch: Full-batch learning steps per epoch.
        test_additions: Held-out additions (MNIST test images) for the accuracies and the curve.
        seed: Seeds the data, the network and Keras.
        verbose: 1 prints progress and results; 0 is silent.

    Returns:
        ``before``/``after`` accuracies (%), ``model`` and ``plot`` paths, ``new_additions`` and ``seconds``.

    Raises:
        pslbridge.errors.DataError: MNIST is not available offline (run ``make data``).

    Examples:
        >>> import tempfile
        >>> summary = run_demo(tempfile.mkdtemp(), additions=20, epochs=1, steps_per_epoch=2, test_additions=10,
        ...                    verbose=0)
        >>> sorted(summary)
        ['after', 'before', 'model', 'new_additions', 'plot', 'seconds']
        >>> summary["model"].name, summary["plot"].name
        ('add1.neupsl', 'learning-curve.png')
    """
    import keras

    from .bridge import Bridge
    from .datasets.mnist import load_mnist
    from .examples.mnist_addition import addition_spec, lenet, make_additions, prepare_images
    from .keras import NeuPSLModel, ProgramData
    from .training import set_seed

    start, say = time.perf_counter(), print if verbose else (lambda *a, **k: None)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    x_train, y_train, x_test, y_test = load_mnist()
    set_seed(seed)
    rng = np.random.default_rng(seed)
    train = make_additions(y_train, 1, 2 * additions, rng)
    test = make_additions(y_test, 1, 2 * test_additions, rng)
    new = make_additions(y_test, 1, 10, rng, exclude=test.image_ids)
    train_bridge = Bridge(addition_spec(train, phase="learn"))
    test_bridge = Bridge(addition_spec(test, labelled=False, phase="infer"))
    test_inputs, test_digits = prepare_images(x_test[test.image_ids]), y_test[test.image_ids]

    (model := NeuPSLModel({"Neural": lenet(10)})).compile(optimizer=keras.optimizers.Adam(1e-3))
    before = _accuracies(model, test_bridge, test_inputs, test, test_digits)
    say(f"MNIST-Add1: {additions} training additions (labelled by their sums only), {test_additions} held out")
    say(f"before training: digit accuracy {before['digit_acc']:.1f} %, sum accuracy {before['sum_acc']:.1f} %")

    data = ProgramData([(train_bridge, {"Neural": prepare_images(x_train[train.image_ids])})], passes=steps_per_epoch)
    curve = _fit(model, data, epochs, verbose, lambda: _accuracies(model, test_bridge, test_inputs, test, test_digits))
    after = _accuracies(model, test_bridge, test_inputs, test, test_digits)
    say(f"after training:  digit accuracy {after['digit_acc']:.1f} %, sum accuracy {after['sum_acc']:.1f} %")
    plot = _plot(curve, out / "learning-curve.png")
    saved = model.save_neupsl(out / "add1.neupsl", train_bridge)
    say(f"learning curve: {plot}\nsaved model:    {saved}")
    for bridge in (train_bridge, test_bridge):
        bridge.close()

    rows = _predict_new(saved, new, x_test, y_test)
    say(f"the loaded model on {len(rows)} new additions (MNIST test images ids):")
    for (a, b), guess, truth in rows:
        mark = "ok" if guess == truth else "x"
        say(f"  image {a:>5} + image {b:>5}: predicted sum {guess:>2}, true {truth:>2} {mark}")
    summary = {"before": before, "after": after, "model": saved, "plot": plot, "new_additions": rows}
    say(f"demo finished in {time.perf_counter() - start:.0f} s")
    return {**summary, "seconds": time.perf_counter() - start}


def _fit(model: Any, data: Any, epochs: int, verbose: int, held_out: Any) -> list[dict[str, float]]:
    """``model.fit`` with Keras' progress bar; the held-out accuracies join each epoch's logs (the curve)."""
    import keras

    curve: list[dict[str, float]] = []

    def epoch_end(epoch: int, logs: dict[str, float]) -> None:
        logs.update({f"test_{k}": v for k, v in held_out().items()})
        curve.append(dict(logs))

    callback = keras.callbacks.LambdaCallback(on_epoch_end=epoch_end)
    model.fit(data, epochs=epochs, verbose=1 if verbose else 0, callbacks=[callback])
    return curve


def _predict_new(saved: Path, new: Any, x_test: np.ndarray, y_test: np.ndarray) -> list[tuple[Any, int, int]]:
    """Load the saved model and predict the sums of ``new`` additions: ``((image, image), predicted, true)``."""
    from .examples.mnist_addition import digit_sum_rows, possible_digit_rows, prepare_images
    from .keras import load_neupsl

    predictor = load_neupsl(saved)
    entities = [int(i) for i in new.image_ids]
    pairs = [tuple(entities[j] for j in g) for g in new.groups.tolist()]
    result = predictor.predict(
        {"Neural": prepare_images(x_test[new.image_ids])},
        entities={"Neural": entities},
        observations={"ImageSumBlock": pairs, "DigitSum": digit_sum_rows(), "PossibleDigits": possible_digit_rows()},
        targets={"ImageSum": [(a, b, z) for a, b in pairs for z in range(19)]},
    )
    predicted = {(int(r.arg0), int(r.arg1)): int(r.arg2) for r in result.argmax("ImageSum").itertuples(index=False)}
    return [(pair, predicted[pair], int(y_test[pair[0]] + y_test[pair[1]])) for pair in pairs]


def _plot(curve: list[dict[str, float]], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(9, 3.4))
    epochs = np.arange(1, len(curve) + 1)
    axes[0].plot(epochs, [c["energy"] for c in curve])
    axes[0].set(xlabel="epoch", ylabel="PSL energy (training program)", title="loss")
    axes[1].plot(epochs, [c["test_digit_acc"] for c in curve], label="digit (network)")
    axes[1].plot(epochs, [c["test_sum_acc"] for c in curve], label="sum (PSL MAP)")
    axes[1].set(xlabel="epoch", ylabel="held-out accuracy %", title="accuracy", ylim=(0, 100))
    axes[1].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
