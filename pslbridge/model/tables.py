r"""Rule text and data rows into :class:`~pslbridge.model.parts.RuleSpec` and :class:`~pslbridge.model.parts.DataTable`.

Rule files (``.psl``), tab-separated data files, and Python rows (lists of tuples, numpy arrays, DataFrames).

Examples:
    >>> [r.text for r in parse_rules_text("1: A(X) -> B(X) ^2\nA(X) = 1 .", None)]
    ['1: A(X) -> B(X) ^2', 'A(X) = 1 .']
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..errors import ModelFileError
from .parts import DataTable, PredicateSpec, RuleSpec, read_text

log = logging.getLogger(__name__)

__all__ = ["parse_rules_text", "read_data_file", "read_rules_file"]


def parse_rules_text(text: str, path: str | None) -> list[RuleSpec]:
    r"""Split rule-file text into rules, one per line (PSL's convention).

    ``#`` and ``//`` comment lines and blank lines are skipped.

    Examples:
        >>> [r.text for r in parse_rules_text("# c\n1: A(X) -> B(X) ^2\n\nA(X) = 1 .", None)]
        ['1: A(X) -> B(X) ^2', 'A(X) = 1 .']
    """
    rules = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#") or line.startswith("//"):
            continue
        rules.append(RuleSpec(line, path, number))
    return rules


def read_rules_file(path: str | Path) -> list[RuleSpec]:
    """Read a ``.psl`` rule file (one rule per line, ``#``/``//`` comments).

    Raises:
        ModelFileError: The file cannot be read or holds no rule.

    Examples:
        >>> read_rules_file("pslbridge/examples/simple-acquaintances/simple-acquaintances.psl")[0].line
        3
    """
    path = Path(path)
    rules = parse_rules_text(read_text(path), str(path))
    if not rules:
        raise ModelFileError("no rules found in rule file", path=path)
    return rules


def read_data_file(path: str | Path, spec: PredicateSpec, partition: str, shown_path: str | None = None) -> DataTable:
    """Read a TAB-separated data file as PSL does.

    Blank lines are skipped, lines are trimmed, and a trailing truth-value column is optional.

    Args:
        path: The file.
        spec: The predicate the rows belong to.
        partition: Target partition.
        shown_path: The path as the user wrote it (for messages).

    Returns:
        The rows.

    Raises:
        ModelFileError: Missing file, wrong column count, bad truth value (with line).

    Examples:
        >>> path = "pslbridge/examples/simple-acquaintances/data/lived_obs.txt"
        >>> table = read_data_file(path, PredicateSpec("Lived", 2), "observations")
        >>> table.args[0].tolist(), int(table.lines[0])
        (['alice', 'lima'], 1)
    """
    path = Path(path)
    label = shown_path or str(path)
    if not path.is_file():
        where = "" if shown_path is None or shown_path == str(path) else f" (written as {shown_path!r})"
        raise ModelFileError(
            f"data file not found for predicate {spec.name} ({partition}): {path}{where}",
            path=label,
            predicate=spec.name,
        )
    text = read_text(path)
    rows: list[list[str]] = []
    lines: list[int] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        rows.append(line.split("\t"))
        lines.append(number)
    if not rows:
        log.warning("%s: data file for %s (%s) is empty; it contributes no rows", label, spec.name, partition)
        return DataTable(
            spec.name, partition, np.empty((0, spec.arity), dtype=object), None, label, np.empty(0, dtype=np.int64)
        )
    return rows_to_table(spec, partition, rows, label, np.asarray(lines, dtype=np.int64))


def rows_to_table(
    spec: PredicateSpec, partition: str, rows: list[list[str]], origin: str, lines: np.ndarray | None
) -> DataTable:
    arity = spec.arity
    widths = np.fromiter((len(r) for r in rows), dtype=np.int64, count=len(rows))
    has_truth = widths[0] == arity + 1
    expected = arity + 1 if has_truth else arity
    bad = np.flatnonzero(widths != expected)
    if widths[0] not in (arity, arity + 1) or bad.size:
        row = 0 if widths[0] not in (arity, arity + 1) else int(bad[0])
        raise ModelFileError(
            f"expected {arity} TAB-separated columns for {spec.name}/{arity} (or {arity + 1} with a truth value)"
            + (f" like the first row ({expected})" if row else "")
            + f", got {widths[row]}: {rows[row]!r}",
            path=origin,
            line=None if lines is None else int(lines[row]),
            predicate=spec.name,
        )
    args = np.empty((len(rows), arity), dtype=object)
    for i, r in enumerate(rows):
        args[i, :] = r[:arity]
    values = None
    if has_truth:
        raw_values = [r[arity] for r in rows]
        values = _parse_truth(raw_values, spec, origin, lines)
    table = DataTable(spec.name, partition, args, values, origin, lines)
    _check_args(table, spec)
    return table


def _parse_truth(raw: Sequence[Any], spec: PredicateSpec, origin: str, lines: np.ndarray | None) -> np.ndarray:
    values = np.empty(len(raw), dtype=np.float64)
    for i, item in enumerate(raw):
        try:
            value = float(item)
        except (TypeError, ValueError):
            raise ModelFileError(
                f"truth value {item!r} of {spec.name} is not a number",
                path=origin,
                line=None if lines is None else int(lines[i]),
                predicate=spec.name,
            ) from None
        if not (0.0 <= value <= 1.0) or math.isnan(value):
            raise ModelFileError(
                f"truth value {value} of {spec.name} is outside [0, 1]",
                path=origin,
                line=None if lines is None else int(lines[i]),
                predicate=spec.name,
            )
        values[i] = value
    return values


def _check_args(table: DataTable, spec: PredicateSpec) -> None:
    for col, ctype in enumerate(spec.types):
        column = table.args[:, col]
        if ctype in ("UniqueIntID", "Integer", "Long"):
            for i, value in enumerate(column):
                try:
                    int(str(value))
                except ValueError:
                    origin, line = table.where(i)
                    raise ModelFileError(
                        f"argument {col + 1} of {spec.name} must be an integer ({ctype}), got {value!r}",
                        path=origin,
                        line=line,
                        predicate=spec.name,
                    ) from None
        for i, value in enumerate(column):
            if value is None or str(value) == "":
                origin, line = table.where(i)
                raise ModelFileError(
                    f"argument {col + 1} of {spec.name} is empty", path=origin, line=line, predicate=spec.name
                )


def table_from_object(spec: PredicateSpec, partition: str, rows: Any) -> DataTable:
    origin = f"<python {partition} of {spec.name}>"
    if isinstance(rows, DataTable):
        return rows
    if isinstance(rows, pd.DataFrame):
        frame = rows
        if frame.shape[1] not in (spec.arity, spec.arity + 1):
            raise ModelFileError(
                f"DataFrame for {spec.name} ({partition}) has {frame.shape[1]} columns; expected {spec.arity} "
                f"arguments or {spec.arity + 1} with a truth column",
                path=origin,
                predicate=spec.name,
            )
        args = frame.iloc[:, : spec.arity].astype(str).to_numpy(dtype=object)
        values = None
        if frame.shape[1] == spec.arity + 1:
            values = _parse_truth(frame.iloc[:, spec.arity].tolist(), spec, origin, None)
        table = DataTable(spec.name, partition, args, values, origin)
        _check_args(table, spec)
        return table
    if isinstance(rows, np.ndarray):
        if rows.ndim != 2:
            raise ModelFileError(
                f"array for {spec.name} ({partition}) must be 2-D, got shape {rows.shape}",
                path=origin,
                predicate=spec.name,
            )
        rows = rows.tolist()
    if isinstance(rows, (str, bytes, Path, Mapping)) or not isinstance(rows, Iterable):
        kind = "a mapping" if isinstance(rows, Mapping) else type(rows).__name__
        hint = (
            " (a file is read by a runtime config or .data file, not by from_python)"
            if isinstance(rows, (str, Path))
            else ""
        )
        raise ModelFileError(
            f"rows for {spec.name} ({partition}) must be a list of tuples, a 2-D array or a DataFrame, "
            f"got {kind}{hint}",
            path=origin,
            predicate=spec.name,
        )
    listed = []
    for i, r in enumerate(rows):
        if isinstance(r, (str, bytes)) or not isinstance(r, (list, tuple)):
            r = [r]
        for v in r[: spec.arity]:  # the arguments; a truth value is checked with the others below
            if v is None or (isinstance(v, (float, np.floating)) and np.isnan(v)):
                raise ModelFileError(
                    f"row {i} of {spec.name} ({partition}) has a missing value ({v!r}): {tuple(r)!r}",
                    path=origin,
                    predicate=spec.name,
                )
        listed.append([str(v) for v in r])
    if not listed:
        return DataTable(spec.name, partition, np.empty((0, spec.arity), dtype=object), None, origin)
    return rows_to_table(spec, partition, listed, origin, None)
