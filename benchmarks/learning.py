"""Learning-step benchmark: where a ``learn_step`` spends its time, per loss and reasoner, and warm starts.

For MNIST-Add1 programs of each size, fully labelled and half unlabelled (the latent solve has work then), on
drifting fake network outputs (one training step's change each time), three variants:

* ``energy-admm``: NeuPSL's energy loss on ADMM (the paper's setting, 500-iteration cap);
* ``energy-dualbcd``: the energy loss on dual BCD (PSL's default ``duallcqp.*`` options);
* ``bce-dualbcd``: the bilevel binary cross-entropy (PSL's ``minimizer.*`` defaults) on dual BCD.

Each step is split as :meth:`pslbridge.Bridge.learn_step` reports it (push, latent/MAP/augmented solves, Φ,
gradient, read, weight step; medians after a warm-up step), with its solve iterations. A second table follows
the iterations of every step of a longer run (``--warm-steps``): ADMM against dual BCD, both warm-started.

Run: ``python -m benchmarks learning --additions 1000 10000``; writes ``learning.csv``,
``learning.md``, ``warm-start.csv`` and ``warm-start.png`` under ``--out``.

Example:
    >>> row = measure(20, "bce-dualbcd", labelled=0.5, steps=2)
    >>> row["variant"], row["latent_atoms"] > 0, row["total_s"] > 0
    ('bce-dualbcd', True, True)
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np

from experiments.arguments import positive_int
from experiments.reporting import append_csv

from .resident import add1_problem, drift

__all__ = ["VARIANTS", "main", "measure", "warm_start"]

#: variant -> (loss, reasoner, PSL options)
VARIANTS = {
    "energy-admm": ("energy", "admm", {"admmreasoner.maxiterations": "500"}),
    "energy-dualbcd": ("energy", "dualbcd", {}),
    "bce-dualbcd": ("bce", "dualbcd", {}),
}


def measure(additions: int, variant: str, *, labelled: float = 1.0, steps: int = 5, seed: int = 0) -> dict[str, Any]:
    """Median time split of ``steps`` learning steps (after one warm-up step) of one variant.

    Returns:
        A row: sizes, the median seconds per phase (``<phase>_s``), the total, and median iterations per solve.
    """
    from pslbridge.bridge import Bridge
    from pslbridge.learning import WeightOptimizer

    loss, reasoner, options = VARIANTS[variant]
    spec, probs = add1_problem(additions, seed=seed, labelled=labelled)
    rng = np.random.default_rng(seed)
    samples: dict[str, list[float]] = {}
    with Bridge(spec, options=options, reasoner=reasoner) as bridge:
        optimizer = WeightOptimizer()
        first = bridge.learn_step({"Neural": probs}, loss=loss, weights=optimizer, reset=True)
        for _ in range(steps):
            probs = drift(probs, rng)
            start = time.perf_counter()
            step = bridge.learn_step({"Neural": probs}, loss=loss, weights=optimizer)
            samples.setdefault("total", []).append(time.perf_counter() - start)
            for key, value in step.timings.items():
                samples.setdefault(key, []).append(value)
            for key, value in step.iterations.items():
                samples.setdefault(f"{key}_iterations", []).append(float(value or 0))
        row: dict[str, Any] = {
            "additions": additions,
            "labelled": labelled,
            "variant": variant,
            "atoms": bridge.atom_count,
            "terms": bridge.term_count,
            "latent_atoms": first.latent_atoms,
        }
    for key, values in samples.items():
        row[key if key.endswith("iterations") else f"{key}_s"] = float(statistics.median(values))
    return row


def warm_start(additions: int, steps: int, seed: int = 0) -> dict[str, list[int]]:
    """Solve iterations of each of ``steps`` energy steps on drifting predictions, ADMM and dual BCD.

    Example:
        >>> curves = warm_start(10, steps=3)
        >>> sorted(curves), len(curves["admm"])
        (['admm', 'dualbcd'], 3)
    """
    from pslbridge.bridge import Bridge

    curves: dict[str, list[int]] = {}
    for reasoner, options in (("admm", {"admmreasoner.maxiterations": "500"}), ("dualbcd", {})):
        spec, probs = add1_problem(additions, seed=seed, labelled=0.5)
        rng = np.random.default_rng(seed)
        iterations = []
        with Bridge(spec, options=options, reasoner=reasoner) as bridge:
            for _ in range(steps):
                step = bridge.learn_step({"Neural": probs}, potentials=False)
                iterations.append(int(step.iterations.get("latent") or 0))
                probs = drift(probs, rng)
        curves[reasoner] = iterations
    return curves


def _table(rows: list[dict[str, Any]]) -> str:
    phases = ["push", "fix", "solve", "map", "latent", "augmented", "potentials", "gradient", "read", "step"]
    present = [p for p in phases if any(f"{p}_s" in r for r in rows)]
    head = "| additions | labelled | variant | terms | " + " | ".join(f"{p} ms" for p in present)
    lines = [head + " | total ms | iterations |", "|" + "---|" * (len(present) + 6)]
    for r in rows:
        cells = " | ".join(f"{1e3 * r[f'{p}_s']:.1f}" if f"{p}_s" in r else "" for p in present)
        iterations = ", ".join(f"{k[:-11]} {r[k]:.0f}" for k in sorted(r) if k.endswith("_iterations"))
        lines.append(
            f"| {r['additions']} | {r['labelled']:.0%} | {r['variant']} | {r['terms']} | {cells} | "
            f"{1e3 * r['total_s']:.1f} | {iterations} |"
        )
    return "\n".join(lines)


def _plot(curves: dict[str, list[int]], path: Path, additions: int) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:  # pragma: no cover - matplotlib is in the experiments extra
        return
    fig, ax = plt.subplots(figsize=(6, 3.5))
    for name, values in curves.items():
        ax.plot(range(1, len(values) + 1), values, label=name)
    ax.set(
        title=f"MNIST-Add1, {additions} additions (half unlabelled): latent-solve iterations per step",
        xlabel="learning step",
        ylabel="iterations",
        yscale="log",
    )
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; writes ``learning.csv``/``.md`` and ``warm-start.csv``/``.png`` under ``--out``."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks learning", formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    parser.add_argument("--additions", type=positive_int, nargs="+", default=[1000, 10000], help="program sizes")
    parser.add_argument("--steps", type=positive_int, default=5, help="timed steps per variant (after a warm-up)")
    parser.add_argument("--warm-steps", type=positive_int, default=100, help="steps of the warm-start curves")
    parser.add_argument("--warm-additions", type=positive_int, default=1000, help="size of the warm-start run")
    parser.add_argument("--out", type=Path, default=Path("out/bench"), help="output folder")
    args = parser.parse_args(argv)
    from pslbridge import jvm

    jvm.start("benchmark")
    rows = []
    for additions in args.additions:
        for labelled in (1.0, 0.5):
            for variant in VARIANTS:
                row = measure(additions, variant, labelled=labelled, steps=args.steps)
                append_csv(args.out / "learning.csv", row, sorted(row))
                rows.append(row)
                print(json.dumps({k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()}), flush=True)
    curves = warm_start(args.warm_additions, args.warm_steps)
    args.out.mkdir(parents=True, exist_ok=True)
    with open(args.out / "warm-start.csv", "w") as handle:
        handle.write("step," + ",".join(curves) + "\n")
        for i, values in enumerate(zip(*curves.values()), start=1):
            handle.write(f"{i}," + ",".join(map(str, values)) + "\n")
    _plot(curves, args.out / "warm-start.png", args.warm_additions)
    summary = {name: (int(np.median(v[:10])), int(np.median(v[-10:])), int(sum(v))) for name, v in curves.items()}
    text = (
        "# Learning steps by loss and reasoner\n\n"
        + _table(rows)
        + f"\n\nWarm starts ({args.warm_additions} additions, half unlabelled, {args.warm_steps} energy steps on "
        "drifting predictions): median latent-solve iterations over the first / last 10 steps, total: "
        + "; ".join(f"{k} {a} / {b}, {t}" for k, (a, b, t) in summary.items())
        + "\n"
    )
    (args.out / "learning.md").write_text(text)
    print(text)
    return 0
