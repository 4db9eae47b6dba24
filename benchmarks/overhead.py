"""Bridge overhead against one ADMM solve, from 10^3 to 10^6 ground atoms (MNIST-Add1 programs).

For each size: time to push the predictions, read the target values back, compute Φ and the neural
gradients, next to one warm ADMM solve; and the push/read throughput in GB/s next to a plain numpy
copy of the same bytes (the physical limit). Medians over repeats.

Run: ``python -m benchmarks overhead --additions 25 250 2500 25000``.

Example:
    >>> row = measure(25, repeats=1)
    >>> row["atoms"], row["push_read_pct"] < 100
    (1200, True)
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from experiments.arguments import positive_int
from experiments.reporting import append_csv

from .resident import add1_problem

__all__ = ["main", "measure"]


def _median_time(fn: Callable[[], Any], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def measure(additions: int, repeats: int = 5) -> dict[str, Any]:
    """Measure one size; returns a row of seconds, percentages and GB/s."""
    from pslbridge.bridge import Bridge

    spec, probs = add1_problem(additions, seed=additions)
    with Bridge(spec) as bridge:
        program = bridge.program
        bridge.infer({"Neural": probs}, reset=True)  # warm-up (JIT) and a first MAP state
        program.labels.fix()
        program.rule_potentials()  # warm-up
        program.energy_gradient()
        program.labels.unfix()
        push = _median_time(lambda: program.write_neural({"Neural": probs}), repeats)
        read = _median_time(lambda: program.read_targets(), repeats)
        phi = _median_time(lambda: program.rule_potentials(), repeats)
        grad = _median_time(lambda: program.energy_gradient(), repeats)
        objective = _median_time(lambda: program.objective(), repeats)
        solve = _median_time(lambda: program.solve(reset=False), max(1, repeats // 2))
        pushed_bytes = probs.astype(np.float32).nbytes
        read_bytes = 4 * program.rv_count
        copy_target = np.empty_like(probs, dtype=np.float32)
        numpy_copy = _median_time(lambda: np.copyto(copy_target, probs), repeats)
        row = {
            "additions": additions,
            "atoms": program.atom_count,
            "terms": program.term_count,
            "push_s": push,
            "read_s": read,
            "phi_s": phi,
            "gradient_s": grad,
            "objective_s": objective,
            "solve_s": solve,
            "overhead_pct": 100 * (push + read + phi + grad) / solve,
            # Frozen rule weights (learn_step(potentials=False)): one objective pass instead of Φ.
            "frozen_pct": 100 * (push + read + objective + grad) / solve,
            "push_read_pct": 100 * (push + read) / solve,
            "push_gbps": pushed_bytes / push / 1e9,
            "read_gbps": read_bytes / read / 1e9,
            "numpy_copy_gbps": pushed_bytes / max(numpy_copy, 1e-9) / 1e9,
        }
    return row


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; writes ``overhead.csv`` and ``overhead.md`` under ``--out``."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks overhead")
    parser.add_argument("--additions", type=positive_int, nargs="+", default=[25, 250, 2500, 25000])
    parser.add_argument("--repeats", type=positive_int, default=5)
    parser.add_argument("--out", type=Path, default=Path("out/bench"))
    args = parser.parse_args(argv)
    rows = []
    for additions in args.additions:
        row = measure(additions, args.repeats)
        append_csv(args.out / "overhead.csv", row, list(row))
        rows.append(row)
        print(json.dumps({k: (round(v, 6) if isinstance(v, float) else v) for k, v in row.items()}), flush=True)
    lines = [
        "| atoms | terms | push ms | read ms | Φ ms | gradient ms | objective ms | ADMM solve s | push+read % "
        "| all % | frozen weights % | push GB/s | read GB/s | numpy copy GB/s |",
        "|" + "---:|" * 14,
    ]
    for r in rows:
        lines.append(
            f"| {r['atoms']} | {r['terms']} | {1e3 * r['push_s']:.3f} | {1e3 * r['read_s']:.3f} | "
            f"{1e3 * r['phi_s']:.1f} | {1e3 * r['gradient_s']:.1f} | {1e3 * r['objective_s']:.1f} | "
            f"{r['solve_s']:.3f} | {r['push_read_pct']:.3f} | {r['overhead_pct']:.2f} | {r['frozen_pct']:.2f} | "
            f"{r['push_gbps']:.2f} | "
            f"{r['read_gbps']:.2f} | {r['numpy_copy_gbps']:.2f} |"
        )
    lines += [
        "",
        "all % = push + read + Φ + gradient (a step that learns rule weights); frozen weights % = push + read + "
        "one objective pass + gradient (`learn_step(potentials=False)`, what `Trainer` does without a weight "
        "optimizer). Φ is one pass of PSL's parallel objective per weighted rule (5 in MNIST-Add1), the gradient "
        "one pass of `computeOptimalValueGradient`; both are the engine's own passes over every ground term.",
    ]
    text = "\n".join(lines) + "\n"
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "overhead.md").write_text(text)
    print(text)
    return 0
