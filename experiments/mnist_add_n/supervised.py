"""A supervised reference for MNIST-Add-N: the same LeNet trained with every training image's digit label.

It trains the network a preset uses on the split's training images with their true digits (cross-entropy, the
preset's image shifts, turns and zooms, Adam at its learning rate with a cosine schedule over a fixed number of
epochs) and decodes the split's test additions from its digits, as the NeuPSL runs decode theirs. Its sum
accuracy is what the network reaches when each digit is told rather than only the sums. It chooses nothing.

Run ``python -m experiments.mnist_add_n.supervised --preset n4 --seeds 107 109 113``.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace
from typing import Any

import numpy as np

from pslbridge.datasets.mnist import load_mnist
from pslbridge.examples.mnist_addition import lenet, prepare_images
from pslbridge.training import set_seed

from .runner import PRESETS, Setting, network_sums, predict_digits, split_data, sum_accuracy

__all__ = ["main", "supervised_reference"]


def supervised_reference(setting: Setting, seed: int, epochs: int = 40, batch_size: int = 88) -> dict[str, Any]:
    """Train LeNet on split 0's training images of ``setting`` and ``seed`` with their digit labels; its scores.

    Args:
        setting: The preset's setting (its places, image counts, learning rate and augmentation).
        seed: The split's seed (split 0, as ``--splits 1``).
        epochs: Passes over the training images.
        batch_size: Images per step (88: a 44-place program's).

    Returns:
        ``digit_acc`` on the test additions' images, ``sum_acc`` of the test additions, ``val_sum_acc`` of the
        validation additions (per cent), the seed, the epochs and the training seconds.
    """
    import keras

    x_train, y_train, x_test, y_test = load_mnist()
    train, val, test = split_data(setting, 0, seed, y_train, y_test)
    set_seed(seed)
    network = lenet(
        learning_rate=setting.learning_rate, shift=setting.shift, rotation=setting.rotation, zoom=setting.zoom
    )
    steps = epochs * -(-len(train.pool) // batch_size)
    schedule = keras.optimizers.schedules.CosineDecay(setting.learning_rate, decay_steps=steps)
    network.compile(optimizer=keras.optimizers.Adam(schedule), loss="categorical_crossentropy")
    start = time.perf_counter()
    labels = keras.utils.to_categorical(y_train[train.pool], 10)
    network.fit(prepare_images(x_train[train.pool]), labels, batch_size=batch_size, epochs=epochs, verbose=0)
    seconds = time.perf_counter() - start
    test_probs = predict_digits(network, prepare_images(x_test[test.pool]))
    val_probs = predict_digits(network, prepare_images(x_train[val.pool]))
    return {
        "seed": seed,
        "epochs": epochs,
        "digit_acc": 100 * float((network_sums(test_probs, test)[1] == test.digits).mean()),
        "sum_acc": sum_accuracy(test_probs, test),
        "val_sum_acc": sum_accuracy(val_probs, val),
        "train_s": seconds,
    }


def main(argv: list[str] | None = None) -> int:
    """Command line: one row per seed and their mean (see the module docstring)."""
    parser = argparse.ArgumentParser(prog="python -m experiments.mnist_add_n.supervised", description=__doc__)
    parser.add_argument("--preset", default="n4", choices=[p.name for p in PRESETS])
    parser.add_argument("--seeds", type=int, nargs="+", required=True)
    parser.add_argument("--epochs", type=int, default=40)
    parser.add_argument("--places", type=int, default=0, help="decode additions of this N instead (0: the preset's)")
    args = parser.parse_args(argv)
    setting = Setting(**next(p for p in PRESETS if p.name == args.preset).fields)
    if args.places:
        setting = replace(setting, places=args.places)
    rows = [supervised_reference(setting, seed, epochs=args.epochs) for seed in args.seeds]
    print(f"supervised LeNet, preset {args.preset}, N = {setting.places}, {args.epochs} epochs")
    print("seed  digits %  val sums %  test sums %  train s")
    for row in rows:
        scores = f"{row['digit_acc']:8.2f}  {row['val_sum_acc']:10.2f}  {row['sum_acc']:11.2f}"
        print(f"{row['seed']:4d}  {scores}  {row['train_s']:7.0f}")
    mean = {key: float(np.mean([row[key] for row in rows])) for key in ("digit_acc", "val_sum_acc", "sum_acc")}
    print(f"mean  {mean['digit_acc']:8.2f}  {mean['val_sum_acc']:10.2f}  {mean['sum_acc']:11.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
