"""Time to accuracy: test accuracy against learning time, the official NeuPSL loop and pslbridge, same splits.

For each split of MNIST-Add1 (the runner's seeded splits: training additions from MNIST's training images,
validation and test additions from its test images):

- official: the jar's ``Energy`` learner with its Python deep-model server
  (:func:`~benchmarks.official.run_official`, the paper-style deep model) for ``steps`` full-batch
  iterations, the authors' 2,500 by default; the network's weights are saved every ``every`` iterations with
  the learning time so far, and the final network with the loop's time.
- pslbridge: the MNIST-Add runner's NeuPSL run with its defaults (``NeuPSLModel.fit``, ``epochs`` of 20
  steps, validation after each epoch, the network of the best validation epoch kept, random image shifts of
  up to 10 % while training; ``--shift 0`` runs the paper's recipe without them, as the official loop does),
  recording the test accuracy after every epoch against the learning time so far (validation included, test
  scoring left out).

Every network is scored the same way: the split's 500 test additions, MAP inference on one test program with
the runner's decoding reasoner. The table gives, per split, the official loop's final accuracy and time, the
time at which pslbridge's curve first reaches that accuracy (and the ratio: the issue's target is <= 1/3),
and pslbridge's own final (validation-selected) accuracy; ``accuracy-curves.png`` plots every curve.

Run: ``python -m benchmarks accuracy-curve --seed 7 --splits 5`` (``--quick``: one split, 300
steps). Writes ``accuracy-curve.csv`` (every point), ``accuracy-curve-summary.csv`` and ``accuracy-curve.md``.

Example:
    >>> main(["--splits", "0"])
    Traceback (most recent call last):
    ...
    SystemExit: 2
"""

from __future__ import annotations

import argparse
import json
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from experiments.arguments import non_negative_int, positive_int, unit_interval
from experiments.reporting import append_csv, mean_std

__all__ = ["main", "run_split", "time_to_reach"]


def time_to_reach(curve: list[tuple[float, float]], accuracy: float) -> float | None:
    """The first time a curve of ``(seconds, accuracy)`` points reaches ``accuracy`` (None: never).

    Example:
        >>> time_to_reach([(1.0, 50.0), (2.0, 81.0), (3.0, 90.0)], 80.0), time_to_reach([(1.0, 5.0)], 80.0)
        (2.0, None)
    """
    for seconds, value in curve:
        if value >= accuracy:
            return seconds
    return None


def _official_curve(run: Any, train: Any, split_seed: int, steps: int, every: int) -> tuple[list, float, float]:
    """Train the official loop on the split's training additions; score its snapshots with ``run``."""
    from pslbridge.examples.mnist_addition import addition_spec

    from .official import run_official
    from .problems import Problem

    x_train = run.x_train
    pixels = (x_train[train.image_ids].reshape(len(train.image_ids), -1) / 255.0).astype(np.float32)
    problem = Problem("add1-split", addition_spec(train), pixels, "lenet", 1e-3, {"admmreasoner.maxiterations": "500"})
    with tempfile.TemporaryDirectory(prefix="pslbridge-curve-") as tmp:
        folder, final = Path(tmp), Path(tmp) / "final.npz"
        result = run_official(problem, steps=steps - 2, seed=split_seed, save_path=final, snapshots=(folder, every))
        curve = []
        for path in sorted(folder.glob("iteration-*.npz")):
            with np.load(path) as data:
                weights = [data[f"arr_{i}"] for i in range(len(data.files) - 1)]
                seconds = float(data["seconds"])
            curve.append((seconds, run.score(weights)))
        with np.load(final) as data:
            final_accuracy = run.score([data[f"arr_{i}"] for i in range(len(data.files))])
    # The snapshots' clock leaves out the time spent saving them: so does the final point's. A snapshot past the
    # loop's end comes from a learning-mode prediction PSL makes after its last step: the final network again.
    learning_s = result["loop_s"] - result["snapshot_s"]
    curve = [point for point in curve if point[0] < learning_s]
    curve.append((learning_s, final_accuracy))
    return curve, final_accuracy, learning_s


class _Scorer:
    """The runner's split (data, test program) and a LeNet to load weights into."""

    def __init__(self, neupsl_run: Any) -> None:
        from pslbridge.examples.mnist_addition import lenet

        self.run = neupsl_run
        self.x_train = neupsl_run.x_train
        self.network = lenet(10)

    def score(self, weights: list[np.ndarray]) -> float:
        self.network.set_weights(weights)
        probs = np.asarray(self.network(self.run.test_inputs, training=False))
        return 100 * float((self.run.test_programs.predict(probs)["sum"] == self.run.test.sums).mean())


