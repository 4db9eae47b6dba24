"""Small helpers shared by the experiment runners: CSV rows in, mean ± std tables out.

Example:
    >>> mean_std([80.0, 82.0])
    '81.00 ± 1.41'
"""

from __future__ import annotations

import csv
import json
import math
import os
import platform
import shlex
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

__all__ = [
    "WholeRun",
    "append_csv",
    "failed_runs",
    "machine_text",
    "mean_std",
    "non_defaults",
    "read_groups",
    "wall_time_lines",
    "write_rows",
]


def append_csv(path: Path, row: dict[str, Any], fields: Sequence[str]) -> None:
    """Append one row (header on first write); keys not in ``fields`` are left out.

    Columns follow the file's header, so rows with different keys stay aligned: a field the header lacks is
    added as a new column (earlier rows left empty there), a header column the row lacks stays empty.

    Example:
        >>> import tempfile; p = Path(tempfile.mkdtemp()) / "r.csv"
        >>> append_csv(p, {"a": 1, "b": 2}, ["a"]); p.read_text().split()
        ['a', '1']
        >>> append_csv(p, {"b": 3}, ["b"]); p.read_text().split()
        ['a,b', '1,', ',3']
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    header: list[str] = []
    rows: list[dict[str, str]] = []
    if path.is_file():
        with open(path, newline="") as handle:
            reader = csv.DictReader(handle)
            header, rows = list(reader.fieldnames or []), list(reader)
    added = [f for f in fields if f not in header]
    with open(path, "w" if added else "a", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=header + added, extrasaction="ignore")
        if added:
            writer.writeheader()
            writer.writerows(rows)
        writer.writerow(row)


def write_rows(path: Path, rows: Sequence[dict[str, Any]], fields: Sequence[str]) -> list[dict[str, Any]]:
    """Print each result row (a JSON line) and append it to the results CSV ``path``; return the rows.

    The printed line keeps 6 significant digits of each float (the CSV keeps every digit). A failed run's row
    carries ``error``, which becomes a column of its own.

    Example:
        >>> import tempfile; p = Path(tempfile.mkdtemp()) / "r.csv"
        >>> _ = write_rows(p, [{"split": 0, "acc": 80.1234567, "l2": 5e-7}], ["split", "acc", "l2"])
        {"split": 0, "acc": 80.1235, "l2": 5e-07}
        >>> _ = write_rows(p, [{"split": 1, "error": "DataError: x"}], ["split", "acc"])
        {"split": 1, "error": "DataError: x"}
        >>> p.read_text().split()
        ['split,acc,l2,error', '0,80.1234567,5e-07,', '1,,,DataError:', 'x']
    """
    for row in rows:
        print(json.dumps({k: (float(f"{v:.6g}") if isinstance(v, float) else v) for k, v in row.items()}), flush=True)
        append_csv(path, row, [*fields, "error"] if "error" in row else fields)
    return list(rows)


def read_groups(path: Path, keys: Sequence[str]) -> dict[tuple[str, ...], list[dict[str, str]]]:
    """Rows of a results CSV grouped by the values of ``keys``, in sorted key order (failed runs left out).

    A key a row lacks (a column added after the file was started) groups as ``""``.

    Example:
        >>> import tempfile; p = Path(tempfile.mkdtemp()) / "r.csv"
        >>> for split, rate in [(0, 0.1), (1, 0.1), (0, 0.2)]:
        ...     append_csv(p, {"split": split, "rate": rate, "acc": 80 + split}, ["split", "rate", "acc"])
        >>> {key: len(rows) for key, rows in read_groups(p, ["rate"]).items()}
        {('0.1',): 2, ('0.2',): 1}
    """
    with open(path) as handle:
        rows = list(csv.DictReader(handle))
    groups: dict[tuple[str, ...], list[dict[str, str]]] = {}
    for row in rows:
        if row.get("error"):
            continue
        groups.setdefault(tuple(row.get(k) or "" for k in keys), []).append(row)
    return dict(sorted(groups.items()))


def non_defaults(row: dict[str, str], defaults: dict[str, Any]) -> str:
    """The fields of a results row whose value differs from ``defaults``, e.g. ``"steps 100, l2 5e-07"``.

    Runners key their tables by every setting field (so rows of other hyper-parameters are never averaged
    together) and name a line's differences with this. Numbers compare as numbers, anything else as text; a
    field the row lacks or leaves empty (a column added after the file was started) is not counted.

    Args:
        row: One row of a results CSV (string values).
        defaults: Default value of each setting field, e.g. ``dataclasses.asdict(Setting())``.

    Returns:
        ``"name value"`` for each differing field, comma-separated; ``"defaults"`` when none differs.

    Example:
        >>> non_defaults({"steps": "100", "l2": "5e-06", "seed": "7"}, {"steps": 50, "l2": 5e-6})
        'steps 100'
        >>> non_defaults({"steps": "50.0", "unique": ""}, {"steps": 50, "unique": None})
        'defaults'
        >>> non_defaults({"grid": "[0.1, 0.5]"}, {"grid": (0.1, 0.5)})
        'defaults'
        >>> non_defaults({"grid": "[0.2]"}, {"grid": (0.1,)})
        'grid [0.2]'
    """
    changed = []
    for name, default in defaults.items():
        value = row.get(name)
        if value in (None, "") or _same(value, default):
            continue
        changed.append(f"{name} {_number_text(value)}")
    return ", ".join(changed) or "defaults"


def _same(value: str, default: Any) -> bool:
    if isinstance(default, (int, float)) and not isinstance(default, bool):
        try:
            return math.isclose(float(value), float(default), rel_tol=1e-12, abs_tol=0.0)
        except ValueError:
            return False
    if isinstance(default, (list, tuple)):  # written to the CSV as a JSON list
        try:
            return json.loads(value) == json.loads(json.dumps(list(default)))
        except ValueError:
            pass
    return value == str(default)


def _number_text(value: str) -> str:
    try:
        return f"{float(value):g}"
    except ValueError:
        return value


def failed_runs(path: Path, keys: Sequence[str]) -> list[str]:
    """Markdown lines listing the failed runs of a results CSV (rows with an ``error``), if any.

    Example:
        >>> import tempfile; p = Path(tempfile.mkdtemp()) / "r.csv"
        >>> append_csv(p, {"split": 0, "acc": 80}, ["split", "acc"])
        >>> failed_runs(p, ["split"])
        []
        >>> append_csv(p, {"split": 1, "error": "ModelFileError: bad"}, ["split", "error"])
        >>> failed_runs(p, ["split"])
        ['', '## Failed runs', '', '- split 1: ModelFileError: bad']
    """
    with open(path) as handle:
        failed = [row for row in csv.DictReader(handle) if row.get("error")]
    if not failed:
        return []
    return ["", "## Failed runs", ""] + [
        "- " + " ".join(f"{k} {row[k]}" for k in keys) + f": {row['error']}" for row in failed
    ]


def mean_std(values: Sequence[float]) -> str:
    """``mean ± std`` (sample std; 0 for one value; ``–`` for none), NaNs ignored."""
    finite = [v for v in values if not math.isnan(v)]
    if not finite:
        return "–"
    std = statistics.stdev(finite) if len(finite) > 1 else 0.0
    return f"{statistics.mean(finite):.2f} ± {std:.2f}"


def machine_text() -> str:
    """The machine in words for a results table: its CPU count and, where the OS says, the CPU model.

    Example:
        >>> machine_text().split()[1]
        'CPUs'
    """
    model = ""
    try:
        with open("/proc/cpuinfo") as handle:
            model = next((line.split(":", 1)[1].strip() for line in handle if line.startswith("model name")), "")
    except OSError:
        pass
    return f"{os.cpu_count() or 1} CPUs ({model or platform.processor() or platform.machine()})"


#: Columns of ``wall-times.csv``: one row per whole invocation of a runner (e.g. ``--reproduce``).
WALL_TIME_FIELDS = ("started", "command", "seed", "splits", "runs", "ran", "workers", "machine", "wall_s")


@dataclass
class WholeRun:
    """One whole invocation of a runner, timed from its creation until :meth:`record` writes its row.

    ``record`` appends the row to ``<out>/wall-times.csv`` (:data:`WALL_TIME_FIELDS`), which the runners' results
    tables show under "Whole runs" (:func:`wall_time_lines`). An invocation that raises records nothing.

    Attributes:
        experiment: The runner (``mnist-add``, ``citation``, ``visual-sudoku``).
        argv: Its command-line arguments (None: ``sys.argv[1:]``); the command column shows them without
            ``--out`` (the results folder itself).
        seed: Base seed of the splits.
        first_split: First split run.
        splits: Splits per setting.
        runs: Runs the invocation covers (settings or data sets × splits).
        workers: Where the runs went, in words (:func:`experiments.sweep.workers_text`).

    Example:
        >>> import tempfile; out = Path(tempfile.mkdtemp())
        >>> whole = WholeRun("citation", ["--datasets", "cora", "--out", str(out)], 7, 0, 5, 5, "one process")
        >>> whole.command
        'citation --datasets cora'
        >>> row = whole.record(out, ran=5)
        >>> row["splits"], row["ran"], row["wall_s"] >= 0, (out / "wall-times.csv").is_file()
        ('0-4', 5, True, True)
    """

    experiment: str
    argv: Sequence[str] | None
    seed: int
    first_split: int
    splits: int
    runs: int
    workers: str
    started: datetime = field(default_factory=lambda: datetime.now(timezone.utc))
    start: float = field(default_factory=time.perf_counter)

    @property
    def command(self) -> str:
        """The command line as run, without the results folder (``--out DIR`` / ``--out=DIR``)."""
        kept, skip = [], False
        for arg in sys.argv[1:] if self.argv is None else self.argv:
            if skip or arg.startswith("--out="):
                skip = False
                continue
            skip = arg == "--out"
            if not skip:
                kept.append(arg)
        return shlex.join([self.experiment, *kept])

    def record(self, out: Path, ran: int) -> dict[str, Any]:
        """Append this invocation's row to ``<out>/wall-times.csv``; ``ran``: runs it ran itself (not stored)."""
        last = self.first_split + self.splits - 1
        row = {
            "started": self.started.strftime("%Y-%m-%d %H:%M"),
            "command": self.command,
            "seed": self.seed,
            "splits": f"{self.first_split}" + (f"-{last}" if last > self.first_split else ""),
            "runs": self.runs,
            "ran": ran,
            "workers": self.workers,
            "machine": machine_text(),
            "wall_s": time.perf_counter() - self.start,
        }
        append_csv(out / "wall-times.csv", row, WALL_TIME_FIELDS)
        return row


