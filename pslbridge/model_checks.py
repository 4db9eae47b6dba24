"""A model's meaning before grounding, in Python: rule checks, duplicate atoms, entity-data maps.

Everything here reads a :class:`~pslbridge.model.ModelSpec` and its files and raises
:class:`~pslbridge.errors.ModelFileError` naming the file, line, rule or predicate at fault; nothing touches
Java. :class:`pslbridge.program.GroundProgram` runs these checks before it declares anything in the JVM, so
a bad model leaves no trace there.

Examples:
    >>> from pslbridge.model import ModelSpec
    >>> spec = ModelSpec.from_python(rules=["1: A(X, Y) -> B(X) ^2"], predicates={"A": 1, "B": 1},
    ...                              targets={"B": [("x",)]})
    >>> check_rules(spec)
    Traceback (most recent call last):
    ...
    pslbridge.errors.ModelFileError: predicate A takes 1 argument(s) but the rule gives 2: '1: A(X, Y) -> B(X) ^2'
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .errors import ModelFileError
from .model import DataTable, ModelSpec, PredicateSpec, RuleSpec
from .rule_text import rule_atoms, rule_weight

_FLOAT32_MAX = float(np.finfo(np.float32).max)

__all__ = ["EntityMap", "check_duplicates", "check_rules", "neural_target_table", "read_entity_map"]


def check_rules(spec: ModelSpec) -> None:
    """Every rule names declared predicates with their arity, and no weight is negative.

    Raises:
        ModelFileError: No rules, a negative weight, an unknown predicate or a wrong argument count.

    Examples:
        >>> from pslbridge.model import ModelSpec
        >>> check_rules(ModelSpec.from_python(rules=["-1: A(X) -> A(X)"], predicates={"A": 1}))
        Traceback (most recent call last):
        ...
        pslbridge.errors.ModelFileError: negative weight -1.0 in rule '-1: A(X) -> A(X)': weights must be >= 0 ...
    """
    if not spec.rules:
        raise ModelFileError("the model has no rules", path=spec.source)
    for rule in spec.rules:
        _check_rule(spec, rule)


def _check_rule(spec: ModelSpec, rule: RuleSpec) -> None:
    where = {"path": rule.path, "line": rule.line, "rule": rule.text}
    weight = rule_weight(rule.text)
    if weight is not None and weight < 0:
        raise ModelFileError(
            f"negative weight {weight} in rule {rule.text!r}: weights must be >= 0 (PSL would accept it and lose "
            "convexity)",
            **where,
        )
    if weight is not None and not weight <= _FLOAT32_MAX:
        raise ModelFileError(
            f"weight {weight} in rule {rule.text!r} is beyond float32's range (PSL stores weights as float32: it "
            "would become infinite and every value NaN); scale the rule weights down",
            **where,
        )
    for atom in rule_atoms(rule.text):
        pred = spec.predicates.get(atom.predicate.upper())
        if pred is None:
            known = ", ".join(p.name for p in spec.predicates.values())
            raise ModelFileError(
                f"unknown predicate {atom.predicate!r} in rule {rule.text!r} (the model declares: {known})",
                predicate=atom.predicate,
                **where,
            )
        if atom.arity != pred.arity:
            raise ModelFileError(
                f"predicate {pred.name} takes {pred.arity} argument(s) but the rule gives {atom.arity}: {rule.text!r}",
                predicate=pred.name,
                **where,
            )


def check_duplicates(spec: ModelSpec) -> None:
    """No atom appears twice across observations and targets (truth rows may repeat them).

    Examples:
        >>> from pslbridge.model import ModelSpec
        >>> check_duplicates(ModelSpec.from_python(rules=["1: A(X) -> B(X)"], predicates={"A": 1, "B": 1},
        ...                  observations={"B": [("x", 1.0)]}, targets={"B": [("x",)]}))
        Traceback (most recent call last):
        ...
        pslbridge.errors.ModelFileError: <python targets of B>: atom B(x) appears twice: in targets here ...
    """
    seen: dict[tuple[str, tuple], tuple[DataTable, int]] = {}  # where each atom was first seen, read on error only
    for table in spec.data:
        if table.partition == "truth":
            continue
        key_pred = table.predicate.upper()
        for i, row in enumerate(map(tuple, table.args)):
            key = (key_pred, row)
            first = seen.setdefault(key, (table, i))
            if first[1] != i or first[0] is not table:
                origin, line = table.where(i)
                first_origin, first_line = first[0].where(first[1])
                where = f"{first_origin}" + (f":{first_line}" if first_line else "")
                raise ModelFileError(
                    f"atom {table.predicate}({', '.join(row)}) appears twice: in {table.partition} here and in "
                    f"{first[0].partition} at {where}; each atom may appear once across observations and targets",
                    path=origin,
                    line=line,
                    predicate=table.predicate,
                )


@dataclass
class EntityMap:
    """A neural predicate's entity-data map: entity rows and the features that follow them.

    Attributes:
        entities: One row per entity, columns ``arg0 .. arg{k-1}`` (strings).
        features: float32 (entities, features), or None when the map has no feature columns.

    Examples:
        >>> EntityMap(pd.DataFrame({"arg0": ["a"]}), None).entities.shape
        (1, 1)
    """

    entities: pd.DataFrame
    features: np.ndarray | None


def read_entity_map(pred: PredicateSpec) -> EntityMap | None:
    """Read a neural predicate's ``entity-data-map-path`` (TAB-separated: entity arguments, then features).

    Returns:
        The map, or None when the predicate names none.

    Raises:
        ModelFileError: Missing or empty file, short or ragged rows, non-numeric features (with the line).

    Examples:
        >>> from pslbridge.model import NeuralSpec, PredicateSpec
        >>> read_entity_map(PredicateSpec("Digit", 2, neural=NeuralSpec(10))) is None
        True
    """
    neural = pred.neural
    if neural is None or neural.entity_data_map_path is None:
        return None
    path = neural.entity_data_map_path
    n_ent = pred.arity - 1
    try:
        with open(path, encoding="utf-8") as handle:
            lines = [(i, ln.strip().split("\t")) for i, ln in enumerate(handle, start=1) if ln.strip()]
    except FileNotFoundError:
        raise ModelFileError(
            f"entity-data map of {pred.name} not found: {path}", path=path, predicate=pred.name
        ) from None
    if not lines:
        raise ModelFileError(f"entity-data map of {pred.name} is empty", path=path, predicate=pred.name)
    width = len(lines[0][1])
    for number, parts in lines:
        if len(parts) < n_ent:
            raise ModelFileError(
                f"entity row needs {n_ent} entity argument(s) for {pred.name}",
                path=path,
                line=number,
                predicate=pred.name,
            )
        if len(parts) != width:
            raise ModelFileError(
                f"ragged entity-data map: {len(parts)} columns, the first row has {width}",
                path=path,
                line=number,
                predicate=pred.name,
            )
    entities = pd.DataFrame([p[:n_ent] for _, p in lines], columns=[f"arg{i}" for i in range(n_ent)])
    features = None
    if width > n_ent:
        try:
            features = np.asarray([[float(x) for x in p[n_ent:]] for _, p in lines], dtype=np.float32)
        except ValueError as exc:
            raise ModelFileError(
                f"non-numeric feature in entity-data map of {pred.name}: {exc}", path=path, predicate=pred.name
            ) from None
    return EntityMap(entities, features)


def neural_target_table(spec: ModelSpec, pred: PredicateSpec, entity_map: EntityMap | None) -> DataTable | None:
    """A neural predicate's target atoms when none are given: every entity of its map × every class.

    Returns:
        None when the model lists the predicate's targets itself.

    Raises:
        ModelFileError: Neither targets nor an entity-data map.

    Examples:
        >>> from pslbridge.model import ModelSpec
        >>> spec = ModelSpec.from_python(rules=["1: D(I, X) -> L(I, X)"], predicates={"D": 2, "L": 2},
        ...                              neural={"D": 2}, targets={"L": [("a", "0")]})
        >>> neural_target_table(spec, spec.predicate("D"), EntityMap(pd.DataFrame({"arg0": ["a"]}), None)).args
        array([['a', '0'],
               ['a', '1']], dtype=object)
    """
    if spec.tables(pred.name, "targets"):
        return None
    assert pred.neural is not None
    if entity_map is None:
        raise ModelFileError(
            f"neural predicate {pred.name} has no target atoms and no entity-data-map-path; give its atoms "
            "as targets or name an entity-data map",
            path=spec.source,
            predicate=pred.name,
        )
    k = pred.neural.class_size
    ent = entity_map.entities.to_numpy(dtype=object)
    args = np.empty((len(ent) * k, pred.arity), dtype=object)
    args[:, :-1] = np.repeat(ent, k, axis=0)
    args[:, -1] = np.tile(np.arange(k).astype(str).astype(object), len(ent))
    return DataTable(pred.name, "targets", args, None, f"<entities x classes of {pred.name}>")
