"""Small helpers shared by the experiment runners: CSV rows in, mean ± std tables out.

Example:
    >>> mean_std([80.0, 82.0])
    '81.00 ± 1.41'
"""

from __future__ import annotations

import csv
import math
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["append_csv", "mean_std", "read_groups"]


def append_csv(path: Path, row: dict[str, Any], fields: Sequence[str]) -> None:
    """Append one row (header on first write); keys not in ``fields`` are left out.

    Example:
        >>> import tempfile; p = Path(tempfile.mkdtemp()) / "r.csv"
        >>> append_csv(p, {"a": 1, "b": 2}, ["a"]); p.read_text().split()
        ['a', '1']
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    new = not path.is_file()
    with open(path, "a", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(fields), extrasaction="ignore")
        if new:
            writer.writeheader()
        writer.writerow(row)


def read_groups(path: Path, keys: Sequence[str]) -> dict[tuple[str, ...], list[dict[str, str]]]:
    """Rows of a results CSV grouped by the values of ``keys``, in sorted key order."""
    with open(path) as handle:
        rows = list(csv.DictReader(handle))
    groups: dict[tuple[str, ...], list[dict[str, str]]] = {}
    for row in rows:
        groups.setdefault(tuple(row[k] for k in keys), []).append(row)
    return dict(sorted(groups.items()))


def mean_std(values: Sequence[float]) -> str:
    """``mean ± std`` (sample std; 0 for one value; ``–`` for none), NaNs ignored."""
    finite = [v for v in values if not math.isnan(v)]
    if not finite:
        return "–"
    std = statistics.stdev(finite) if len(finite) > 1 else 0.0
    return f"{statistics.mean(finite):.2f} ± {std:.2f}"
