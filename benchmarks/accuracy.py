"""Do both contenders learn the same? Accuracy after the same steps from the same seeds.

For each seed: the official NeuPSL loop and pslbridge's worker each train the same seeded LeNet on the
same MNIST-Add1 problem for the same number of full-batch steps (same ADMM and gradient-descent
settings), then both networks are scored here on MNIST test images: digit accuracy, sum accuracy of
test additions (the sum of the two predicted digits), and how often the two networks predict the same
digit. The untrained network's accuracy is the floor.

Run: ``python -m benchmarks accuracy --problem add1-300 --steps 100 --seeds 0 1 2``.
Writes ``accuracy.csv`` and ``accuracy.md``.

Example:
    >>> main(["--problem", "no-such-problem"])
    Traceback (most recent call last):
    ...
    ValueError: unknown benchmark problem 'no-such-problem': expected add1-<additions>, citeseer or cora
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from experiments.arguments import positive_int
from experiments.reporting import append_csv, mean_std, read_groups

__all__ = ["main", "run", "score"]

#: Test images scored (MNIST's test set, first N) and test additions built from them.
TEST_IMAGES = 2000


def score(weights: list[np.ndarray] | None, seed: int) -> tuple[np.ndarray, dict[str, float]]:
    """Predicted digits on the test images and the accuracies of a LeNet with ``weights``.

    ``None`` scores the untrained (seeded) network.
    """
    from pslbridge.datasets.mnist import load_mnist

    from .problems import make_network

    _, _, x_test, y_test = load_mnist()
    model = make_network("lenet", 10, 784, 1e-3, seed)
    if weights is not None:
        model.set_weights(weights)
    images = (x_test[:TEST_IMAGES].reshape(-1, 28, 28, 1) / 255.0).astype(np.float32)
    digits = np.asarray(model(images, training=False)).argmax(axis=1)
    labels = y_test[:TEST_IMAGES]
    sums_ok = (digits[0::2] + digits[1::2]) == (labels[0::2] + labels[1::2])
    return digits, {"digit_acc": 100 * float((digits == labels).mean()), "sum_acc": 100 * float(sums_ok.mean())}


def _load(path: Path) -> list[np.ndarray]:
    with np.load(path) as data:
        return [data[f"arr_{i}"] for i in range(len(data.files))]


def run(problem: str, steps: int, seeds: list[int], out: Path) -> list[dict[str, Any]]:
    """Train both contenders per seed, score them, append to ``accuracy.csv`` and write ``accuracy.md``."""
    from .official import run_official
    from .problems import load_problem
    from .step_time import run_worker

    rows = []
    for seed in seeds:
        spec_problem = load_problem(problem, seed)
        with tempfile.TemporaryDirectory(prefix="pslbridge-accuracy-") as tmp:
            theirs, ours = Path(tmp) / "official.npz", Path(tmp) / "pslbridge.npz"
            run_official(spec_problem, steps=steps - 2, save_path=theirs, seed=seed)
            run_worker(
                {
                    "task": "steps",
                    "problem": problem,
                    "steps": steps,
                    "seed": seed,
                    "save_path": str(ours),
                    "limit": False,
                }
            )
            official_digits, official = score(_load(theirs), seed)
            our_digits, pslbridge = score(_load(ours), seed)
        _, untrained = score(None, seed)
        row = {
            "problem": problem,
            "steps": steps,
            "seed": seed,
            **{f"official_{k}": v for k, v in official.items()},
            **{f"pslbridge_{k}": v for k, v in pslbridge.items()},
            **{f"untrained_{k}": v for k, v in untrained.items()},
            "same_digit_pct": 100 * float((official_digits == our_digits).mean()),
        }
        append_csv(out / "accuracy.csv", row, list(row))
        print(json.dumps({k: (round(v, 3) if isinstance(v, float) else v) for k, v in row.items()}), flush=True)
        rows.append(row)
    write_table(out)
    return rows


def write_table(out: Path) -> str:
    """Summarise ``accuracy.csv`` into ``accuracy.md`` (mean ± std over seeds)."""
    lines = [
        f"Scored on the first {TEST_IMAGES} MNIST test images ({TEST_IMAGES // 2} test additions).",
        "",
        "| problem | steps | seeds | official digit % | pslbridge digit % | untrained digit % "
        "| official sum % | pslbridge sum % | same predicted digit % |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for (problem, steps), group in read_groups(out / "accuracy.csv", ["problem", "steps"]).items():

        def col(key: str, group: list[dict[str, str]] = group) -> str:
            return mean_std([float(r[key]) for r in group])

        lines.append(
            f"| {problem} | {steps} | {len(group)} | {col('official_digit_acc')} | {col('pslbridge_digit_acc')} | "
            f"{col('untrained_digit_acc')} | {col('official_sum_acc')} | {col('pslbridge_sum_acc')} | "
            f"{col('same_digit_pct')} |"
        )
    text = "\n".join(lines) + "\n"
    (out / "accuracy.md").write_text(text)
    return text


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks accuracy")
    parser.add_argument("--problem", default="add1-300")
    parser.add_argument("--steps", type=positive_int, default=100)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--out", type=Path, default=Path("out/bench"))
    args = parser.parse_args(argv)
    run(args.problem, args.steps, args.seeds, args.out)
    print((args.out / "accuracy.md").read_text())
    return 0
