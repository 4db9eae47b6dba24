"""MNIST-Add-N abduced-place learning steps: labelled totals against the capped latent solve.

The MNIST-Add-N runner trains the places whose carries the network's own digits settle as one-place programs
(:func:`experiments.mnist_add_n.model.abduced_places`). Each such place's total is fixed by its labels, so
``label_totals`` labels it and a learning step solves nothing. For one program of ``places`` such places (the
runner's programs hold 44 or 45), on fake network outputs that drift by one training step's change each time,
three variants of the energy-loss step:

* ``latent-capped``: totals latent, ADMM capped at 50 iterations (the runner's setting before ``label_totals``);
* ``labelled``: totals labelled (``label_totals=True``), no solve;
* ``latent-exact``: totals latent, ADMM to 1e-7 (or 50,000 iterations) from a cold start on the last outputs
  only (the reference: the exact latent MAP state; its time is that one solve's).

Each row gives the median step time (after a warm-up step), and at the last step the energy and the neural
gradient against the reference's on the same outputs: the energy's relative gap and the mean absolute
gradient difference once each image's row is centred (a per-image constant is a subgradient tie that the
network's softmax cancels).

A second table times an abduction round's build for ``--round-places`` places, in batches of 44, ready for
``fit`` (a :class:`~pslbridge.keras.ProgramData`): ``grounded``, a program grounded per batch
(:func:`pslbridge.batching.component_batches`, ``relabel_places=False``), against ``relabelled``, resident programs
relabelled per batch (:class:`~experiments.mnist_add_n.relabelled.RelabelledPlaces`, grounded here too, one per
batch size), interleaved, medians over ``--round-repeats``.

Run: ``python -m benchmarks abduced --places 44 --round-places 2000`` (the runner's program size); writes
``abduced.csv``, ``abduced-round.csv`` and ``abduced.md`` under ``--out``.

Example:
    >>> rows = measure(4, steps=2)
    >>> [r["variant"] for r in rows], rows[1]["solve_iterations"], rows[2]["energy_gap"] == 0.0
    (['latent-capped', 'labelled', 'latent-exact'], 0, True)
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

from .resident import drift

__all__ = ["VARIANTS", "main", "measure", "measure_round"]

_EXACT = {"admmreasoner.epsilonabs": "1e-7", "admmreasoner.epsilonrel": "1e-7", "admmreasoner.maxiterations": "50000"}

#: variant -> (label_totals, PSL options)
VARIANTS: dict[str, tuple[bool, dict[str, str]]] = {
    "latent-capped": (False, {"admmreasoner.maxiterations": "50"}),
    "labelled": (True, {}),
    "latent-exact": (False, _EXACT),
}


def _places(count: int, seed: int) -> tuple[Any, np.ndarray]:
    """``count`` abduced one-place additions (from 3-digit ones, true digits) and random network outputs."""
    from experiments.mnist_add_n.model import abduced_places, make_additions_n

    rng = np.random.default_rng(seed)
    images = 6 * count  # every 3-digit addition gives 3 one-place ones
    data = make_additions_n(rng.integers(0, 10, size=images), np.arange(images), 3, rng)
    places = abduced_places(data, data.digits).take(range(count))
    logits = rng.normal(size=(images, 10)) * 2
    return places, (np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)).astype(np.float32)


def _run(places: Any, variant: str, outputs: list[np.ndarray]) -> tuple[list[float], Any, np.ndarray]:
    """Time one learning step per output array (the first untimed, unless it is the only one).

    Returns:
        The times, the last step, and its neural gradient with rows in image order.
    """
    from experiments.mnist_add_n.model import addition_n_spec
    from pslbridge.bridge import Bridge
    from pslbridge.neural_inputs import entity_keys

    label_totals, options = VARIANTS[variant]
    with Bridge(addition_n_spec(places, form="pairs", label_totals=label_totals), options=options) as bridge:
        keys = [int(k) for k in entity_keys(bridge.entities("Neural"))]
        times = []
        for i, probs in enumerate(outputs):
            start = time.perf_counter()
            step = bridge.learn_step({"Neural": probs[keys]}, potentials=False)
            if i or len(outputs) == 1:
                times.append(time.perf_counter() - start)
        return times, step, step.neural_gradients["Neural"][np.argsort(keys)]


def measure(places: int, *, steps: int = 5, seed: int = 0) -> list[dict[str, Any]]:
    """One row per variant: median step time and the last step's distance to the exact latent MAP state.

    Args:
        places: One-place additions in the program.
        steps: Timed steps (after one warm-up step), each on outputs drifted by one training step.
        seed: Seed of the places and the outputs.

    Returns:
        Rows with ``places``, ``variant``, ``step_s``, ``solve_iterations`` (the last step's latent solve),
        ``energy``, ``energy_gap`` (relative, to ``latent-exact``) and ``gradient_gap``.
    """
    data, probs = _places(places, seed)
    rng = np.random.default_rng(seed + 1)
    outputs = [probs]
    for _ in range(steps):
        outputs.append(drift(outputs[-1], rng))
    results = {
        variant: _run(data, variant, outputs[-1:] if variant == "latent-exact" else outputs) for variant in VARIANTS
    }
    _, exact, reference = results["latent-exact"]
    rows = []
    for variant, (times, step, gradient) in results.items():
        difference = gradient - reference
        centred = difference - difference.mean(axis=1, keepdims=True)
        rows.append(
            {
                "places": places,
                "variant": variant,
                "step_s": float(statistics.median(times)),
                "solve_iterations": int(step.iterations.get("latent") or 0),
                "energy": float(step.energy),
                "energy_gap": abs(float(step.energy) - float(exact.energy)) / max(abs(float(exact.energy)), 1e-12),
                "gradient_gap": float(np.abs(centred).mean()),
            }
        )
    return rows


def _round_build(places: Any, images: np.ndarray, variant: str, per_batch: int) -> float:
    """Seconds to build one abduction round's ``ProgramData`` from ``places`` (its programs closed after)."""
    from experiments.mnist_add_n.model import addition_n_spec
    from experiments.mnist_add_n.relabelled import RelabelledPlaces
    from pslbridge.batching import component_batches
    from pslbridge.keras import ProgramData

    inputs = (range(len(images)), images)
    start = time.perf_counter()
    if variant == "grounded":
        spec = addition_n_spec(places, form="pairs", label_totals=True)
        batches = component_batches(spec, {"Neural": inputs}, per_batch, entities={"Place": [0]}, seed=0)
        ProgramData(batches, seed=0)
        seconds = time.perf_counter() - start
        for bridge, _ in batches:
            bridge.close()
        return seconds
    with RelabelledPlaces("pairs") as resident:
        ProgramData(resident.batches(places, images, per_batch, seed=0), seed=0)
        return time.perf_counter() - start


def measure_round(places: int, *, per_batch: int = 44, repeats: int = 1, seed: int = 0) -> dict[str, Any]:
    """An abduction round's build, grounded per batch and relabelled, interleaved; medians over ``repeats``.

    Returns:
        ``places``, ``batches``, ``grounded_s``, ``relabelled_s`` and ``ratio`` (grounded / relabelled).

    Example:
        >>> row = measure_round(20, per_batch=8)
        >>> row["batches"], row["grounded_s"] > 0, row["relabelled_s"] > 0
        (3, True, True)
    """
    data, _ = _places(places, seed)
    images = np.arange(len(data.pool), dtype=np.float32)[:, None]  # an input row per image
    times: dict[str, list[float]] = {"grounded": [], "relabelled": []}
    for _ in range(repeats):
        for variant, seconds in times.items():
            seconds.append(_round_build(data, images, variant, per_batch))
    grounded, relabelled = (statistics.median(times[v]) for v in ("grounded", "relabelled"))
    batches = -(-places // per_batch)
    return {
        "places": places,
        "batches": batches,
        "grounded_s": grounded,
        "relabelled_s": relabelled,
        "ratio": grounded / relabelled,
    }


def _table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| places | variant | step ms | latent iterations | energy | energy gap | gradient gap | capped / labelled |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        capped = next(r for r in rows if r["places"] == row["places"] and r["variant"] == "latent-capped")
        ratio = f"{capped['step_s'] / row['step_s']:.1f}x" if row["variant"] == "labelled" else ""
        lines.append(
            f"| {row['places']} | {row['variant']} | {1e3 * row['step_s']:.1f} | {row['solve_iterations']} | "
            f"{row['energy']:.3f} | {row['energy_gap']:.1e} | {row['gradient_gap']:.3f} | {ratio} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; writes ``abduced.csv`` and ``abduced.md`` under ``--out``."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks abduced", formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    parser.add_argument("--places", type=positive_int, nargs="+", default=[44], help="program sizes")
    parser.add_argument("--steps", type=positive_int, default=10, help="timed steps per variant (after a warm-up)")
    parser.add_argument("--round-places", type=int, default=2000, help="places of the timed abduction round (0: none)")
    parser.add_argument("--round-repeats", type=positive_int, default=1, help="interleaved builds per variant")
    parser.add_argument("--out", type=Path, default=Path("out/bench"), help="output folder")
    args = parser.parse_args(argv)
    from pslbridge import jvm

    jvm.start("benchmark")
    rows = []
    for places in args.places:
        for row in measure(places, steps=args.steps):
            append_csv(args.out / "abduced.csv", row, list(row))
            rows.append(row)
            print(json.dumps({k: (round(v, 5) if isinstance(v, float) else v) for k, v in row.items()}), flush=True)
    text = (
        "# MNIST-Add-N abduced places: labelled totals against the capped latent solve\n\n"
        + _table(rows)
        + "\n\nEnergy and gradient gaps are the last step's, against `latent-exact` on the same network outputs; "
        "gradients centred per image.\n"
    )
    if args.round_places > 0:
        row = measure_round(args.round_places, repeats=args.round_repeats)
        append_csv(args.out / "abduced-round.csv", row, list(row))
        print(json.dumps({k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()}), flush=True)
        text += (
            "\n| round places | batches of 44 | grounded s | relabelled s | grounded / relabelled |\n"
            "|---|---|---|---|---|\n"
            f"| {row['places']} | {row['batches']} | {row['grounded_s']:.2f} | {row['relabelled_s']:.2f} | "
            f"{row['ratio']:.1f}x |\n"
        )
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "abduced.md").write_text(text)
    print(text)
    return 0
