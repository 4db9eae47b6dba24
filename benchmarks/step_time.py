"""Per-gradient-step and per-epoch time and peak memory: pslbridge against the official NeuPSL loop.

Both contenders run the same problem (:mod:`~benchmarks.problems`: program, features,
seeded network, PSL options, JVM heap and GC) each in a fresh process tree, interleaved (official,
pslbridge, official, ...), ``repeats`` times; the table reports medians.

- official: the jar's ``Energy`` learner with its Python deep-model server
  (:func:`~benchmarks.official.run_official`), at PSL's default log level, the deep model
  written as the NeuPSL authors write theirs (eager, persistent tape). Optional, labelled rows:
  ``official-compiled`` (the deep model graph-compiled like pslbridge's networks: what is left is the
  bridge's own difference) and ``official-TRACE`` (the log level of the paper's configs, at which PSL
  does and logs more per step).
- pslbridge: :mod:`~benchmarks.worker` (``NeuPSLModel.fit``, Keras, one full-batch learn step per
  epoch, one forward pass per step). The same process then measures the step's *limit*: the network's compiled
  forward + backward + update alone plus PSL's ``learn_step`` alone (medians); the table reports the step over
  that limit (each run against its own limit, median over runs) and the step of the ``Trainer`` route, which
  runs the forward pass twice.

Step time is the median time of one learning iteration after the first (warm-up) one: for the official loop
the time between consecutive learning-mode predictions (its deep model timestamps each), for pslbridge the
time between Keras' batch-begin and batch-end hooks; the mean over all steps (warm-up included: PSL's loop
time over numsteps + 2 steps) is reported next to it. Where the time goes: the official run's deep model times
its server's handlers (reading PSL's arrays, assembling the data as pslpython does, predict, fit; the rest of
an iteration is Java: PSL and the socket), pslbridge times ``learn_step`` (the rest is the network's forward
and backward passes). Peak RSS is the process tree's (java + Python server for the official run); peak heap is
the largest pre-collection occupancy in the JVM's GC log.

Run: ``python -m benchmarks steps --problems add1-300 add1-3000 --steps 20 --repeats 5``
(needs the ``bench`` extra: pslpython 2.4.1); ``--backends tensorflow jax torch`` runs pslbridge's step on each Keras
backend (interleaved, each in its own process) and writes each one's step over its own limit (that backend's
network step alone + ``learn_step`` alone, measured in the same process) to ``steps-backends.md``. Writes
``steps-runs.csv``, ``steps.csv``, ``steps.md``, ``steps-backends.csv`` and ``steps-backends.md``.

Example:
    >>> main(["--steps", "-1"])
    Traceback (most recent call last):
    ...
    SystemExit: 2
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from experiments.arguments import positive_int
from experiments.reporting import append_csv

from .processes import gc_log_flag, gc_peak_heap_mb, run_tracked

__all__ = ["main", "run", "run_worker"]

_RUN_FIELDS = [
    "problem",
    "contender",
    "repeat",
    "steps",
    "step_s",
    "mean_step_s",
    "server_s",
    "psl_s",
    "epoch_s",
    "loop_s",
    "build_s",
    "total_s",
    "peak_rss_mb",
    "peak_heap_mb",
    "network_alone_s",
    "psl_alone_s",
    "limit_s",
    "trainer_step_s",
]


def run_worker(request: dict[str, Any], timeout: float = 3600.0, backend: str | None = None) -> dict[str, Any]:
    """Run a :mod:`~benchmarks.worker` task in a fresh process (on Keras ``backend``); add its peak RSS and heap.

    Raises:
        RuntimeError: The worker failed (its stderr tail is in the message).
    """
    with tempfile.TemporaryDirectory(prefix="pslbridge-worker-") as tmp:
        gc_log = Path(tmp) / "gc.log"
        env = dict(os.environ)
        env["PSLBRIDGE_JVM_ARGS"] = (env.get("PSLBRIDGE_JVM_ARGS", "") + " " + gc_log_flag(gc_log)).strip()
        env["TF_CPP_MIN_LOG_LEVEL"] = "3"
        if backend:
            env["KERAS_BACKEND"] = backend
        run = run_tracked([sys.executable, "-m", "benchmarks.worker", json.dumps(request)], env=env, timeout=timeout)
        heap = gc_peak_heap_mb(gc_log)
    lines = [line for line in run.stdout.splitlines() if line.startswith("{")]
    if run.returncode != 0 or not lines:
        raise RuntimeError(f"benchmark worker {request} failed (exit {run.returncode}):\n{run.stderr[-4000:]}")
    return {**json.loads(lines[-1]), "total_s": run.wall_s, "peak_rss_mb": run.peak_rss_mb, "peak_heap_mb": heap}


def _median(rows: list[dict[str, Any]], key: str) -> float:
    values = [float(r[key]) for r in rows if r.get(key) is not None]
    return statistics.median(values) if values else float("nan")


#: Official variants: name -> (log level, deep-model style).
VARIANTS = {
    "official": ("INFO", "paper"),
    "official-compiled": ("INFO", "compiled"),
    "official-TRACE": ("TRACE", "paper"),
}


def run(
    problem: str,
    steps: int,
    repeats: int,
    out: Path,
    trace: bool = False,
    compiled: bool = False,
    backends: tuple[str, ...] = ("tensorflow",),
) -> list[dict[str, Any]]:
    """Interleave the contenders ``repeats`` times on ``problem``; append runs and medians to the CSVs.

    Args:
        problem: A :func:`~benchmarks.problems.load_problem` name.
        steps: PSL's ``gradientdescent.numsteps`` (both loops run ``steps + 2`` steps).
        repeats: Interleaved repetitions.
        out: Output folder.
        trace: Also run the official loop at PSL's TRACE log level (the paper configs' setting).
        compiled: Also run the official loop with a graph-compiled deep model.
        backends: Keras backends pslbridge runs on (interleaved too); TensorFlow's rows are ``pslbridge``, the
            others ``pslbridge-<backend>``, and each gets a row of ``steps-backends.md``.

    Returns:
        The summary rows (one per official variant), each with pslbridge's numbers and the ratio
        official / pslbridge.
    """
    from .official import run_official
    from .problems import load_problem

    spec_problem = load_problem(problem)
    ours_names = {b: "pslbridge" if b == "tensorflow" else f"pslbridge-{b}" for b in backends}
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in [*VARIANTS, "pslbridge", *ours_names.values()]}
    chosen = ["official"] + (["official-compiled"] if compiled else []) + (["official-TRACE"] if trace else [])
    for repeat in range(repeats):
        for name in chosen:
            level, style = VARIANTS[name]
            result = run_official(spec_problem, steps=steps, log_level=level, style=style)
            result["epoch_s"] = result["step_s"]  # full batch: one gradient step (one prediction) per epoch
            result.pop("log")
            runs[name].append({"problem": problem, "contender": name, "repeat": repeat, **result})
        for backend, name in ours_names.items():
            ours = run_worker({"task": "steps", "problem": problem, "steps": steps + 2}, backend=backend)
            runs[name].append({"problem": problem, "contender": name, "repeat": repeat, **ours})
        for name in runs:
            if runs[name] and runs[name][-1]["repeat"] == repeat:
                append_csv(out / "steps-runs.csv", runs[name][-1], _RUN_FIELDS)
                print(json.dumps({k: _round(v) for k, v in runs[name][-1].items()}), flush=True)
    summary = []
    for name in VARIANTS:
        if not runs[name] or not runs["pslbridge"]:
            continue
        row = {"problem": problem, "official": name, "steps": steps + 2, "repeats": repeats}
        for side, rows in (("official", runs[name]), ("pslbridge", runs["pslbridge"])):
            for key in ("step_s", "mean_step_s", "epoch_s", "build_s", "total_s", "peak_rss_mb", "peak_heap_mb"):
                row[f"{side}_{key}"] = _median(rows, key)
        row["official_server_s"] = _median(runs[name], "server_s")
        row["pslbridge_psl_s"] = _median(runs["pslbridge"], "psl_s")
        row["ratio"] = row["official_step_s"] / row["pslbridge_step_s"]
        for key in ("network_alone_s", "psl_alone_s", "limit_s", "trainer_step_s"):
            row[key] = _median(runs["pslbridge"], key)
        # Each run's step over its own limit (measured in the same process), then the median.
        row["step_over_limit"] = statistics.median(r["step_s"] / r["limit_s"] for r in runs["pslbridge"])
        append_csv(out / "steps.csv", row, list(row))
        summary.append(row)
    for backend, name in ours_names.items():
        mine = runs[name]
        row = {"problem": problem, "backend": backend, "steps": steps + 2, "repeats": repeats}
        for key in ("step_s", "network_alone_s", "psl_alone_s", "limit_s", "psl_s"):
            row[key] = _median(mine, key)
        row["step_over_limit"] = statistics.median(r["step_s"] / r["limit_s"] for r in mine)
        row["official_step_s"] = _median(runs["official"], "step_s")
        row["official_over_step"] = row["official_step_s"] / row["step_s"]
        append_csv(out / "steps-backends.csv", row, list(row))
    if runs["pslbridge"]:
        write_table(out)
    write_backend_table(out)
    return summary


def _round(value: Any) -> Any:
    return round(value, 4) if isinstance(value, float) else value


def write_table(out: Path) -> str:
    """Summarise ``steps.csv`` into ``steps.md``."""
    import csv

    with open(out / "steps.csv") as handle:
        rows = list(csv.DictReader(handle))
    lines = [
        "| problem | official run | steps | official s/step | pslbridge s/step | official / pslbridge "
        "| official s/epoch | pslbridge s/epoch | official: in deep-model server s/step "
        "| pslbridge: in learn_step s/step | mean s/step with warm-up (official, pslbridge) "
        "| peak RSS MB (official, pslbridge) | peak heap MB (official, pslbridge) "
        "| limit s/step (network alone + PSL alone) | pslbridge / limit | Trainer route s/step |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    nan = float("nan")
    for r in rows:
        f = {k: float(v) for k, v in r.items() if k not in ("problem", "official") and v not in ("", None)}
        lines.append(
            f"| {r['problem']} | {r['official']} | {int(f['steps'])} | {f['official_step_s']:.3f} | "
            f"{f['pslbridge_step_s']:.3f} | {f['ratio']:.2f}x | {f['official_epoch_s']:.3f} | "
            f"{f['pslbridge_epoch_s']:.3f} | {f.get('official_server_s', float('nan')):.3f} | "
            f"{f.get('pslbridge_psl_s', float('nan')):.3f} | "
            f"{f['official_mean_step_s']:.3f}, {f['pslbridge_mean_step_s']:.3f} | "
            f"{f['official_peak_rss_mb']:.0f}, {f['pslbridge_peak_rss_mb']:.0f} | "
            f"{f['official_peak_heap_mb']:.0f}, {f['pslbridge_peak_heap_mb']:.0f} | "
            f"{f.get('limit_s', nan):.3f} ({f.get('network_alone_s', nan):.3f} + {f.get('psl_alone_s', nan):.3f}) | "
            f"{f.get('step_over_limit', nan):.2f}x | {f.get('trainer_step_s', nan):.3f} |"
        )
    text = "\n".join(lines) + "\n"
    (out / "steps.md").write_text(text)
    return text


def write_backend_table(out: Path) -> str:
    """Summarise ``steps-backends.csv`` into ``steps-backends.md``: each Keras backend's step against its limit.

    Example:
        >>> import tempfile
        >>> out = Path(tempfile.mkdtemp())
        >>> _ = (out / "steps-backends.csv").write_text(
        ...     "problem,backend,steps,repeats,step_s,network_alone_s,psl_alone_s,limit_s,psl_s,step_over_limit,"
        ...     "official_step_s,official_over_step" + chr(10) + "add1-300,jax,22,1,0.3,0.1,0.19,0.29,0.2,1.03,0.9,3.0")
        >>> print(write_backend_table(out).splitlines()[2])
        | add1-300 | jax | 22 | 0.300 | 0.290 (0.100 + 0.190) | 1.03x | 0.900 | 3.00x |
    """
    import csv

    with open(out / "steps-backends.csv") as handle:
        rows = list(csv.DictReader(handle))
    lines = [
        "| problem | Keras backend | steps | pslbridge s/step | limit s/step (network alone + PSL alone) "
        "| step / limit | official s/step (same run) | official / pslbridge |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        f = {k: float(v) for k, v in r.items() if k not in ("problem", "backend") and v not in ("", None)}
        lines.append(
            f"| {r['problem']} | {r['backend']} | {int(f['steps'])} | {f['step_s']:.3f} | {f['limit_s']:.3f} "
            f"({f['network_alone_s']:.3f} + {f['psl_alone_s']:.3f}) | {f['step_over_limit']:.2f}x | "
            f"{f['official_step_s']:.3f} | {f['official_over_step']:.2f}x |"
        )
    text = "\n".join(lines) + "\n"
    (out / "steps-backends.md").write_text(text)
    return text


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks steps")
    parser.add_argument("--problems", nargs="+", default=["add1-300", "add1-3000"])
    parser.add_argument("--steps", type=positive_int, default=20, help="PSL's numsteps (the loop runs numsteps + 2)")
    parser.add_argument("--repeats", type=positive_int, default=5)
    parser.add_argument("--trace", nargs="*", default=[], help="problems that also get the TRACE-level official run")
    parser.add_argument(
        "--compiled", nargs="*", default=[], help="problems that also get the official run with a compiled model"
    )
    parser.add_argument(
        "--backends",
        nargs="+",
        default=["tensorflow"],
        choices=["tensorflow", "jax", "torch"],
        help="Keras backends pslbridge's step runs on (each in its own process)",
    )
    parser.add_argument("--out", type=Path, default=Path("out/bench"))
    args = parser.parse_args(argv)
    for problem in args.problems:
        run(
            problem,
            args.steps,
            args.repeats,
            args.out,
            problem in args.trace,
            problem in args.compiled,
            tuple(args.backends),
        )
    for table in ("steps.md", "steps-backends.md"):
        if (args.out / table).exists():
            print((args.out / table).read_text())
    return 0
