"""The pieces of a model description: rules, predicates, neural and evaluation declarations, data tables.

Every reader builds these; :class:`~pslbridge.model.spec.ModelSpec` holds them. Nothing here touches Java.

Examples:
    >>> PredicateSpec("Friend", 2).types
    ['UniqueStringID', 'UniqueStringID']
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from ..errors import ModelFileError

log = logging.getLogger(__name__)

__all__ = [
    "PARTITIONS",
    "PHASES",
    "DataTable",
    "EvaluationSpec",
    "ModelParts",
    "NeuralSpec",
    "PredicateSpec",
    "RuleSpec",
]

PARTITIONS = ("observations", "targets", "truth")
PHASES = ("learn", "infer")
SPLITS = ("all", "learn", "validation", "infer")
_CONSTANT_TYPES = ("UniqueStringID", "UniqueIntID", "String", "Integer", "Long", "Double")
_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
PREDICATE_KEYS = {
    "name",
    "type",
    "arity",
    "types",
    "force-open",
    "observations",
    "targets",
    "truth",
    "function",
    "evaluations",
    "options",
}
CONFIG_KEYS = {"rules", "predicates", "options", "learn", "validation", "infer"}
#: PSL's predicate classes, as a runtime config names them (short, or qualified by PSL's package).
_PREDICATE_PACKAGE = ".psl.model.predicate."


def predicate_type(ptype: Any) -> str | None:
    """``"DeepPredicate"``/``"StandardPredicate"`` for a config's ``type`` (None when it is neither)."""
    text = str(ptype)
    for name in ("DeepPredicate", "StandardPredicate"):
        if text == name or (text.endswith(_PREDICATE_PACKAGE + name) and text.startswith("org.")):
            return name
    return None


@dataclass(frozen=True)
class RuleSpec:
    """One rule's text and where it came from.

    Examples:
        >>> RuleSpec("1: A(X) -> B(X)", path="m.psl", line=2).where()
        'm.psl:2'
    """

    text: str
    path: str | None = None
    line: int | None = None

    def where(self) -> str:
        """Return ``path:line`` (or ``<python>``)."""
        if self.path is None:
            return "<python>"
        return f"{self.path}:{self.line}" if self.line else self.path


@dataclass
class NeuralSpec:
    """A neural (deep) predicate: last argument is the class, leading ones the entity.

    Attributes:
        class_size: Number of classes (the width of the prediction array).
        entity_argument_indexes: Indexes of the entity arguments (NeuPSL convention).
        entity_data_map_path: Optional TSV of entity arguments followed by features.
        options: Every option given (NeuPSL keys such as ``model-path`` included).

    Examples:
        >>> NeuralSpec(class_size=10).class_size
        10
    """

    class_size: int
    entity_argument_indexes: list[int] = field(default_factory=lambda: [0])
    entity_data_map_path: str | None = None
    options: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class EvaluationSpec:
    """One evaluation of a predicate's inferred values against its truth (a PSL ``Evaluator``).

    Attributes:
        evaluator: The evaluator, as the config names it (``CategoricalEvaluator`` or a qualified class name).
        options: Options applied while the evaluator is built (e.g. ``categoricalevaluator.defaultpredicate``).
        primary: The evaluation PSL's learners would select on.

    Examples:
        >>> EvaluationSpec("DiscreteEvaluator").primary
        False
    """

    evaluator: str
    options: tuple[tuple[str, str], ...] = ()
    primary: bool = False


@dataclass
class PredicateSpec:
    """A predicate declaration.

    Attributes:
        name: Name as written (PSL matches names case-insensitively).
        arity: Number of arguments.
        types: PSL constant type per argument (``UniqueStringID`` or ``UniqueIntID``...).
        closed: Explicitly closed (True) / open (False), or None to infer from targets.
        neural: Set for neural predicates.
        options: Predicate options passed to PSL.
        function: For an external functional predicate: the implementation the file names (a Java class in
            PSL); pslbridge computes it with a Python callable (``Bridge(..., functions={name: fn})``).
        evaluations: Evaluations of this predicate declared in the model (run by :meth:`pslbridge.Bridge.evaluate`).

    Examples:
        >>> PredicateSpec("Knows", 2).types
        ['UniqueStringID', 'UniqueStringID']
    """

    name: str
    arity: int
    types: list[str] = field(default_factory=list)
    closed: bool | None = None
    neural: NeuralSpec | None = None
    options: dict[str, str] = field(default_factory=dict)
    function: str | None = None
    evaluations: list[EvaluationSpec] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.types:
            self.types = ["UniqueStringID"] * self.arity

    @property
    def key(self) -> str:
        """Case-insensitive identity, as PSL uses."""
        return self.name.upper()


