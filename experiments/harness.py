"""The per-split skeleton every runner shares: runs here or on Ray, rows recorded as each finishes, the table's tail.

A runner describes each split as a :class:`~experiments.sweep.Run` (its ``"module:function"`` task with plain
keyword arguments, returning a JSON-serialisable dict) and says how one finished run is recorded. :func:`run_splits`
then runs them one after another in this process (an exception stops the run, with its trace) or, with
:class:`~experiments.sweep.RayOptions`, as Ray tasks in their own processes (a run that raises is reported as a
failed row; finished runs are stored and skipped on a restart). Either way the task is the same function with the
same arguments, so a sequential and a Ray run of one split give the same rows.

Example:
    >>> import tempfile
    >>> out = Path(tempfile.mkdtemp())
    >>> runs = [Run(f"double-{x}", "experiments.sweep:example_run", {"x": x}) for x in (1, 2)]
    >>> seen = []
    >>> results = run_splits(runs, out, None, lambda run, result: seen.append(result["value"]))
    >>> seen, sorted(results)
    ([2, 4], ['double-1', 'double-2'])
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .reporting import failed_runs, wall_time_lines
from .sweep import RayOptions, Run, run_all

__all__ = ["failed_row", "finish_table", "json_plain", "plain", "run_splits"]

Record = Callable[[Run, dict[str, Any]], None]


def run_splits(runs: Sequence[Run], out: Path, ray: RayOptions | None, record: Record) -> dict[str, dict[str, Any]]:
    """Run every split, here in order (``ray`` None) or as Ray tasks; ``record(run, result)`` as each finishes.

    Args:
        runs: One run per split (and setting), keys unique; on Ray they start in this order.
        out: Results folder (Ray stores finished runs under ``out/runs``).
        ray: Where to run: None for this process, one run after another.
        record: Writes one finished run's rows; on Ray a failed run's result is ``{"error": ..., "trace": ...}``.

    Returns:
        ``{key: result}`` of every run (on Ray also those stored by an earlier sweep).

    Example:
        >>> run_splits([Run("one", "experiments.sweep:example_run", {"x": 3})], Path("."), None, print)["one"]["value"]
        Run(key='one', fn='experiments.sweep:example_run', kwargs={'x': 3}, memory_mb=1500) {'value': 6, ...}
        6
    """
    if ray is not None:
        return run_all(runs, out, address=ray.address, workers=ray.workers, on_result=record)
    results = {}
    for run in runs:
        module, _, name = run.fn.partition(":")
        result = getattr(importlib.import_module(module), name)(**run.kwargs)
        record(run, result)
        results[run.key] = result
    return results


def failed_row(identity: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
    """The row standing for a run that raised: what identifies it, then its error.

    Example:
        >>> failed_row({"setting": "add1-300", "split": 2}, {"error": "DataError: no MNIST", "trace": "..."})
        {'setting': 'add1-300', 'split': 2, 'error': 'DataError: no MNIST'}
    """
    return {**identity, "error": result["error"]}


def json_plain(value: Any) -> Any:
    """``json.dumps``' ``default=`` for NumPy values: scalars to numbers, arrays to nested lists.

    Example:
        >>> json.dumps({"acc": np.float32(0.5), "w": np.eye(2)}, default=json_plain)
        '{"acc": 0.5, "w": [[1.0, 0.0], [0.0, 1.0]]}'
    """
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def plain(value: Any) -> Any:
    """``value`` as plain JSON values (what a Ray task returns): NumPy values converted, tuples made lists.

    Example:
        >>> plain([{"acc": np.float64(0.25), "temperatures": (1.0, 2.0)}])
        [{'acc': 0.25, 'temperatures': [1.0, 2.0]}]
    """
    return json.loads(json.dumps(value, default=json_plain))


def finish_table(out: Path, lines: list[str], keys: Sequence[str]) -> str:
    """Close a results table: failed runs (identified by ``keys``) and wall times; write ``results.md``.

    Returns:
        The page's text.

    Example:
        >>> import tempfile
        >>> from experiments.reporting import append_csv
        >>> out = Path(tempfile.mkdtemp())
        >>> append_csv(out / "results.csv", {"split": 1, "error": "DataError: no MNIST"}, ["split", "error"])
        >>> print(finish_table(out, ["# Results", "", "| split | acc |", "|---|---|"], ["split"]))
        # Results
        <BLANKLINE>
        | split | acc |
        |---|---|
        <BLANKLINE>
        ## Failed runs
        <BLANKLINE>
        - split 1: DataError: no MNIST
        <BLANKLINE>
    """
    text = "\n".join([*lines, *failed_runs(out / "results.csv", keys), *wall_time_lines(out / "wall-times.csv")])
    text += "\n"
    (out / "results.md").write_text(text)
    return text