def wall_time_lines(path: Path) -> list[str]:
    """Markdown lines for the whole-invocation wall times in ``path`` (``wall-times.csv``), if there is one.

    Each row is one invocation (:class:`WholeRun`), e.g. all of ``make reproduce-mnist-add``: its wall time from
    start to end, with the runs it ran itself (``ran``) out of those it covers (``runs``; the others were found
    stored, so a resumed invocation's time is not the whole reproduction's).

    Example:
        >>> import tempfile; p = Path(tempfile.mkdtemp()) / "wall-times.csv"
        >>> wall_time_lines(p)
        []
        >>> row = {"started": "2026-11-28 10:18", "command": "mnist-add --reproduce", "seed": 7, "splits": 5,
        ...        "runs": 20, "ran": 20, "workers": "Ray, 2 workers", "machine": "2 CPUs (Xeon)", "wall_s": 6600}
        >>> append_csv(p, row, WALL_TIME_FIELDS)
        >>> wall_time_lines(p)[-1]
        '| 2026-11-28 10:18 | mnist-add --reproduce | 7 | 5 | 20 of 20 | Ray, 2 workers | 2 CPUs (Xeon) | 110.0 |'
    """
    if not path.is_file():
        return []
    with open(path, newline="") as handle:
        rows = list(csv.DictReader(handle))
    lines = [
        "",
        "## Whole runs (wall time from start to end)",
        "",
        "| started (UTC) | command | seed | splits | runs it ran | workers | machine | wall min |",
        "|---|---|---:|---:|---:|---|---|---:|",
    ]
    for row in rows:
        lines.append(
            f"| {row['started']} | {row['command']} | {row['seed']} | {row['splits']} | {row['ran']} of "
            f"{row['runs']} | {row['workers']} | {row['machine']} | {float(row['wall_s']) / 60:.1f} |"
        )
    return lines