@dataclass
class DataTable:
    """Rows of one predicate in one partition.

    Attributes:
        predicate: Predicate name.
        partition: ``observations``, ``targets`` or ``truth``.
        args: Object array of shape (n, arity) of argument strings.
        values: Truth values (float64, NaN where none was given) or None.
        origin: The file path, or a description for in-memory data.
        lines: The 1-based source line of each row (files only).

    Examples:
        >>> t = DataTable("Knows", "targets", np.array([["a", "b"]], dtype=object), None, "<python>")
        >>> len(t)
        1
    """

    predicate: str
    partition: str
    args: np.ndarray
    values: np.ndarray | None
    origin: str
    lines: np.ndarray | None = None

    def __len__(self) -> int:
        return int(self.args.shape[0])

    def where(self, row: int) -> tuple[str, int | None]:
        """Return (origin, line) for a row index."""
        if self.lines is not None:
            return self.origin, int(self.lines[row])
        return self.origin, None


def check_phase(phase: str) -> None:
    if phase not in PHASES:
        raise ModelFileError(f"phase must be one of {PHASES}, got {phase!r}")


def check_name(name: str, origin: str) -> str:
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise ModelFileError(
            f"invalid predicate name {name!r}: use letters, digits and '_'", path=origin, predicate=str(name)
        )
    return name


def read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8-sig")  # a byte-order mark (Windows editors) is not text
    except FileNotFoundError:
        raise ModelFileError(f"file not found (resolved to {path.resolve()})", path=path) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ModelFileError(f"cannot read file: {exc}", path=path) from exc


def add_predicate(preds: dict[str, PredicateSpec], spec: PredicateSpec, origin: str) -> None:
    if spec.arity < 1:
        raise ModelFileError(
            f"predicate {spec.name} needs a positive arity, got {spec.arity}", path=origin, predicate=spec.name
        )
    if len(spec.types) != spec.arity:
        raise ModelFileError(
            f"predicate {spec.name}: {len(spec.types)} types for arity {spec.arity}", path=origin, predicate=spec.name
        )
    for t in spec.types:
        if t not in _CONSTANT_TYPES:
            raise ModelFileError(
                f"predicate {spec.name}: unknown argument type {t!r}; use one of {', '.join(_CONSTANT_TYPES)}",
                path=origin,
                predicate=spec.name,
            )
    if spec.key in preds:
        raise ModelFileError(f"predicate {spec.name} is declared twice", path=origin, predicate=spec.name)
    preds[spec.key] = spec


def lookup(preds: Mapping[str, PredicateSpec], name: str, origin: str) -> PredicateSpec:
    try:
        return preds[str(name).upper()]
    except KeyError:
        known = ", ".join(p.name for p in preds.values()) or "none"
        raise ModelFileError(
            f"data given for undeclared predicate {name!r} (declared: {known})", path=origin, predicate=str(name)
        ) from None


def validate_neural(spec: PredicateSpec, origin: str) -> None:
    neural = spec.neural
    assert neural is not None
    if neural.class_size < 1:
        raise ModelFileError(
            f"neural predicate {spec.name}: class-size must be >= 1, got {neural.class_size}",
            path=origin,
            predicate=spec.name,
        )
    if spec.arity < 2:
        raise ModelFileError(
            f"neural predicate {spec.name} has arity {spec.arity}; it needs entity argument(s) "
            "followed by the class argument",
            path=origin,
            predicate=spec.name,
        )
    expected = list(range(spec.arity - 1))
    if sorted(neural.entity_argument_indexes) != expected:
        raise ModelFileError(
            f"neural predicate {spec.name}: entity-argument-indexes {neural.entity_argument_indexes} must be "
            f"{expected} (the leading arguments; the last argument is the class)",
            path=origin,
            predicate=spec.name,
        )


class ModelParts(NamedTuple):
    """What a reader produces: the fields of a :class:`~pslbridge.model.spec.ModelSpec`, not yet validated.

    Examples:
        >>> ModelParts([], {}, [], {}, "infer", "<python>").phase
        'infer'
    """

    rules: list[RuleSpec]
    predicates: dict[str, PredicateSpec]
    data: list[DataTable]
    options: dict[str, str]
    phase: str
    source: str
