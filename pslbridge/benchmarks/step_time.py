"""Per-gradient-step time: pslbridge's Trainer against the official NeuPSL loop.

The official loop is the jar's ``Energy`` learner with its Python deep-model server; both run on the
same MNIST-Add1 data, network and PSL options, interleaved (A B A B ...), medians over repeats.

Run: ``python -m pslbridge.benchmarks steps --additions 300 --steps 20 --repeats 3`` (needs the
``bench`` extra: pslpython 2.4.1). Writes ``steps.md`` / ``steps.csv`` under ``--out``.

Example:
    >>> main(["--additions", "30", "--steps", "3", "--repeats", "1"])  # doctest: +SKIP
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np

from ..experiments.reporting import append_csv

__all__ = ["main", "run"]

OPTIONS = {"admmreasoner.maxiterations": "500"}


def _problem(additions: int, seed: int = 0):
    from ..datasets.mnist import load_mnist
    from ..experiments.mnist_add import addition_spec, make_additions

    x_train, y_train, _, _ = load_mnist()
    train = make_additions(y_train, 1, 2 * additions, np.random.default_rng(seed))
    pixels = (x_train[train.image_ids].reshape(len(train.image_ids), -1) / 255.0).astype(np.float32)
    return addition_spec(train), pixels


def _pslbridge_steps(spec, pixels: np.ndarray, steps: int) -> dict[str, float]:
    from ..bridge import Bridge
    from ..experiments.mnist_add import lenet
    from ..training import NeuralBinding, Trainer, set_seed

    set_seed(0)
    t0 = time.perf_counter()
    with Bridge(spec, options=OPTIONS) as bridge:
        build = time.perf_counter() - t0
        bridge.rule_weights = np.full(len(bridge.rule_weights), 1.0 / len(bridge.rule_weights))  # PSL's simplex start
        model = lenet()
        trainer = Trainer(bridge, [NeuralBinding("Neural", model, pixels.reshape(-1, 28, 28, 1))])
        times = []
        for _ in range(steps):
            t = time.perf_counter()
            trainer.train_step()
            times.append(time.perf_counter() - t)
    return {
        "step_s": float(np.mean(times[1:] if len(times) > 1 else times)),
        "build_s": build,
        "loop_s": float(np.sum(times)),
    }


def run(additions: int, steps: int, repeats: int, out: Path) -> dict[str, Any]:
    """Interleave the two contenders ``repeats`` times; write the medians."""
    from .official import run_official

    spec, pixels = _problem(additions)
    ours: list[dict[str, float]] = []
    theirs: list[dict[str, Any]] = []
    for _ in range(repeats):
        theirs.append(run_official(spec, pixels, steps=steps, options=OPTIONS))
        ours.append(_pslbridge_steps(spec, pixels, steps + 2))  # PSL's loop runs numsteps + 2 steps
    row = {
        "additions": additions,
        "steps": steps + 2,
        "repeats": repeats,
        "official_step_s": statistics.median(r["step_s"] for r in theirs),
        "official_total_s": statistics.median(r["total_s"] for r in theirs),
        "pslbridge_step_s": statistics.median(r["step_s"] for r in ours),
        "pslbridge_build_s": statistics.median(r["build_s"] for r in ours),
    }
    row["ratio"] = row["official_step_s"] / row["pslbridge_step_s"]
    fields = list(row)
    append_csv(out / "steps.csv", row, fields)
    lines = [
        "| additions | steps | official s/step | pslbridge s/step | official / pslbridge |",
        "|---:|---:|---:|---:|---:|",
        f"| {additions} | {steps + 2} | {row['official_step_s']:.3f} | {row['pslbridge_step_s']:.3f} "
        f"| {row['ratio']:.2f}x |",
    ]
    with open(out / "steps.md", "a") as handle:
        handle.write("\n".join(lines) + "\n\n")
    print(json.dumps({k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()}), flush=True)
    return row


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(prog="python -m pslbridge.benchmarks steps")
    parser.add_argument("--additions", type=int, nargs="+", default=[300])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path("out/bench"))
    args = parser.parse_args(argv)
    for additions in args.additions:
        run(additions, args.steps, args.repeats, args.out)
    return 0
