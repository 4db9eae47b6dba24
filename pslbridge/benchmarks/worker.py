"""pslbridge's side of a benchmark, run in a fresh process (one JVM, one contender, its own memory).

``python -m pslbridge.benchmarks.worker '<json>'`` prints one JSON line. The JSON names a ``task``:

- ``steps``: build the problem's program, then ``Trainer.fit`` for ``steps`` epochs (full batch: one
  learn step per epoch, the paper's regime) with symbolic weight steps of size 1e-14, as the official
  loop is configured; reports build time, median step and epoch times after the first (warm-up) step,
  the mean over all steps, and saves the network to ``save_path`` when given.
- ``build``: start the JVM, then build the problem's program once (load + ground + index).

The parent (``step_time``, ``build_cost``) adds ``-Xlog:gc`` through ``PSLBRIDGE_JVM_ARGS`` and tracks
the process tree's peak RSS.

Example:
    >>> run_task({"task": "build", "problem": "add1-3"})["atoms"]
    320
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import numpy as np

__all__ = ["run_task"]


def _steps(request: dict[str, Any]) -> dict[str, Any]:
    import keras

    from .. import jvm
    from ..bridge import Bridge
    from ..learning import WeightOptimizer
    from ..training import NeuralBinding, Trainer
    from .problems import build_network, load_problem, network_inputs

    seed = int(request.get("seed", 0))
    problem = load_problem(request["problem"], seed)
    jvm.start("benchmark worker")
    t0 = time.perf_counter()
    bridge = Bridge(problem.spec, options=problem.options)
    build = time.perf_counter() - t0
    model = build_network(problem, seed)
    trainer = Trainer(
        bridge,
        [NeuralBinding("Neural", model, network_inputs(problem), keras.optimizers.Adam(problem.learning_rate))],
        weights=WeightOptimizer(step_size=1e-14),
    )
    stamps: list[float] = []

    class EpochTimer(keras.callbacks.Callback):
        def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
            stamps.append(time.perf_counter())

    steps = int(request["steps"])
    start = time.perf_counter()
    history = trainer.fit(steps, verbose=0, callbacks=[EpochTimer()])
    loop = time.perf_counter() - start
    epochs = np.diff([start, *stamps])
    after_warmup = epochs[1:] if len(epochs) > 1 else epochs
    if request.get("save_path"):
        np.savez(request["save_path"], *model.get_weights())
    bridge.close()
    return {
        "build_s": build,
        "loop_s": loop,
        "steps": steps,
        "step_s": float(np.median(history.history["step_time"][1:] or history.history["step_time"])),
        "epoch_s": float(np.median(after_warmup)),
        "mean_step_s": loop / steps,
        "psl_s": float(np.median(history.history["psl_time"][1:] or history.history["psl_time"])),
    }


def _build(request: dict[str, Any]) -> dict[str, Any]:
    from .. import jvm
    from ..bridge import Bridge
    from .build_cost import build_problem

    spec = build_problem(request["problem"])
    t0 = time.perf_counter()
    jvm.start("benchmark worker")
    jvm_s = time.perf_counter() - t0
    t1 = time.perf_counter()
    bridge = Bridge(spec)
    build = time.perf_counter() - t1
    row = {"jvm_s": jvm_s, "build_s": build, "atoms": bridge.atom_count, "terms": bridge.term_count}
    row.update({f"build_{k}_s": v for k, v in bridge.program.timings.items()})
    bridge.close()
    return row


def run_task(request: dict[str, Any]) -> dict[str, Any]:
    """Run one task in this process and return its measurements.

    Raises:
        ValueError: Unknown task.
    """
    task = request.get("task")
    if task == "steps":
        return _steps(request)
    if task == "build":
        return _build(request)
    raise ValueError(f"unknown benchmark task {task!r}: expected 'steps' or 'build'")


if __name__ == "__main__":
    print(json.dumps(run_task(json.loads(sys.argv[1]))), flush=True)
