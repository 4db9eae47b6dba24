"""Building a model's parts from Python objects, no files (:meth:`pslbridge.ModelSpec.from_python`).

See :func:`read_python`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import ModelFileError
from .parts import (
    PARTITIONS,
    DataTable,
    ModelParts,
    NeuralSpec,
    PredicateSpec,
    RuleSpec,
    add_predicate,
    check_name,
    lookup,
    validate_neural,
)
from .tables import parse_rules_text, table_from_object

log = logging.getLogger(__name__)

__all__ = ["read_python"]


def read_python(
    *,
    rules: Sequence[str] | str,
    predicates: Mapping[str, int | Sequence[str] | PredicateSpec],
    observations: Mapping[str, Any] | None = None,
    targets: Mapping[str, Any] | None = None,
    truth: Mapping[str, Any] | None = None,
    neural: Mapping[str, int | NeuralSpec] | None = None,
    closed: Iterable[str] = (),
    options: Mapping[str, Any] | None = None,
) -> ModelParts:
    """Build a model's parts from Python objects (arguments as :meth:`pslbridge.ModelSpec.from_python`).

    Raises:
        ModelFileError: A rule, declaration or row is malformed.

    Examples:
        >>> parts = read_python(rules=["1: A(X) -> B(X) ^2"], predicates={"A": 1, "B": 1})
        >>> list(parts.predicates)
        ['A', 'B']
    """
    if isinstance(rules, str):
        rule_specs = parse_rules_text(rules, None)
    else:
        rule_specs = [RuleSpec(str(r).strip()) for r in rules if str(r).strip()]
    preds: dict[str, PredicateSpec] = {}
    for name, decl in predicates.items():
        if isinstance(decl, PredicateSpec):
            spec = decl
        elif isinstance(decl, (int, np.integer)) and not isinstance(decl, bool):
            spec = PredicateSpec(check_name(name, "<python>"), int(decl))
        elif isinstance(decl, (str, bytes, Mapping)) or not isinstance(decl, Sequence):
            raise ModelFileError(
                f"predicate {name!r}: declare an arity (an int), a list of argument types or a PredicateSpec, "
                f"got {decl!r}",
                predicate=str(name),
            )
        else:
            types = [str(t) for t in decl]
            spec = PredicateSpec(check_name(name, "<python>"), len(types), types)
        add_predicate(preds, spec, "<python>")
    for name, decl in (neural or {}).items():
        spec = preds.get(name.upper())
        if spec is None:
            raise ModelFileError(f"neural predicate {name!r} is not in `predicates`", predicate=name)
        if not isinstance(decl, (NeuralSpec, int, np.integer)) or isinstance(decl, bool):
            raise ModelFileError(
                f"neural predicate {name!r}: give its class count (an int) or a NeuralSpec, got {decl!r}",
                predicate=name,
            )
        spec.neural = decl if isinstance(decl, NeuralSpec) else NeuralSpec(class_size=int(decl))
        validate_neural(spec, "<python>")
    for name in closed:
        lookup(preds, name, "<python>").closed = True
    data: list[DataTable] = []
    for partition, mapping in zip(PARTITIONS, (observations, targets, truth)):
        for name, rows in (mapping or {}).items():
            spec = lookup(preds, name, "<python>")
            data.append(table_from_object(spec, partition, rows))
    return ModelParts(rule_specs, preds, data, {k: str(v) for k, v in (options or {}).items()}, "infer", "<python>")
