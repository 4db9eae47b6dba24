"""Runner for Visual Sudoku puzzle classification (NeuPSL and the paper's two CNN baselines).

``python -m experiments visual-sudoku --puzzles 16 --splits 5`` writes ``results.csv`` and
``results.md`` (puzzle accuracy, digit distinguishing accuracy, learning and inference time) under
``--out`` (default ``out/visual-sudoku``), and appends the invocation's whole wall time to ``wall-times.csv``
(``results.md``'s "Whole runs"). Per split: training puzzles from MNIST's training images
(digits 0-3), validation and test puzzles from its test images. NeuPSL trains the LeNet network (4
outputs) on the valid training puzzles; the violation threshold that separates valid from invalid
puzzles is chosen on the validation puzzles. Baselines: a CNN on the 16 images of a puzzle (``visual``)
and an MLP on the 16 true digit labels (``digit``, an unfair advantage), both trained on all training
puzzles with their valid/invalid labels.

Example:
    >>> main(["--puzzles", "0"])
    Traceback (most recent call last):
    ...
    SystemExit: 2
"""

from __future__ import annotations

import argparse
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pslbridge.bridge import Bridge
from pslbridge.datasets.mnist import load_mnist
from pslbridge.examples.mnist_addition import lenet, lenet_layers, prepare_images
from pslbridge.training import set_seed

from ..arguments import DefaultsHelpFormatter, non_negative_int, positive_int
from ..harness import failed_row, finish_table, plain, run_splits
from ..reporting import WholeRun, mean_std, non_defaults, read_groups, write_rows
from ..sweep import RayOptions, Run, add_ray_arguments, run_digest, workers_text
from .model import (
    Puzzles,
    distinguish_accuracy,
    entity_images,
    make_puzzles,
    puzzle_scores,
    sudoku_spec,
    threshold_accuracy,
)

__all__ = ["SudokuSetting", "main", "run_setting", "run_split_task", "split_rows"]


@dataclass
class SudokuSetting:
    """One setting.

    Attributes:
        puzzles: Valid training puzzles (each with a corrupted twin).
        unique: Unique training images (default 16 per valid puzzle); ``resampled`` more are drawn with
            replacement from them (the overlap variant).
        test_puzzles: Valid test puzzles (plus twins); ``val_puzzles`` likewise for validation.
        epochs, steps_per_epoch: NeuPSL training length; ``learning_rate`` of the network.
    """

    puzzles: int = 16
    unique: int | None = None
    resampled: int = 0
    test_puzzles: int = 100
    val_puzzles: int = 50
    epochs: int = 25
    steps_per_epoch: int = 20
    learning_rate: float = 1e-3

    @property
    def name(self) -> str:
        """``vs-<puzzles>`` plus ``-<unique>+<resampled>`` for the overlap variant."""
        extra = f"-{self.unique}+{self.resampled}" if self.unique is not None else ""
        return f"vs-{self.puzzles}{extra}"


def _probabilities(model: Any, images: np.ndarray, puzzles: Puzzles) -> np.ndarray:
    flat = prepare_images(images[puzzles.images.reshape(-1)])
    return np.asarray(model(flat, training=False)).reshape(-1, 4, 4, 4)


def _neupsl(setting: SudokuSetting, train: Puzzles, val: Puzzles, test: Puzzles, mnist: tuple) -> dict[str, Any]:
    import keras

    from pslbridge.keras import NeuPSLModel, ProgramData

    x_train, _, x_test, y_test = mnist
    keep = np.flatnonzero(train.valid)
    valid_train = Puzzles(train.images[keep], train.symbols[keep], train.valid[keep])
    model = lenet(4, setting.learning_rate)
    with Bridge(sudoku_spec(len(keep), pinned=valid_train.symbols[0, 0])) as bridge:
        inputs = prepare_images(x_train[entity_images(bridge.entities("Neural"), valid_train)])
        neupsl = NeuPSLModel({"Neural": model})
        neupsl.compile(optimizer=keras.optimizers.Adam(setting.learning_rate))
        data = ProgramData([(bridge, {"Neural": inputs})], passes=setting.steps_per_epoch)
        t0 = time.perf_counter()
        neupsl.fit(data, epochs=setting.epochs, verbose=0)
        learn = time.perf_counter() - t0
    _, threshold = threshold_accuracy(puzzle_scores(_probabilities(model, x_test, val)), val.valid)
    t1 = time.perf_counter()
    probabilities = _probabilities(model, x_test, test)
    accuracy, _ = threshold_accuracy(puzzle_scores(probabilities), test.valid, threshold)
    infer = time.perf_counter() - t1
    digits = distinguish_accuracy(probabilities.reshape(-1, 4).argmax(1), y_test[test.images.reshape(-1)])
    return {
        "method": "NeuPSL",
        "puzzle_acc": 100 * accuracy,
        "distinguish_acc": 100 * digits,
        "learn_s": learn,
        "infer_s": infer,
        "threshold": threshold,
    }


