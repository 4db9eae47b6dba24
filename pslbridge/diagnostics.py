"""Diagnostics before and after grounding.

Before: how many ground rules each rule will make, estimated from the data alone. A user whose grounding
"hangs" usually has a rule that joins large relations on few variables. This estimate (System R style:
``|R ⋈ S| ≈ |R|·|S| / max(V(R, a), V(S, a))`` per shared variable, constants as selections) runs in Python
on the :class:`~pslbridge.model.ModelSpec`, before any Java work, so a blow-up is visible before it
happens. After: :func:`rules_table` gives the real counts, Φ and violations per rule, :func:`summary` the
atoms per predicate and the memory used, :func:`explain` the terms that pull one atom's value.

Examples:
    >>> from pslbridge.model import ModelSpec
    >>> spec = ModelSpec.from_python(rules=["1: Link(A, B) & Cat(A) -> Cat(B) ^2"],
    ...     predicates={"Link": 2, "Cat": 1}, observations={"Link": [("a", "b"), ("b", "c")]},
    ...     targets={"Cat": [("a",), ("b",), ("c",)]})
    >>> int(estimate_groundings(spec)["estimated_groundings"][0])
    2
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pandas as pd

from . import jvm
from .errors import PslBridgeWarning
from .model import ModelSpec
from .program import GroundProgram
from .rule_text import AtomRef, rule_atoms

__all__ = ["estimate_groundings", "explain", "rules_table", "summary"]


def _relations(spec: ModelSpec) -> dict[str, np.ndarray]:
    """Rows (argument strings) per predicate: targets of open predicates, observations of closed ones."""
    out = {}
    for pred in spec.predicates.values():
        partition = "observations" if spec.is_closed(pred.name) else "targets"
        tables = [t.args for t in spec.tables(pred.name, partition) if len(t)]
        out[pred.key] = np.concatenate(tables) if tables else np.empty((0, pred.arity), dtype=object)
    return out


def _query_atoms(text: str) -> list[AtomRef]:
    """Atoms PSL joins to ground a rule (selections left out).

    For a logical rule, the clause's negated literals (positive body atoms and negated head atoms);
    for an arithmetic rule, every atom.
    """
    atoms = [a for a in rule_atoms(text) if not a.in_selection]
    if any(a.side != "arithmetic" for a in atoms):
        return [a for a in atoms if a.negated == (a.side == "head")]
    return atoms


def _distinct(rows: np.ndarray, columns: list[int], cache: dict[tuple[int, tuple[int, ...]], int] | None = None) -> int:
    """Distinct value tuples of ``rows`` in ``columns`` (each column factorised to integer codes, then counted)."""
    if not columns or len(rows) == 0:
        return 1
    key = (id(rows), tuple(columns))
    if cache is not None and key in cache:
        return cache[key]
    codes = np.zeros(len(rows), dtype=np.int64)
    for column in columns:
        values, uniques = pd.factorize(rows[:, column])
        codes = codes * (len(uniques) + 1) + values
        codes = pd.factorize(codes)[0].astype(np.int64)  # keep the combined key small
    count = int(codes.max()) + 1
    if cache is not None:
        cache[key] = count
    return count


def _estimate(rule: str, relations: dict[str, np.ndarray]) -> float:
    """Left-deep join estimate: ``|R ⋈ T| = |R|·|T| / max(V(R, S), V(T, S))`` over the shared variables S.

    ``V(T, S)`` is counted exactly on T's rows; ``V(R, S)`` is bounded by covering S with the relations
    already joined (their exact tuple counts, so correlated columns such as a blocking pair count once).
    """
    size: float | None = None
    joined: list[tuple[np.ndarray, dict[str, int]]] = []
    cache: dict[tuple[int, tuple[int, ...]], int] = {}
    for atom in _query_atoms(rule):
        rows = relations.get(atom.predicate.upper())
        if rows is None:
            continue
        args = list(atom.args)[: rows.shape[1]]
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
            right = _distinct(selected, [variables[v] for v in shared], cache)
            size = size * len(selected) / max(_cover(shared, joined, size, cache), right, 1.0)
        joined.append((selected, variables))
        for v, p in variables.items():
            if args[p].startswith("+"):  # summed over: one ground rule per value of the other variables
                size /= max(_cover([v], joined, size, cache), 1.0)
    return float(size or 0.0)


def _cover(
    variables: list[str],
    joined: list[tuple[np.ndarray, dict[str, int]]],
    size: float,
    cache: dict[tuple[int, tuple[int, ...]], int],
) -> float:
    left, bound = list(variables), 1.0
    while left:
        rows, cols = max(joined, key=lambda item: sum(v in item[1] for v in left))
        covered = [v for v in left if v in cols]
        if not covered:
            break
        bound *= _distinct(rows, [cols[v] for v in covered], cache)
        left = [v for v in left if v not in covered]
    return min(size, bound)


def estimate_groundings(spec: ModelSpec) -> pd.DataFrame:
    """Estimated ground rules per rule, from data sizes and distinct values (no JVM).

    Returns:
        A DataFrame with ``rule`` and ``estimated_groundings``, in model order.

    Examples:
        >>> table = estimate_groundings(bridge.spec)
        >>> len(table) == len(bridge.spec.rules), list(table.columns)
        (True, ['rule', 'estimated_groundings'])
    """
    relations = _relations(spec)
    rows = [{"rule": r.text, "estimated_groundings": _estimate(r.text, relations)} for r in spec.rules]
    return pd.DataFrame(rows)


def rules_table(program: GroundProgram) -> pd.DataFrame:
    """Each rule with its weight, ground-term count, Φ and violated constraints at the current state.

    Examples:
        >>> import pslbridge
        >>> with pslbridge.Bridge("pslbridge/examples/simple-acquaintances/simple-acquaintances.json") as bridge:
        ...     _ = bridge.infer()
        ...     table = rules_table(bridge.program)
        ...     int(table.weighted.sum()), int(table.ground_terms.sum()) == bridge.term_count, int(table.violated.sum())
        (5, True, 0)
    """
    with program.lock:
        potentials = np.zeros(len(program.rules))
        potentials[program.weighted_rules] = program.rule_potentials()
        violated = program.rule_violations()
        counts = program.terms.per_rule()
    weights = dict(zip(program.weighted_rules, program.rule_weights))
    rows = [
        {
            "rule": rule.text,
            "weighted": rule.weighted,
            "weight": float(weights.get(i, float("inf"))),
            "ground_terms": int(counts[i]),
            "potential": float(potentials[i]),
            "violated": int(violated[i]),
        }
        for i, rule in enumerate(program.rules)
    ]
    return pd.DataFrame(rows)


def summary(program: GroundProgram) -> dict[str, Any]:
    """Sizes after grounding: atoms per predicate, terms, build timings, Java heap in use.

    Examples:
        >>> import pslbridge
        >>> with pslbridge.Bridge("pslbridge/examples/simple-acquaintances/simple-acquaintances.json") as bridge:
        ...     summary(bridge.program)["atoms_per_predicate"]
        {'KNOWS': 56, 'LIKES': 21, 'LIVED': 12}
    """
    return {
        "atoms": program.atom_count,
        "random_variable_atoms": program.rv_count,
        "terms": program.term_count,
        "atoms_per_predicate": program.atoms.counts(),
        "build_seconds": dict(program.timings),
        "java_heap_used_mb": jvm.heap_used_bytes() / 2**20,
    }


def explain(program: GroundProgram, predicate: str, *args: Any) -> pd.DataFrame:
    """The ground terms touching one atom, their incompatibility and the pull they exert on it.

    ``pull`` is ``-∂(weighted potential)/∂atom`` at the current values: positive terms push the atom's value up,
    negative ones down; the MAP value balances them (within [0, 1] and the hard constraints).

    Raises:
        KeyError: No such atom in the program.

    Warns:
        PslBridgeWarning: The atom is observed (no term moves it; the frame is empty).

    Examples:
        >>> import pslbridge
        >>> with pslbridge.Bridge("pslbridge/examples/simple-acquaintances/simple-acquaintances.json") as bridge:
        ...     _ = bridge.infer()
        ...     why = explain(bridge.program, "Knows", "alice", "bob")
        ...     why.attrs["atom"], list(why.columns[:3])
        ("KNOWS('alice', 'bob')", ['rule', 'term', 'type'])
    """
    index = program.atoms.index_of(predicate, tuple(args))
    if index < 0:
        raise KeyError(f"{predicate}{tuple(map(str, args))} is not an atom of this program")
    if index >= program.rv_count:
        warnings.warn(
            f"{program.atoms.name(index)} is observed (value {float(program.atom_values()[index]):.4g}): PSL folds "
            "observations into its terms as constants, so no term moves it and none is listed",
            PslBridgeWarning,
            stacklevel=3,
        )
    with program.lock:
        terms = program.terms.of_atom(program.atom_values(), index, program.atoms.name)
        value = float(program.atom_values()[index])
    weights = dict(zip(program.weighted_rules, program.rule_weights))
    rows = []
    for row in terms.itertuples(index=False):
        weight = float(weights.get(row.rule_index, float("inf")))
        rows.append(
            {
                "rule": program.rules[row.rule_index].text if 0 <= row.rule_index < len(program.rules) else "?",
                "term": row.term,
                "type": _term_type(row),
                "weight": weight,
                "incompatibility": row.incompatibility,
                "pull": 0.0 if row.constraint else -weight * _partial(row),
                "violated": bool(row.violated),
            }
        )
    frame = pd.DataFrame(rows, columns=["rule", "term", "type", "weight", "incompatibility", "pull", "violated"])
    frame.attrs["atom"] = program.atoms.name(index)
    frame.attrs["value"] = value
    return frame.sort_values("pull", key=abs, ascending=False, ignore_index=True)


def _term_type(row: Any) -> str:
    if row.constraint:
        return "LinearConstraintTerm"
    kind = "Hinge" if row.hinge else "Linear"
    return f"{'Squared' if row.squared else ''}{kind}LossTerm"


def _partial(row: Any) -> float:
    """∂(incompatibility)/∂atom of a weighted term at its inner value (PSL's computeVariablePartial / weight)."""
    if row.hinge and row.inner <= 0.0:
        return 0.0
    return 2.0 * row.inner * row.coefficient if row.squared else row.coefficient
