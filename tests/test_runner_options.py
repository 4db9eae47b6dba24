"""The MNIST-Add runner's learning options: weight averaging and data augmentation (shifts)."""

from __future__ import annotations

import csv

import numpy as np
import pytest

pytest.importorskip("tensorflow", reason="TensorFlow is an optional extra (pip install pslbridge[tf])")

from pslbridge.experiments import mnist_add_runner  # noqa: E402
from pslbridge.experiments.mnist_add import lenet  # noqa: E402
from pslbridge.experiments.mnist_add_runner import Setting, WeightAverage  # noqa: E402
from pslbridge.training import set_seed  # noqa: E402

TINY = {"digits": 1, "additions": 20, "test_additions": 20, "val_additions": 20, "steps_per_epoch": 4}


def test_weight_average_is_the_bias_corrected_exponential_average():
    """Oracle: the closed form sum_i (1 - m) m^(t-1-i) w_i / (1 - m^t) over a random weight sequence."""
    import keras

    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    average, momentum = WeightAverage(model, 0.8), 0.8
    rng = np.random.default_rng(0)
    history = []
    for _ in range(7):
        weights = [rng.normal(size=w.shape).astype(np.float32) for w in model.get_weights()]
        model.set_weights(weights)
        average.update()
        history.append(weights)
    t = len(history)
    for k, got in enumerate(average.weights()):
        expected = sum((1 - momentum) * momentum ** (t - 1 - i) * h[k] for i, h in enumerate(history))
        np.testing.assert_allclose(got, expected / (1 - momentum**t), rtol=1e-5)
    with pytest.raises(ValueError, match="weight_average"):
        WeightAverage(model, 1.0)


def test_selection_keeps_the_averaged_network_and_training_the_raw_one(mnist, jvm_started):
    """One epoch: the selected (only) epoch's weights are the average, while the model trains on raw weights."""
    from pslbridge.experiments.mnist_add_runner import _NeuPSLRun, _split_data

    setting = Setting(**TINY, epochs=1, weight_average=0.5)
    run = _NeuPSLRun(setting, 0, 3, _split_data(setting, 0, 3, mnist[1], mnist[3]), mnist)
    try:
        run.fit()
        averaged, raw = run.average.weights(), run.model.get_weights()
        assert run.average.updates == 4 and run.best["epoch"] == 0
        for best, avg in zip(run.best["weights"], averaged):
            np.testing.assert_allclose(best, avg, rtol=1e-6)
        assert any(not np.allclose(a, r) for a, r in zip(averaged, raw))
    finally:
        for bridge in (*run.train_bridges, run.val_bridge, run.test_bridge):
            bridge.close()


def test_shift_moves_training_images_and_leaves_inference_alone():
    """A 4x4 bright square: training calls move it by at most 10 % of 28 px along each axis (and do move it
    on some call); inference calls return the image unchanged, so predictions are deterministic."""
    set_seed(0)
    net = lenet(shift=0.1)
    shifter = net.layers[0]
    image = np.zeros((1, 28, 28, 1), np.float32)
    image[0, 12:16, 12:16, 0] = 1.0
    ys, xs = np.mgrid[0:28, 0:28]

    def centre(a):
        a = np.asarray(a)[0, :, :, 0]
        return np.array([(a * ys).sum(), (a * xs).sum()]) / a.sum()

    moves = [np.abs(centre(shifter(image, training=True)) - centre(image)) for _ in range(20)]
    assert max(m.max() for m in moves) <= 0.1 * 28 + 0.5
    assert max(m.max() for m in moves) >= 1.0
    np.testing.assert_array_equal(np.asarray(shifter(image, training=False)), image)
    np.testing.assert_array_equal(np.asarray(net(image, training=False)), np.asarray(net(image, training=False)))
    plain = lenet()
    assert len(plain.layers) == len(net.layers) - 1
    with pytest.raises(ValueError, match="shift"):
        lenet(shift=1.0)


@pytest.mark.parametrize("option", ["--shift", "--weight-average"])
@pytest.mark.parametrize("value", ["1", "-0.1", "x"])
def test_out_of_range_options_are_usage_errors(option, value, capsys):
    with pytest.raises(SystemExit) as stop:
        mnist_add_runner.main([option, value])
    assert stop.value.code == 2
    assert "expected a number in [0, 1)" in capsys.readouterr().err


def test_cli_defaults_shift_for_small_add1_and_records_the_options(tmp_path, mnist, jvm_started):
    """Add1 under 1,000 additions gets the tuned shift by default; both options reach the recorded setting."""
    args = ["--additions", "20", "--test-additions", "20", "--val-additions", "20", "--epochs", "1"]
    args += ["--steps-per-epoch", "2", "--splits", "1", "--no-baseline", "--weight-average", "0.5"]
    assert mnist_add_runner.main([*args, "--out", str(tmp_path)]) == 0
    with open(tmp_path / "results.csv") as handle:
        (row,) = list(csv.DictReader(handle))
    assert row["setting"] == "add1-20-ema0.5-shift0.1"
    assert float(row["shift"]) == 0.1 and float(row["weight_average"]) == 0.5
    assert mnist_add_runner.default_shift(1, 3000) == 0.0 == mnist_add_runner.default_shift(2, 150)