def _baseline(
    kind: str, setting: SudokuSetting, train: Puzzles, val: Puzzles, test: Puzzles, mnist: tuple
) -> dict[str, Any]:
    import keras

    x_train, y_train, x_test, y_test = mnist

    def features(images: np.ndarray, labels: np.ndarray, puzzles: Puzzles) -> np.ndarray:
        if kind == "digit":
            return np.eye(4, dtype=np.float32)[labels[puzzles.images]].reshape(len(puzzles.images), -1)
        grid = prepare_images(images[puzzles.images])[..., 0]  # (n, 4, 4, 28, 28)
        return grid.transpose(0, 1, 3, 2, 4).reshape(-1, 112, 112, 1)

    x_tr, x_va, x_te = (
        features(x_train, y_train, train),
        features(x_test, y_test, val),
        features(x_test, y_test, test),
    )
    if kind == "digit":
        layers = [
            keras.Input(shape=(64,)),
            keras.layers.Dense(128, activation="relu"),
            keras.layers.Dense(64, activation="relu"),
        ]
    else:
        layers = lenet_layers((112, 112, 1), hidden=(84,))
    model = keras.Sequential([*layers, keras.layers.Dense(1, activation="sigmoid")])
    model.compile(
        optimizer=keras.optimizers.Adam(setting.learning_rate), loss="binary_crossentropy", metrics=["accuracy"]
    )
    t0 = time.perf_counter()
    model.fit(
        x_tr,
        train.valid.astype(np.float32),
        validation_data=(x_va, val.valid.astype(np.float32)),
        epochs=100,
        batch_size=16,
        verbose=0,
        callbacks=[
            keras.callbacks.EarlyStopping(monitor="val_accuracy", mode="max", patience=10, restore_best_weights=True)
        ],
    )
    learn = time.perf_counter() - t0
    t1 = time.perf_counter()
    predicted = np.asarray(model(x_te, training=False)).ravel() > 0.5
    return {
        "method": f"CNN-{kind}" if kind == "visual" else "MLP-digit",
        "puzzle_acc": 100 * float((predicted == test.valid).mean()),
        "learn_s": learn,
        "infer_s": time.perf_counter() - t1,
    }


def split_rows(setting: SudokuSetting, split: int, seed: int, baselines: bool = True) -> list[dict[str, Any]]:
    """One split's result rows (NeuPSL, then the baselines), not written."""
    mnist = load_mnist()
    set_seed(seed + split)
    rng = np.random.default_rng(seed + 1000 * split)
    train = make_puzzles(mnist[1], setting.puzzles, rng, n_unique=setting.unique, n_resampled=setting.resampled)
    test = make_puzzles(mnist[3], setting.test_puzzles, rng)
    val = make_puzzles(mnist[3], setting.val_puzzles, rng, exclude=test.images.reshape(-1))
    results = [_neupsl(setting, train, val, test, mnist)]
    if baselines:
        results += [_baseline(kind, setting, train, val, test, mnist) for kind in ("visual", "digit")]
    rows = [{"setting": setting.name, "split": split, "seed": seed, **asdict(setting), **result} for result in results]
    return plain(rows)


def run_split_task(setting: dict[str, Any], split: int, seed: int, baselines: bool) -> dict[str, Any]:
    """:func:`split_rows` as a sweep run: plain arguments in, JSON-serialisable rows out."""
    return {"rows": split_rows(SudokuSetting(**setting), split, seed, baselines)}


