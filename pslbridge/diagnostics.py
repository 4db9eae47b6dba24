"""Before grounding: how many ground rules each rule will make, estimated from the data alone.

A user whose grounding "hangs" usually has a rule that joins large relations on few variables. This
estimate (System R style: ``|R ⋈ S| ≈ |R|·|S| / max(V(R, a), V(S, a))`` per shared variable, constants
as selections) runs in Python on the :class:`~pslbridge.model_files.ModelSpec`, before any Java work, so
a blow-up is visible before it happens. After grounding, :meth:`pslbridge.Bridge.rules_table` gives the
real counts and :meth:`pslbridge.Bridge.summary` the atoms per predicate and the memory used.

Example:
    >>> from pslbridge.model_files import ModelSpec
    >>> spec = ModelSpec.from_python(rules=["1: Link(A, B) & Cat(A) -> Cat(B) ^2"],
    ...     predicates={"Link": 2, "Cat": 1}, observations={"Link": [("a", "b"), ("b", "c")]},
    ...     targets={"Cat": [("a",), ("b",), ("c",)]})
    >>> int(estimate_groundings(spec)["estimated_groundings"][0])
    2
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from .model_files import ModelSpec

__all__ = ["estimate_groundings"]

_ATOM = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*\(([^()]*)\)")
_SELECT = re.compile(r"\{[^}]*\}")


def _relations(spec: ModelSpec) -> dict[str, np.ndarray]:
    """Rows (argument strings) per predicate: targets of open predicates, observations of closed ones."""
    out = {}
    for pred in spec.predicates.values():
        partition = "observations" if spec.is_closed(pred.name) else "targets"
        tables = [t.args for t in spec.tables(pred.name, partition) if len(t)]
        out[pred.key] = np.concatenate(tables) if tables else np.empty((0, pred.arity), dtype=object)
    return out


def _query_atoms(text: str) -> list[tuple[str, str]]:
    """Atoms PSL joins to ground a rule.

    For a logical rule, the clause's negated literals (positive body atoms and negated head atoms);
    for an arithmetic rule, every atom.
    """
    for arrow, head_first in (("->", False), (">>", False), ("<-", True), ("<<", True)):
        if arrow in text:
            left, right = text.split(arrow, 1)
            body, head = (right, left) if head_first else (left, right)
            picked = []
            for part, keep_negated in ((body, False), (head, True)):
                for match in _ATOM.finditer(part):
                    before = part[: match.start()].rstrip()
                    negated = before.endswith("!") or before.endswith("~")
                    if negated == keep_negated:
                        picked.append((match.group(1), match.group(2)))
            return picked
    return _ATOM.findall(text)


def _distinct(rows: np.ndarray, columns: list[int]) -> int:
    if not columns or len(rows) == 0:
        return 1
    return len({tuple(r) for r in rows[:, columns].tolist()})


def _estimate(rule: str, relations: dict[str, np.ndarray]) -> float:
    """Left-deep join estimate: ``|R ⋈ T| = |R|·|T| / max(V(R, S), V(T, S))`` over the shared variables S.

    ``V(T, S)`` is counted exactly on T's rows; ``V(R, S)`` is bounded by covering S with the relations
    already joined (their exact tuple counts, so correlated columns such as a blocking pair count once).
    """
    text = _SELECT.sub("", rule)
    size: float | None = None
    joined: list[tuple[np.ndarray, dict[str, int]]] = []
    for name, raw_args in _query_atoms(text):
        rows = relations.get(name.upper())
        if rows is None:
            continue
        args = [a.strip() for a in raw_args.split(",")][: rows.shape[1]]
        keep = np.ones(len(rows), dtype=bool)
        variables: dict[str, int] = {}
        for position, arg in enumerate(args):
            if arg.startswith("'") or arg.startswith('"') or arg.lstrip("-").isdigit():
                keep &= rows[:, position].astype(str) == arg.strip("'\"")
            elif arg.lstrip("+"):
                variables.setdefault(arg.lstrip("+"), position)
        selected = rows[keep]
        if size is None:
            size = float(len(selected))
        else:
            shared = [v for v in variables if any(v in cols for _, cols in joined)]
            right = _distinct(selected, [variables[v] for v in shared])
            size = size * len(selected) / max(_cover(shared, joined, size), right, 1.0)
        joined.append((selected, variables))
        for v, p in variables.items():
            if args[p].startswith("+"):  # summed over: one ground rule per value of the other variables
                size /= max(_cover([v], joined, size), 1.0)
    return float(size or 0.0)


def _cover(variables: list[str], joined: list[tuple[np.ndarray, dict[str, int]]], size: float) -> float:
    left, bound = list(variables), 1.0
    while left:
        rows, cols = max(joined, key=lambda item: sum(v in item[1] for v in left))
        covered = [v for v in left if v in cols]
        if not covered:
            break
        bound *= _distinct(rows, [cols[v] for v in covered])
        left = [v for v in left if v not in covered]
    return min(size, bound)


def estimate_groundings(spec: ModelSpec) -> pd.DataFrame:
    """Estimated ground rules per rule, from data sizes and distinct values (no JVM).

    Returns:
        A DataFrame with ``rule`` and ``estimated_groundings``, in model order.
    """
    relations = _relations(spec)
    rows = [{"rule": r.text, "estimated_groundings": _estimate(r.text, relations)} for r in spec.rules]
    return pd.DataFrame(rows)
