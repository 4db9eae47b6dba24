"""Resident-program benchmark: ``infer()`` and ``learn_step()`` on MNIST-Add1 against ``runtime.run``.

pslpython's ``runtime.run`` takes JSON in, gives JSON out and re-grounds every call; both run in one
process on one machine.

Run: ``python -m benchmarks resident --sizes 1000 10000 --repeats 5``.
Writes a markdown table and a CSV under ``--out`` (default ``out/bench``).

Example:
    >>> spec, probs = add1_problem(3, seed=1)
    >>> probs.shape
    (6, 10)
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from experiments.arguments import positive_int
from pslbridge.examples.mnist_addition import add1_spec
from pslbridge.model import ModelSpec

__all__ = ["add1_problem", "main", "run"]

#: The NeuPSL paper's ADMM cap while learning MNIST-Add1; inference uses PSL's defaults.
LEARN_OPTIONS = {"admmreasoner.maxiterations": "500"}


def add1_problem(additions: int, seed: int = 0, labelled: float = 1.0) -> tuple[ModelSpec, np.ndarray]:
    """An MNIST-Add1 program of ``additions`` pairs with fake, peaked network outputs.

    Args:
        additions: Number of additions.
        seed: Random seed.
        labelled: Fraction of additions (the first ones) whose sum is given as truth.

    Example:
        >>> add1_problem(2)[0].predicate("Neural").neural.class_size
        10
    """
    rng = np.random.default_rng(seed)
    digits = rng.integers(0, 10, size=2 * additions)
    sums = (digits[0::2] + digits[1::2]).tolist()
    spec = add1_spec([(2 * i, 2 * i + 1) for i in range(additions)], sums=sums, phase="learn")
    if labelled < 1.0:
        table = spec.tables("ImageSum", "truth")[0]
        keep = table.args[:, 0].astype(np.int64) < 2 * int(additions * labelled)
        table.args, table.values = table.args[keep], table.values[keep]
    probs = rng.dirichlet(np.ones(10), size=2 * additions) * 0.4
    probs[np.arange(2 * additions), digits] += 0.6
    return spec, probs.astype(np.float32)


def drift(probs: np.ndarray, rng: np.random.Generator, scale: float = 0.01) -> np.ndarray:
    """Predictions one training step later: a small perturbation, renormalised.

    Example:
        >>> later = drift(np.full((2, 4), 0.25), np.random.default_rng(0))
        >>> later.shape, bool(np.allclose(later.sum(axis=1), 1.0)), bool(np.abs(later - 0.25).max() < 0.1)
        ((2, 4), True, True)
    """
    noisy = np.clip(probs + rng.normal(0, scale, probs.shape), 1e-4, None)
    return (noisy / noisy.sum(axis=1, keepdims=True)).astype(np.float32)


def _median(values: list[float]) -> float:
    return float(statistics.median(values)) if values else float("nan")


def _runtime_run() -> tuple[Callable[[dict[str, Any], str], Any], str]:
    try:
        from pslpython import runtime  # type: ignore[import-not-found]

        return runtime.run, "pslpython.runtime.run"
    except ImportError:
        from pslbridge import jvm

        def run(config: dict[str, Any], base: str) -> Any:
            # The body of pslpython 2.4.1's runtime.run, on the JVM pslbridge started.
            return json.loads(jvm.run_psl_runtime(json.dumps(config), base)[0])

        return run, "Runtime.serializedRun (pslpython.runtime.run's body; pslpython not installed)"


def _time_learn_steps(
    bridge: Any, probs: np.ndarray, rng: np.random.Generator, repeats: int, prefix: str, row: dict[str, Any]
) -> np.ndarray:
    """Time ``repeats`` learn steps (after a warm-up) on drifting predictions; returns the last predictions.

    Medians go into ``row`` as ``<prefix>_<phase>_s`` and ``<prefix>_iterations``.
    """
    from pslbridge.learning import WeightOptimizer

    optimizer = WeightOptimizer()
    bridge.learn_step({"Neural": probs}, weights=optimizer, reset=True)  # warm-up
    samples: dict[str, list[float]] = {}
    for _ in range(repeats):
        probs = drift(probs, rng)
        t = time.perf_counter()
        step = bridge.learn_step({"Neural": probs}, weights=optimizer)
        samples.setdefault("total", []).append(time.perf_counter() - t)
        samples.setdefault("iterations", []).append(float(step.iterations.get("latent") or 0))
        for key, value in step.timings.items():
            samples.setdefault(key, []).append(value)
    for key, values in samples.items():
        row[f"{prefix}_{key}" + ("" if key == "iterations" else "_s")] = _median(values)
    return probs


def run(sizes: list[int], repeats: int, out: Path, runtime_repeats: int = 2) -> list[dict[str, Any]]:
    """Measure and write ``resident.md`` and ``resident.csv`` under ``out``."""
    from pslbridge import jvm
    from pslbridge.bridge import Bridge
    from pslbridge.oracle import spec_to_runtime_config

    jvm.start("benchmark")
    rows: list[dict[str, Any]] = []
    for size in sizes:
        rng = np.random.default_rng(size)
        spec, probs = add1_problem(size, seed=size)
        t0 = time.perf_counter()
        bridge = Bridge(spec, options=LEARN_OPTIONS)
        build = time.perf_counter() - t0
        row: dict[str, Any] = {
            "additions": size,
            "atoms": bridge.atom_count,
            "terms": bridge.term_count,
            "build_s": build,
            **{f"build_{k}_s": v for k, v in bridge.program.timings.items()},
        }
        bridge.infer({"Neural": probs}, reset=True)  # warm-up (JIT)
        infer: dict[str, list[float]] = {"push": [], "solve": [], "read": [], "total": [], "iterations": []}
        for _ in range(repeats):
            probs = drift(probs, rng)
            t = time.perf_counter()
            result = bridge.infer({"Neural": probs})
            infer["total"].append(time.perf_counter() - t)
            for key in ("push", "solve", "read"):
                infer[key].append(result.timings[key])
            infer["iterations"].append(float(result.iterations or 0))
        for key, values in infer.items():
            row[f"infer_{key}" + ("" if key == "iterations" else "_s")] = _median(values)
        probs = _time_learn_steps(bridge, probs, rng, repeats, "learn", row)
        row["heap_mb"] = jvm.heap_used_bytes() / 2**20
        entities, classes = bridge.entities("Neural"), bridge.classes("Neural")
        bridge.close()
        # Semi-supervised variant: half the additions unlabelled, so the latent solve has work to do.
        bridge = Bridge(add1_problem(size, seed=size, labelled=0.5)[0], options=LEARN_OPTIONS)
        probs = _time_learn_steps(bridge, probs, rng, repeats, "latent", row)
        bridge.close()
        runtime_run, label = _runtime_run()
        spec.phase = "infer"
        config = spec_to_runtime_config(
            spec,
            {"Neural": probs},
            {"Neural": entities},
            {"Neural": classes},
            options={
                "runtime.log.level": "WARN",
                # Spare runtime.run printing every atom to stdout.
                "runtime.inference.output.results": "false",
            },
        )
        times = []
        for _ in range(runtime_repeats):
            t = time.perf_counter()
            output = runtime_run(config, ".")
            times.append(time.perf_counter() - t)
            assert output["atoms"], "runtime.run returned no atoms"
        jvm.release_predicates(list(spec.predicates))  # the Runtime leaves its predicates in PSL's registry
        row["runtime_run_s"] = _median(times)
        row["runtime_run_label"] = label
        row["ratio_runtime_over_infer"] = row["runtime_run_s"] / row["infer_total_s"]
        rows.append(row)
        print(json.dumps({k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()}), flush=True)
    _write(rows, out)
    return rows


def _write(rows: list[dict[str, Any]], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    keys = sorted({k for row in rows for k in row})
    with open(out / "resident.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=keys)
        writer.writeheader()
        writer.writerows(rows)
    lines = [
        "# Resident program vs runtime.run (MNIST-Add1, medians)",
        "",
        "| additions | atoms | terms | build s | infer push ms | infer solve s | infer read ms | ADMM iters "
        "| runtime.run s | runtime.run / infer |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['additions']} | {r['atoms']} | {r['terms']} | {r['build_s']:.2f} | {1000 * r['infer_push_s']:.2f} "
            f"| {r['infer_solve_s']:.3f} | {1000 * r['infer_read_s']:.2f} | {r['infer_iterations']:.0f} "
            f"| {r['runtime_run_s']:.2f} | {r['ratio_runtime_over_infer']:.1f}x |"
        )
    lines += [
        "",
        "## learn_step split (medians, ms)",
        "",
        "All additions labelled (the paper's regime: no latent atoms), and half unlabelled (latent solve).",
        "",
        "| additions | labels | push | fix | latent solve (iters) | Φ | gradient | read | step | total |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        for prefix, label in (("learn", "all"), ("latent", "half")):
            ms = {
                k: 1000 * r.get(f"{prefix}_{k}_s", float("nan"))
                for k in ("push", "fix", "solve", "potentials", "gradient", "read", "step", "total")
            }
            iters = r.get(f"{prefix}_iterations", 0.0)
            lines.append(
                f"| {r['additions']} | {label} | {ms['push']:.2f} | {ms['fix']:.2f} | "
                f"{ms['solve']:.1f} ({iters:.0f}) | {ms['potentials']:.1f} | {ms['gradient']:.1f} | "
                f"{ms['read']:.2f} | {ms['step']:.2f} | {ms['total']:.1f} |"
            )
    label = rows[0]["runtime_run_label"] if rows else ""
    lines += [
        "",
        f"runtime.run: {label}. Predictions drift slightly between calls (as in training); "
        "pslbridge warm-starts ADMM, runtime.run reloads and re-grounds every call.",
    ]
    (out / "resident.md").write_text("\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks resident")
    parser.add_argument("--sizes", type=positive_int, nargs="+", default=[1000, 10000])
    parser.add_argument("--repeats", type=positive_int, default=5)
    parser.add_argument("--runtime-repeats", type=positive_int, default=2)
    parser.add_argument("--out", type=Path, default=Path("out/bench"))
    args = parser.parse_args(argv)
    run(args.sizes, args.repeats, args.out, args.runtime_repeats)
    print((args.out / "resident.md").read_text())
    return 0