def run_setting(
    setting: SudokuSetting, splits: int, seed: int, out: Path, baselines: bool = True, ray: RayOptions | None = None
) -> list[dict[str, Any]]:
    """Run ``splits`` splits here one after another (or with ``ray`` as Ray tasks); append rows to ``results.csv``."""
    rows: list[dict[str, Any]] = []

    def record(run: Run, result: dict[str, Any]) -> None:
        if "error" in result:
            identity = {"setting": setting.name, "split": run.kwargs["split"], "seed": seed, **asdict(setting)}
            rows.extend(write_rows(out / "results.csv", [failed_row(identity, result)], _FIELDS))
        else:
            rows.extend(write_rows(out / "results.csv", result["rows"], _FIELDS))

    arguments = {"setting": asdict(setting), "seed": seed, "baselines": baselines}
    runs = [
        Run(
            f"{setting.name}-split{split}-{run_digest(arguments)}",
            "experiments.visual_sudoku.runner:run_split_task",
            {**arguments, "split": split},
        )
        for split in range(splits)
    ]
    run_splits(runs, out, ray, record)
    return rows


_FIELDS = [
    "setting",
    "split",
    "seed",
    "method",
    "puzzle_acc",
    "distinguish_acc",
    "learn_s",
    "infer_s",
    "threshold",
    *SudokuSetting.__dataclass_fields__,
]


def write_table(out: Path) -> str:
    """Summarise ``results.csv`` into ``results.md``."""
    lines = [
        "# Visual Sudoku results (test accuracy %, mean ± std over splits)",
        "",
        "| setting | method | options | seed | splits | puzzle accuracy | digit distinguishing | learn s | "
        "inference s |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    # Keyed by every setting field too: rows of other schedules under one name are never averaged together.
    defaults = asdict(SudokuSetting())
    groups = read_groups(out / "results.csv", ["setting", "method", "seed", *defaults])
    for (setting, method, seed, *_), group in groups.items():
        values = {
            key: [float(r[key]) if r.get(key) not in (None, "") else float("nan") for r in group]
            for key in ("puzzle_acc", "distinguish_acc", "learn_s", "infer_s")
        }
        lines.append(
            f"| {setting} | {method} | {non_defaults(group[0], defaults)} | {seed} | {len(group)} | "
            f"{mean_std(values['puzzle_acc'])} | "
            f"{mean_std(values['distinguish_acc'])} | {np.nanmean(values['learn_s']):.1f} | "
            f"{np.nanmean(values['infer_s']):.3f} |"
        )
    return finish_table(out, lines, ["setting", "split"])


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point (``python -m experiments visual-sudoku ...``)."""
    parser = argparse.ArgumentParser(
        prog="python -m experiments visual-sudoku",
        description="Visual Sudoku puzzle classification: NeuPSL and the CNN/MLP baselines.",
        formatter_class=DefaultsHelpFormatter,
    )
    parser.add_argument("--puzzles", type=positive_int, default=16, help="training puzzles per split")
    parser.add_argument("--unique", type=positive_int, help="unique training images (overlap variant)")
    parser.add_argument("--resampled", type=non_negative_int, default=0, help="images re-sampled (overlap variant)")
    parser.add_argument("--splits", type=positive_int, default=5, help="random splits")
    parser.add_argument("--epochs", type=positive_int, default=25, help="training epochs")
    parser.add_argument("--no-baselines", action="store_true", help="skip the CNN and MLP baselines")
    parser.add_argument("--seed", type=int, default=0, help="base seed of the splits")
    parser.add_argument("--out", type=Path, default=Path("out/visual-sudoku"), help="results folder")
    add_ray_arguments(parser)
    args = parser.parse_args(argv)
    ray = RayOptions.from_args(args, parser)
    setting = SudokuSetting(puzzles=args.puzzles, unique=args.unique, resampled=args.resampled, epochs=args.epochs)
    whole = WholeRun("visual-sudoku", argv, args.seed, 0, args.splits, args.splits, workers_text(ray))
    rows = run_setting(setting, args.splits, args.seed, args.out, not args.no_baselines, ray)
    whole.record(args.out, ran=len({row["split"] for row in rows}))  # Ray: the others were stored
    print(write_table(args.out))
    return 0
