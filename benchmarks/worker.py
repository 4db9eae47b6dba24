"""pslbridge's side of a benchmark, run in a fresh process (one JVM, one contender, its own memory).

``python -m benchmarks.worker '<json>'`` prints one JSON line. The JSON names a ``task``:

- ``steps``: build the problem's program, then ``NeuPSLModel.fit`` (Keras) for ``steps`` full-batch steps (the
  paper's regime: one step is one pass over the program, its "epoch"; here one Keras epoch of ``steps``
  batches) with symbolic weight steps of size 1e-14, as the official loop is configured; reports build
  time, the median step (batch hooks) and step-to-step times after the first (warm-up) step,
  the mean over all steps, and saves the network to ``save_path`` when given. Unless ``limit`` is false it
  then measures the step's limit (the network's compiled forward + backward + update alone, and PSL's
  ``learn_step`` alone, medians) and the :class:`~pslbridge.training.Trainer` route's step, which runs the
  network's forward pass twice.
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


def _step_timer() -> Any:
    """A Keras callback timing each training step: ``times`` (batch begin to end) and ``stamps`` (each end)."""
    import keras

    class StepTimer(keras.callbacks.Callback):
        def __init__(self) -> None:
            super().__init__()
            self.times: list[float] = []
            self.stamps: list[float] = []

        def on_train_batch_begin(self, batch: int, logs: dict | None = None) -> None:
            self.times.append(-time.perf_counter())

        def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
            self.times[-1] += time.perf_counter()
            self.stamps.append(time.perf_counter())

    return StepTimer()


def _steps(request: dict[str, Any]) -> dict[str, Any]:
    import keras

    from pslbridge import jvm
    from pslbridge.bridge import Bridge
    from pslbridge.keras import NeuPSLModel, ProgramData
    from pslbridge.learning import WeightOptimizer

    from .problems import build_network, load_problem, network_inputs

    seed = int(request.get("seed", 0))
    problem = load_problem(request["problem"], seed)
    jvm.start("benchmark worker")
    t0 = time.perf_counter()
    bridge = Bridge(problem.spec, options=problem.options)
    build = time.perf_counter() - t0
    network = build_network(problem, seed)
    inputs = network_inputs(problem)
    model = NeuPSLModel({"Neural": network}, weights=WeightOptimizer(step_size=1e-14))
    model.compile(optimizer=keras.optimizers.Adam(problem.learning_rate))
    timer = _step_timer()
    steps = int(request["steps"])
    # One Keras epoch of `steps` full-batch steps (each step is one pass over the one program, the paper's
    # "epoch"): Keras' per-epoch bookkeeping (a new data iterator, callbacks) is paid once, as in a real run.
    start = time.perf_counter()
    model.fit(ProgramData([(bridge, {"Neural": inputs})], passes=steps), epochs=1, verbose=0, callbacks=[timer])
    step_times, stamps = timer.times, timer.stamps
    loop = time.perf_counter() - start
    gaps = np.diff(stamps)  # from one step's end to the next one's: the step and Keras' per-batch bookkeeping
    row = {
        "build_s": build,
        "loop_s": loop,
        "steps": steps,
        "step_s": float(np.median(step_times[1:] or step_times)),
        "epoch_s": float(np.median(gaps)) if len(gaps) else float(step_times[0]),
        "mean_step_s": loop / steps,
        "psl_s": float(np.median(model.psl_times[1:] or model.psl_times)),
    }
    if request.get("save_path"):
        np.savez(request["save_path"], *network.get_weights())
    row["backend"] = keras.backend.backend()
    if request.get("limit", True):
        row.update(_limit(bridge, network, inputs, model.weight_optimizer, max(3, min(steps, 10))))
        if row["backend"] == "tensorflow":  # the Trainer's Keras adapter runs on TensorFlow only
            row["trainer_step_s"] = _trainer_step(
                bridge, network, inputs, problem.learning_rate, max(3, min(steps, 10))
            )
    bridge.close()
    return row


def _limit(bridge: Any, network: Any, inputs: Any, weights: Any, repeats: int) -> dict[str, float]:
    """The step's lower limit on this Keras backend: the network's training step alone, PSL's step alone.

    The network's step is Keras' own ``fit`` step of the same network, compiled as ``NeuPSLModel`` compiles on
    this backend, with a loss whose gradient at the output is a constant (so no PSL runs): forward, backward and
    the optimizer's update, with Keras' per-step bookkeeping.
    """
    import keras

    from pslbridge.psl_op import backend_module

    predictions = keras.ops.convert_to_numpy(network(inputs, training=True))
    upstream = np.full(predictions.shape, 1e-6, dtype=np.float32)

    class Alone(keras.Model):
        def __init__(self) -> None:
            super().__init__()
            self.net = network

        def call(self, x: Any, training: bool = False) -> Any:
            return self.net(x, training=training)

        def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):  # noqa: ANN001
            return keras.ops.sum(y_pred * keras.ops.convert_to_tensor(upstream))

    alone = Alone()
    alone.compile(optimizer=keras.optimizers.Adam(1e-9), jit_compile=backend_module().COMPILES)
    timer = _step_timer()
    batches = np.repeat(inputs[None], repeats + 1, axis=0).reshape(-1, *inputs.shape[1:])
    alone.fit(batches, batch_size=len(inputs), epochs=1, shuffle=False, verbose=0, callbacks=[timer])
    psl = []
    for _ in range(repeats):
        t = time.perf_counter()
        bridge.learn_step({"Neural": predictions}, weights=weights, potentials=True)
        psl.append(time.perf_counter() - t)
    network_s, psl_s = float(np.median(timer.times[1:])), float(np.median(psl))
    return {"network_alone_s": network_s, "psl_alone_s": psl_s, "limit_s": network_s + psl_s}


def _trainer_step(bridge: Any, network: Any, inputs: Any, learning_rate: float, steps: int) -> float:
    """The median step of the :class:`~pslbridge.training.Trainer` route (two forward passes), for comparison."""
    import keras

    from pslbridge.learning import WeightOptimizer
    from pslbridge.training import NeuralBinding, Trainer

    binding = NeuralBinding("Neural", network, inputs, keras.optimizers.Adam(learning_rate))
    trainer = Trainer(bridge, [binding], weights=WeightOptimizer(step_size=1e-14))
    history = trainer.fit(steps + 1, verbose=0)
    return float(np.median(history.history["step_time"][1:]))


def _build(request: dict[str, Any]) -> dict[str, Any]:
    from pslbridge import jvm
    from pslbridge.bridge import Bridge

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