def run_split(seed: int, split: int, steps: int, every: int, out: Path, shift: float | None = None) -> dict[str, Any]:
    """Both contenders on one split; appends the points and the summary row to the CSVs.

    ``shift``: pslbridge's data augmentation (None: the runner's default; 0: the paper's recipe, as the official
    loop runs it).
    """
    from experiments.mnist_add.runner import NeuPSLRun, default_setting, split_data
    from pslbridge.datasets.mnist import load_mnist

    setting = replace(default_setting(1, 300), epochs=max(1, steps // 20), curve=True)
    setting = setting if shift is None else replace(setting, shift=shift)
    mnist = load_mnist()
    data = split_data(setting, split, seed, mnist[1], mnist[3])
    ours = NeuPSLRun(setting, split, seed, data, mnist)
    scorer = _Scorer(ours)
    official_curve, official_final, official_s = _official_curve(scorer, data[0], seed + split, steps, every)
    history = ours.fit()
    our_curve = list(ours.curve)
    result = ours.result(history)
    reach = time_to_reach(our_curve, official_final)
    for name, curve in (("official", official_curve), ("pslbridge", our_curve)):
        for seconds, accuracy in curve:
            point = {"seed": seed, "split": split, "contender": name, "seconds": seconds, "test_sum_acc": accuracy}
            append_csv(out / "accuracy-curve.csv", point, list(point))
    row = {
        "seed": seed,
        "split": split,
        "steps": steps,
        "shift": setting.shift,
        "official_final_acc": official_final,
        "official_s": official_s,
        "pslbridge_final_acc": result["sum_acc"],
        "pslbridge_s": result["learn_s"],
        "pslbridge_reach_s": reach if reach is not None else float("nan"),
        "reach_ratio": reach / official_s if reach is not None else float("nan"),
    }
    append_csv(out / "accuracy-curve-summary.csv", row, list(row))
    print(json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in row.items()}), flush=True)
    return row


def write_table(out: Path) -> str:
    """Summarise the CSVs into ``accuracy-curve.md`` and ``accuracy-curves.png``."""
    import csv

    with open(out / "accuracy-curve-summary.csv") as handle:
        rows = list(csv.DictReader(handle))
    lines = [
        "| seed | split | steps | pslbridge shift | official final sum % | official learning s "
        "| pslbridge reaches it at s | ratio (target <= 0.33) | pslbridge final sum % (validation-selected) "
        "| pslbridge learning s |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        f = {k: float(v) for k, v in r.items()}
        lines.append(
            f"| {r['seed']} | {r['split']} | {r['steps']} | {r.get('shift', '0')} | "
            f"{f['official_final_acc']:.1f} | {f['official_s']:.0f} | "
            f"{f['pslbridge_reach_s']:.0f} | {f['reach_ratio']:.2f} | {f['pslbridge_final_acc']:.1f} | "
            f"{f['pslbridge_s']:.0f} |"
        )
    column = {k: [float(r[k] or "nan") for r in rows] for k in rows[0]}
    reached = [v for v in column["reach_ratio"] if not np.isnan(v)]
    lines += [
        "",
        f"Mean ± std over {len(rows)} splits: official {mean_std(column['official_final_acc'])} % in "
        f"{mean_std(column['official_s'])} s; pslbridge {mean_std(column['pslbridge_final_acc'])} % in "
        f"{mean_std(column['pslbridge_s'])} s; pslbridge reached the official final accuracy on "
        f"{len(reached)} of {len(rows)} splits"
        + (f", at {mean_std(reached)} of the official loop's time." if reached else "."),
    ]
    text = "\n".join(lines) + "\n"
    (out / "accuracy-curve.md").write_text(text)
    _plot(out)
    return text


def _plot(out: Path) -> None:
    import csv

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with open(out / "accuracy-curve.csv") as handle:
        points = list(csv.DictReader(handle))
    fig, ax = plt.subplots(figsize=(7, 4))
    colours = {"official": "tab:gray", "pslbridge": "tab:blue"}
    for key in sorted({(p["contender"], p["seed"], p["split"]) for p in points}):
        curve = [p for p in points if (p["contender"], p["seed"], p["split"]) == key]
        ax.plot(
            [float(p["seconds"]) for p in curve],
            [float(p["test_sum_acc"]) for p in curve],
            color=colours[key[0]],
            alpha=0.7,
            label=key[0] if key[2] == "0" else None,
        )
    ax.set(xlabel="learning time (s)", ylabel="MNIST-Add1-300 test sum accuracy %", ylim=(0, 100))
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "accuracy-curves.png", dpi=100)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks accuracy-curve")
    parser.add_argument("--seed", type=int, default=7, help="the runner's base seed (default: 7, never tuned on)")
    parser.add_argument("--splits", type=positive_int, default=5, help="splits (default: 5)")
    parser.add_argument(
        "--first-split",
        type=non_negative_int,
        default=0,
        help="first split to run (default: 0); with the same --out a later run adds its splits to the table",
    )
    parser.add_argument("--steps", type=positive_int, default=2500, help="learning steps of both (default: 2500)")
    parser.add_argument("--every", type=positive_int, default=100, help="official snapshot interval (default: 100)")
    parser.add_argument("--quick", action="store_true", help="one split, 300 steps")
    parser.add_argument(
        "--shift",
        type=unit_interval,
        help="pslbridge's data augmentation (default: the runner's, 0.1; 0: the paper's recipe, as the official loop)",
    )
    parser.add_argument("--out", type=Path, default=Path("out/bench"))
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    splits, steps = (1, 300) if args.quick else (args.splits, args.steps)
    for split in range(args.first_split, args.first_split + splits):
        run_split(args.seed, split, steps, min(args.every, steps), args.out, args.shift)
    print(write_table(args.out))
    return 0
