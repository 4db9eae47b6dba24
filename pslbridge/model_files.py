"""Reading PSL models into one description (a :class:`ModelSpec`).

Three sources: runtime ``.json``/``.yaml`` configs, classic ``.psl`` + ``.data`` pairs, and plain
Python objects.

Nothing here touches Java: the result, a :class:`ModelSpec`, is what
:mod:`pslbridge.program` grounds. Every problem is reported as a
:class:`~pslbridge.errors.ModelFileError` naming the file, line, rule or predicate.

Examples:
    >>> spec = ModelSpec.from_python(
    ...     rules=["1.0: Friend(A, B) & Smokes(A) -> Smokes(B) ^2"],
    ...     predicates={"Friend": 2, "Smokes": 1},
    ...     observations={"Friend": [("a", "b")], "Smokes": [("a", 1.0)]},
    ...     targets={"Smokes": [("b",)]},
    ... )
    >>> [p.name for p in spec.predicates.values()]
    ['Friend', 'Smokes']
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

from .errors import ModelFileError

log = logging.getLogger(__name__)

__all__ = [
    "DataTable",
    "EvaluationSpec",
    "ModelSpec",
    "NeuralSpec",
    "PARTITIONS",
    "PHASES",
    "PredicateSpec",
    "RuleSpec",
    "load_model",
    "read_data_file",
    "read_rules_file",
]

PARTITIONS = ("observations", "targets", "truth")
PHASES = ("learn", "infer")
_SPLITS = ("all", "learn", "validation", "infer")
_CONSTANT_TYPES = ("UniqueStringID", "UniqueIntID", "String", "Integer", "Long", "Double")
_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_PREDICATE_KEYS = {
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
_CONFIG_KEYS = {"rules", "predicates", "options", "learn", "validation", "infer"}
#: PSL's predicate classes, as a runtime config names them (short, or qualified by PSL's package).
_PREDICATE_PACKAGE = ".psl.model.predicate."


def _predicate_type(ptype: Any) -> str | None:
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


@dataclass
class ModelSpec:
    """A whole model: rules, predicates, data for one phase, and PSL options.

    Build with :func:`load_model`, :meth:`from_runtime_config`, :meth:`from_cli_files`
    or :meth:`from_python`.

    Attributes:
        rules: Rules in model order.
        predicates: Declarations keyed by upper-cased name.
        data: Data tables of the chosen phase.
        options: PSL options (global ones updated by the phase's).
        phase: ``"infer"`` or ``"learn"``.
        source: Where the model was read from.
        observed_labels: Target predicates that :meth:`observe_labels` turned into observations at their labels.

    Examples:
        >>> spec = ModelSpec.from_python(rules=["1: A(X) -> B(X) ^2"], predicates={"A": 1, "B": 1},
        ...                              observations={"A": [("x",)]}, targets={"B": [("x",)]})
        >>> spec.is_closed("A"), spec.is_closed("B")
        (True, False)
    """

    rules: list[RuleSpec]
    predicates: dict[str, PredicateSpec]
    data: list[DataTable]
    options: dict[str, str] = field(default_factory=dict)
    phase: str = "infer"
    source: str = "<python>"
    observed_labels: tuple[str, ...] = ()

    # -- queries -------------------------------------------------------------------

    def predicate(self, name: str) -> PredicateSpec:
        """Return a predicate's declaration (case-insensitive).

        Raises:
            ModelFileError: No such predicate.
        """
        try:
            return self.predicates[name.upper()]
        except KeyError:
            known = ", ".join(p.name for p in self.predicates.values())
            raise ModelFileError(
                f"unknown predicate {name!r}; the model declares: {known}", path=self.source, predicate=name
            ) from None

    def tables(self, predicate: str, partition: str) -> list[DataTable]:
        """Return the data tables of a predicate in a partition."""
        key = predicate.upper()
        return [t for t in self.data if t.predicate.upper() == key and t.partition == partition]

    def is_closed(self, predicate: str) -> bool:
        """A predicate is open when declared open or when it has targets (PSL's rule)."""
        spec = self.predicate(predicate)
        if spec.neural is not None:
            return False
        if spec.function is not None:
            return True
        if spec.closed is not None:
            return spec.closed
        return not self.tables(predicate, "targets")

    def observe_labels(self) -> ModelSpec:
        """A learning-only copy in which every fully labelled target predicate is observed at its labels.

        PSL's learners ground labelled atoms as random variables and fix them to their truth values for each
        learning step, so the reasoner still iterates over every ground rule that touches them. Observed atoms
        are constants to the grounding instead, and PSL drops the ground rules they already satisfy. The
        energy loss's latent problem (labels fixed, the rest solved for) has the same objective either way, but
        its program is smaller, so each capped solve is cheaper. Its iterates are not the same: a solve
        stopped by an iteration cap ends at a different point.

        A predicate is observed only when every one of its targets has a truth row; the labels of a partly
        labelled predicate stay labels, fixed per step as before. The copy keeps no labels for the observed
        predicates, so the losses that also solve with the labels free (the structured perceptron, the bilevel
        losses) refuse it; :attr:`observed_labels` names them.

        Returns:
            The copy (the original is unchanged); ``self`` when no predicate is fully labelled.

        Examples:
            >>> spec = ModelSpec.from_python(rules=["1: OlA(X) -> OlB(X) ^2", "1: OlB(X) -> OlC(X) ^2"],
            ...     predicates={"OlA": 1, "OlB": 1, "OlC": 1}, observations={"OlA": [("x", 1.0)]},
            ...     targets={"OlB": [("x",)], "OlC": [("x",)]}, truth={"OlC": [("x", 1.0)]})
            >>> learning = spec.observe_labels()
            >>> learning.observed_labels, learning.is_closed("OlC"), spec.is_closed("OlC")
            (('OlC',), True, False)
        """
        observed: list[str] = []
        data = list(self.data)
        predicates = dict(self.predicates)
        for key, pred in self.predicates.items():
            targets = self.tables(pred.name, "targets")
            truth = self.tables(pred.name, "truth")
            if pred.neural is not None or not targets or not truth:
                continue
            labels: dict[tuple[str, ...], float] = {}
            for table in truth:
                values = table.values if table.values is not None else np.ones(len(table))
                for args, value in zip(table.args.tolist(), values.tolist()):
                    labels.setdefault(tuple(args), 1.0 if math.isnan(value) else float(value))
            rows = [tuple(args) for table in targets for args in table.args.tolist()]
            if not all(row in labels for row in rows):
                continue
            rows = list(dict.fromkeys(rows))
            args = np.empty((len(rows), pred.arity), dtype=object)
            args[:] = rows
            table = DataTable(pred.name, "observations", args, np.array([labels[r] for r in rows]), "<labels>")
            data = [t for t in data if not (t.predicate.upper() == key and t.partition in ("targets", "truth"))]
            data.append(table)
            if pred.closed is not None:  # declared open: observed at every target, it is closed now
                predicates[key] = dataclasses.replace(pred, closed=True)
            observed.append(pred.name)
        if not observed:
            return self
        return dataclasses.replace(
            self, predicates=predicates, data=data, observed_labels=(*self.observed_labels, *observed)
        )

    @property
    def neural_predicates(self) -> list[PredicateSpec]:
        """Neural predicates in declaration order."""
        return [p for p in self.predicates.values() if p.neural is not None]

    @property
    def functional_predicates(self) -> list[PredicateSpec]:
        """External functional predicates in declaration order."""
        return [p for p in self.predicates.values() if p.function is not None]

    # -- constructors ----------------------------------------------------------------

    @classmethod
    def from_runtime_config(
        cls, path: str | Path, phase: str = "infer", data_dir: str | Path | None = None
    ) -> ModelSpec:
        """Read a PSL 2.3/2.4 runtime config (``.json`` or ``.yaml``).

        Args:
            path: The config file.
            phase: ``"infer"`` or ``"learn"`` — which split's data to use.
            data_dir: Resolve relative data paths against this folder instead of
                the config's own folder.

        Returns:
            The model description.

        Raises:
            ModelFileError: The file is unreadable or not a valid config.

        Examples:
            >>> from pslbridge.examples import example_path
            >>> config = example_path("simple-acquaintances") / "simple-acquaintances.json"
            >>> spec = ModelSpec.from_runtime_config(config)
            >>> len(spec.rules), sorted(spec.predicates)
            (6, ['KNOWS', 'LIKES', 'LIVED'])
        """
        path = Path(path)
        _check_phase(phase)
        text = _read_text(path)
        try:
            raw = json.loads(text) if path.suffix.lower() == ".json" else yaml.safe_load(text)
        except json.JSONDecodeError as exc:
            raise ModelFileError(f"invalid JSON: {exc.msg} (column {exc.colno})", path=path, line=exc.lineno) from exc
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            raise ModelFileError(
                f"invalid YAML: {exc}", path=path, line=None if mark is None else mark.line + 1
            ) from exc
        base = Path(data_dir) if data_dir is not None else path.parent
        return _RuntimeConfigReader(raw, path, base, phase).read()

    @classmethod
    def from_cli_files(cls, rules_path: str | Path, data_path: str | Path, phase: str = "infer") -> ModelSpec:
        """Read a classic PSL CLI pair: a ``.psl`` rule file and a ``.data`` YAML file.

        The ``.data`` file has ``predicates:`` (``Name/arity: open|closed``, or a mapping
        ``{type: neural, class-size: K, ...}`` for neural predicates), and
        ``observations:``, ``targets:``, ``truth:`` mapping predicate names to one path or
        a list of paths; the ``learn:`` / ``infer:`` sub-keys of the CLI's split form are
        accepted too. Paths are relative to the ``.data`` file.

        Examples:
            >>> stem = "pslbridge/examples/simple-acquaintances/simple-acquaintances"
            >>> spec = ModelSpec.from_cli_files(stem + ".psl", stem + ".data")
            >>> spec.is_closed("Lived"), spec.is_closed("Knows")
            (True, False)
        """
        _check_phase(phase)
        rules = read_rules_file(rules_path)
        return _DataFileReader(Path(data_path), rules, phase).read()

    @classmethod
    def from_python(
        cls,
        *,
        rules: Sequence[str] | str,
        predicates: Mapping[str, int | Sequence[str] | PredicateSpec],
        observations: Mapping[str, Any] | None = None,
        targets: Mapping[str, Any] | None = None,
        truth: Mapping[str, Any] | None = None,
        neural: Mapping[str, int | NeuralSpec] | None = None,
        closed: Iterable[str] = (),
        options: Mapping[str, Any] | None = None,
    ) -> ModelSpec:
        """Build a model from Python objects, no files.

        Args:
            rules: Rule strings (or one string with a rule per line).
            predicates: ``name -> arity``, ``name -> [types]`` or ``name -> PredicateSpec``.
            observations: ``name -> rows``; rows are a DataFrame (arguments in the first
                ``arity`` columns, an optional last truth column), a numpy array, or a list of tuples.
            targets: Same, for the atoms to infer.
            truth: Same, for labels (learning and evaluation).
            neural: ``name -> class_size`` (or a :class:`NeuralSpec`) for neural predicates.
            closed: Names to force closed even without data.
            options: PSL options (``admmreasoner.maxiterations`` ...).

        Returns:
            The model description.

        Raises:
            ModelFileError: A rule, declaration or row is malformed.

        Examples:
            >>> spec = ModelSpec.from_python(rules="1: A(X) -> B(X)", predicates={"A": 1, "B": 1})
            >>> spec.rules[0].text
            '1: A(X) -> B(X)'
        """
        if isinstance(rules, str):
            rule_specs = parse_rules_text(rules, None)
        else:
            rule_specs = [RuleSpec(str(r).strip()) for r in rules if str(r).strip()]
        preds: dict[str, PredicateSpec] = {}
        for name, decl in predicates.items():
            if isinstance(decl, PredicateSpec):
                spec = decl
            elif isinstance(decl, (int, np.integer)):
                spec = PredicateSpec(_check_name(name, "<python>"), int(decl))
            else:
                types = [str(t) for t in decl]
                spec = PredicateSpec(_check_name(name, "<python>"), len(types), types)
            _add_predicate(preds, spec, "<python>")
        for name, decl in (neural or {}).items():
            spec = preds.get(name.upper())
            if spec is None:
                raise ModelFileError(f"neural predicate {name!r} is not in `predicates`", predicate=name)
            spec.neural = decl if isinstance(decl, NeuralSpec) else NeuralSpec(class_size=int(decl))
            _validate_neural(spec, "<python>")
        for name in closed:
            _lookup(preds, name, "<python>").closed = True
        data: list[DataTable] = []
        for partition, mapping in zip(PARTITIONS, (observations, targets, truth)):
            for name, rows in (mapping or {}).items():
                spec = _lookup(preds, name, "<python>")
                data.append(_table_from_object(spec, partition, rows))
        model = cls(rule_specs, preds, data, {k: str(v) for k, v in (options or {}).items()})
        model.validate()
        return model

    # -- validation ------------------------------------------------------------------

    def validate(self) -> None:
        """Check cross-references: predicates used by data, closed predicates without targets.

        Raises:
            ModelFileError: On the first problem found.
        """
        for table in self.data:
            spec = self.predicate(table.predicate)
            if spec.function is not None and len(table):
                raise ModelFileError(
                    f"predicate {spec.name} is an external functional predicate: its values come from its function, "
                    f"so it cannot have {table.partition} data",
                    path=table.origin,
                    predicate=spec.name,
                )
            if table.partition == "targets" and spec.closed:
                raise ModelFileError(
                    f"predicate {spec.name} is declared closed but has target rows; declare it open "
                    "or move the rows to observations",
                    path=table.origin,
                    predicate=spec.name,
                )
            if table.partition == "truth" and table.values is not None and np.isnan(table.values).any():
                row = int(np.flatnonzero(np.isnan(table.values))[0])
                origin, line = table.where(row)
                raise ModelFileError(
                    f"truth row for {spec.name} has no truth value", path=origin, line=line, predicate=spec.name
                )


# -- helpers ---------------------------------------------------------------------------


def _check_phase(phase: str) -> None:
    if phase not in PHASES:
        raise ModelFileError(f"phase must be one of {PHASES}, got {phase!r}")


def _check_name(name: str, origin: str) -> str:
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise ModelFileError(
            f"invalid predicate name {name!r}: use letters, digits and '_'", path=origin, predicate=str(name)
        )
    return name


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ModelFileError(f"file not found (resolved to {path.resolve()})", path=path) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ModelFileError(f"cannot read file: {exc}", path=path) from exc


def _add_predicate(preds: dict[str, PredicateSpec], spec: PredicateSpec, origin: str) -> None:
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


def _lookup(preds: Mapping[str, PredicateSpec], name: str, origin: str) -> PredicateSpec:
    try:
        return preds[str(name).upper()]
    except KeyError:
        known = ", ".join(p.name for p in preds.values()) or "none"
        raise ModelFileError(
            f"data given for undeclared predicate {name!r} (declared: {known})", path=origin, predicate=str(name)
        ) from None


def _validate_neural(spec: PredicateSpec, origin: str) -> None:
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
    rules = parse_rules_text(_read_text(path), str(path))
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
    text = _read_text(path)
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
    return _rows_to_table(spec, partition, rows, label, np.asarray(lines, dtype=np.int64))


def _rows_to_table(
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


def _table_from_object(spec: PredicateSpec, partition: str, rows: Any) -> DataTable:
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
    listed = [[str(v) for v in (r if isinstance(r, (list, tuple)) else [r])] for r in rows]
    if not listed:
        return DataTable(spec.name, partition, np.empty((0, spec.arity), dtype=object), None, origin)
    return _rows_to_table(spec, partition, listed, origin, None)


class _RuntimeConfigReader:
    """Parse the runtime config's JSON structure the way RuntimeConfig does."""

    def __init__(self, raw: Any, path: Path, base: Path, phase: str) -> None:
        self.raw = raw
        self.path = path
        self.base = base
        self.phase = phase

    def fail(self, message: str, predicate: str | None = None) -> ModelFileError:
        return ModelFileError(message, path=self.path, predicate=predicate)

    def read(self) -> ModelSpec:
        raw = self.raw
        if not isinstance(raw, dict):
            raise self.fail(f"a runtime config must be an object at the top level, got {type(raw).__name__}")
        unknown = set(raw) - _CONFIG_KEYS
        if unknown:
            raise self.fail(f"unknown top-level key(s) {sorted(unknown)}; expected some of {sorted(_CONFIG_KEYS)}")
        options = self.options(raw.get("options"), "options")
        split = raw.get(self.phase) or {}
        if not isinstance(split, dict):
            raise self.fail(f"'{self.phase}' must be an object with 'rules'/'options'")
        bad = set(split) - {"rules", "options"}
        if bad:
            raise self.fail(f"unknown key(s) {sorted(bad)} in '{self.phase}'; expected 'rules' and 'options'")
        options.update(self.options(split.get("options"), f"{self.phase}.options"))
        rules = self.rules(raw.get("rules"), "rules") + self.rules(split.get("rules"), f"{self.phase}.rules")
        int_ids = options.get("runtime.db.intids", "false").lower() == "true"
        preds: dict[str, PredicateSpec] = {}
        data: list[DataTable] = []
        raw_preds = raw.get("predicates") or {}
        if not isinstance(raw_preds, dict):
            raise self.fail("'predicates' must be an object mapping names to definitions")
        for raw_name, definition in raw_preds.items():
            spec, tables = self.predicate(str(raw_name), definition, int_ids)
            _add_predicate(preds, spec, str(self.path))
            data.extend(tables)
        model = ModelSpec(rules, preds, data, options, self.phase, str(self.path))
        model.validate()
        return model

    def options(self, raw: Any, where: str) -> dict[str, str]:
        if raw is None:
            return {}
        if not isinstance(raw, dict):
            raise self.fail(f"'{where}' must be an object of option -> value")
        out = {}
        for key, value in raw.items():
            if isinstance(value, (dict, list)):
                raise self.fail(f"option {key!r} in '{where}' must be a scalar, got {type(value).__name__}")
            out[str(key)] = _option_text(value)
        return out

    def rules(self, raw: Any, where: str) -> list[RuleSpec]:
        if raw is None:
            return []
        if isinstance(raw, str):
            return read_rules_file(self.base / raw if not Path(raw).is_absolute() else Path(raw))
        if isinstance(raw, list):
            out = []
            for i, rule in enumerate(raw):
                if not isinstance(rule, str):
                    raise self.fail(f"'{where}' entry {i} must be a rule string, got {type(rule).__name__}")
                out.append(RuleSpec(rule.strip(), str(self.path), None))
            return out
        raise self.fail(f"'{where}' must be a list of rule strings or a path to a .psl file")

    def predicate(self, raw_name: str, definition: Any, int_ids: bool) -> tuple[PredicateSpec, list[DataTable]]:
        if definition is None:
            definition = {}
        if not isinstance(definition, dict):
            raise self.fail(f"predicate {raw_name!r} must map to an object", raw_name)
        unknown = set(definition) - _PREDICATE_KEYS
        if unknown:
            raise self.fail(
                f"predicate {raw_name!r} has unknown key(s) {sorted(unknown)}; expected some of "
                f"{sorted(_PREDICATE_KEYS)}",
                raw_name,
            )
        name, arity = raw_name, definition.get("arity")
        if "/" in raw_name:
            parts = raw_name.split("/")
            if len(parts) != 2 or not parts[1].strip().isdigit():
                raise self.fail(f"predicate key {raw_name!r} must look like Name/arity", raw_name)
            name, parsed = parts[0].strip(), int(parts[1])
            if arity is not None and int(arity) != parsed:
                raise self.fail(f"arity mismatch on predicate {name}: {arity} declared, {parsed} in its name", name)
            arity = parsed
        _check_name(name, str(self.path))
        if "name" in definition and str(definition["name"]) != name:
            raise self.fail(f"predicate name mismatch: key {name!r} vs name {definition['name']!r}", name)
        types = definition.get("types") or []
        if not isinstance(types, list):
            raise self.fail(f"'types' of predicate {name} must be a list", name)
        if arity is None:
            arity = len(types)
        if not isinstance(arity, int) or isinstance(arity, bool) or arity < 1:
            raise self.fail(f"bad or missing arity on predicate {name}: give it as 'Name/arity' or 'arity'", name)
        if types and len(types) != arity:
            raise self.fail(f"arity mismatch on predicate {name}: arity {arity}, {len(types)} types", name)
        if not types:
            types = ["UniqueIntID" if int_ids else "UniqueStringID"] * arity
        ptype = definition.get("type")
        pred_options = self.options(definition.get("options"), f"predicates.{raw_name}.options")
        spec = PredicateSpec(name, arity, [str(t) for t in types], options=pred_options)
        if definition.get("force-open"):
            spec.closed = False
        if ptype is not None and _predicate_type(ptype) is None:
            raise self.fail(f"predicate {name}: unknown type {ptype!r}; use DeepPredicate or StandardPredicate", name)
        if ptype is not None and _predicate_type(ptype) == "DeepPredicate":
            spec.neural = self.neural(spec, pred_options)
        if definition.get("function") is not None:
            spec.function = str(definition["function"])
        spec.evaluations = _evaluations(definition.get("evaluations"), name, str(self.path))
        tables = []
        for partition in PARTITIONS:
            tables.extend(self.partition(spec, partition, definition.get(partition)))
        return spec, tables

    def neural(self, spec: PredicateSpec, opts: dict[str, str]) -> NeuralSpec:
        if "class-size" not in opts:
            raise self.fail(f"DeepPredicate {spec.name} needs the option 'class-size' (number of classes)", spec.name)
        if "entity-argument-indexes" not in opts:
            raise self.fail(
                f"DeepPredicate {spec.name} needs the option 'entity-argument-indexes' "
                '(e.g. "0" for one entity argument)',
                spec.name,
            )
        try:
            class_size = int(opts["class-size"])
            indexes = [int(x) for x in str(opts["entity-argument-indexes"]).split(",") if x.strip()]
        except ValueError:
            raise self.fail(
                f"DeepPredicate {spec.name}: class-size and entity-argument-indexes must be integers", spec.name
            ) from None
        mapping = opts.get("entity-data-map-path")
        neural = NeuralSpec(class_size, indexes, str(self.base / mapping) if mapping else None, dict(opts))
        spec.neural = neural
        _validate_neural(spec, str(self.path))
        return neural

    def partition(self, spec: PredicateSpec, partition: str, raw: Any) -> list[DataTable]:
        if raw is None:
            return []
        entries: list[Any]
        if isinstance(raw, list):
            entries = list(raw)
        elif isinstance(raw, dict):
            bad = set(raw) - set(_SPLITS)
            if bad:
                raise self.fail(
                    f"predicate {spec.name} {partition}: unknown split(s) {sorted(bad)}; expected "
                    f"some of {list(_SPLITS)}",
                    spec.name,
                )
            entries = []
            for split in ("all", self.phase):
                part = raw.get(split) or []
                if not isinstance(part, list):
                    raise self.fail(f"predicate {spec.name} {partition}.{split} must be a list", spec.name)
                entries.extend(part)
            if spec.closed is None and partition == "targets" and not entries and any(raw.get(s) for s in _SPLITS):
                pass
        else:
            raise self.fail(f"predicate {spec.name} {partition} must be a list or an object of splits", spec.name)
        tables = []
        literal: list[list[str]] = []
        for entry in entries:
            if isinstance(entry, str):
                resolved = Path(entry) if Path(entry).is_absolute() else self.base / entry
                tables.append(read_data_file(resolved, spec, partition, shown_path=entry))
            elif isinstance(entry, list):
                literal.append([_option_text(v) for v in entry])
            else:
                raise self.fail(f"predicate {spec.name} {partition}: entries must be file paths or rows", spec.name)
        if literal:
            tables.append(_rows_to_table(spec, partition, literal, f"{self.path} ({spec.name} {partition})", None))
        return tables


def _evaluations(raw: Any, predicate: str, origin: str) -> list[EvaluationSpec]:
    """A config's ``evaluations`` entries: class names, or ``{evaluator, options, primary}`` objects."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        raw = [raw]
    out = []
    for entry in raw:
        if isinstance(entry, str):
            out.append(EvaluationSpec(entry))
        elif isinstance(entry, dict) and isinstance(entry.get("evaluator"), str):
            options = entry.get("options") or {}
            if not isinstance(options, dict):
                raise ModelFileError(
                    f"evaluation options of {predicate} must be an object", path=origin, predicate=predicate
                )
            pairs = tuple(sorted((str(k), _option_text(v)) for k, v in options.items()))
            out.append(EvaluationSpec(entry["evaluator"], pairs, bool(entry.get("primary", False))))
        else:
            raise ModelFileError(
                f"evaluation of {predicate} must be an evaluator class name or an object with 'evaluator': {entry!r}",
                path=origin,
                predicate=predicate,
            )
    if sum(e.primary for e in out) > 1:
        raise ModelFileError(
            f"predicate {predicate} has more than one primary evaluation", path=origin, predicate=predicate
        )
    return out


def _option_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


class _DataFileReader:
    """Translate a classic PSL CLI ``.data`` file."""

    _SECTIONS = {"predicates", "observations", "targets", "truth"}

    def __init__(self, path: Path, rules: list[RuleSpec], phase: str) -> None:
        self.path = path
        self.rules = rules
        self.phase = phase

    def read(self) -> ModelSpec:
        text = _read_text(self.path)
        try:
            raw = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            raise ModelFileError(
                f"invalid YAML: {exc}", path=self.path, line=None if mark is None else mark.line + 1
            ) from exc
        if not isinstance(raw, dict):
            raise ModelFileError("a .data file must be a YAML mapping with a 'predicates:' section", path=self.path)
        unknown = set(raw) - self._SECTIONS
        if unknown:
            raise ModelFileError(
                f"unknown section(s) {sorted(unknown)}; a .data file has {sorted(self._SECTIONS)}",
                path=self.path,
                line=_line_of(text, sorted(unknown)[0]),
            )
        preds: dict[str, PredicateSpec] = {}
        decls = raw.get("predicates")
        if not isinstance(decls, dict) or not decls:
            raise ModelFileError("'predicates:' must map Name/arity to open or closed", path=self.path)
        for key, value in decls.items():
            _add_predicate(preds, self.declaration(str(key), value, text), str(self.path))
        data: list[DataTable] = []
        for partition in PARTITIONS:
            section = raw.get(partition) or {}
            if not isinstance(section, dict):
                raise ModelFileError(
                    f"'{partition}:' must map predicate names to paths", path=self.path, line=_line_of(text, partition)
                )
            if set(section) & {"learn", "infer", "validation", "all"}:
                merged: dict[str, Any] = {}
                for split in ("all", self.phase):
                    for name, paths in (section.get(split) or {}).items():
                        merged.setdefault(name, []).extend(_as_list(paths))
                section = merged
            for name, paths in section.items():
                spec = _lookup(preds, str(name), str(self.path))
                for entry in _as_list(paths):
                    resolved = Path(entry) if Path(entry).is_absolute() else self.path.parent / entry
                    data.append(read_data_file(resolved, spec, partition, shown_path=str(entry)))
        model = ModelSpec(self.rules, preds, data, {}, self.phase, str(self.path))
        model.validate()
        return model

    def declaration(self, key: str, value: Any, text: str) -> PredicateSpec:
        """One ``predicates:`` entry, in any form PSL 2.3's data loader accepted (plus neural predicates).

        ``Name/arity: open|closed``; a property list ``[open, block, {types: [...]}]``; ``Name:`` without an
        arity when ``types`` gives it; ``{implementation: ...}`` (or ``function:``) for an external functional
        predicate; ``{type: neural, class-size: K, ...}`` for a neural one.
        """
        where = {"path": self.path, "line": _line_of(text, key)}
        name, _, arity_text = key.partition("/")
        if arity_text and not arity_text.strip().isdigit():
            raise ModelFileError(f"predicate declaration {key!r} must look like Name or Name/arity", **where)
        name = _check_name(name.strip(), str(self.path))
        if isinstance(value, dict) and str(value.get("type", "")).lower() == "neural":
            if not arity_text:
                raise ModelFileError(
                    f"neural predicate {name} must be declared as {name}/arity", predicate=name, **where
                )
            return self.neural_declaration(PredicateSpec(name, int(arity_text)), value, where)
        closed, types, function = self.properties(name, value, where)
        arity = int(arity_text) if arity_text else len(types) or None
        if types and arity != len(types):
            raise ModelFileError(
                f"size mismatch on predicate {name}: arity {arity} declared, {len(types)} types given",
                predicate=name,
                **where,
            )
        if arity is None:
            raise ModelFileError(
                f"could not find the arity of predicate {name}: write {name}/arity or give types",
                predicate=name,
                **where,
            )
        if function is None and closed is None:
            raise ModelFileError(f"predicate {name}: say whether it is open or closed", predicate=name, **where)
        return PredicateSpec(name, arity, types, closed=closed, function=function)

    def properties(self, name: str, value: Any, where: dict[str, Any]) -> tuple[bool | None, list[str], str | None]:
        """``(closed, types, function)`` from a predicate's property list (PSL 2.3's data format)."""
        closed, types, function = None, [], None
        for prop in value if isinstance(value, list) else [value]:
            if isinstance(prop, str) and prop.strip().lower() in ("open", "closed", "block"):
                word = prop.strip().lower()
                if word == "block":
                    log.info("%s: predicate %s: 'block' has no PSL 2.4 equivalent and is ignored", self.path, name)
                else:
                    closed = word == "closed"
            elif isinstance(prop, dict):
                for key, raw in prop.items():
                    if key == "types":
                        types = [str(t) for t in (raw if isinstance(raw, list) else [raw])]
                    elif key in ("implementation", "function"):
                        function = str(raw)
                    elif key in ("modeltype", "config"):
                        raise ModelFileError(
                            f"predicate {name}: PSL 2.3's model predicates ('{key}') have no PSL 2.4 equivalent; "
                            "declare a neural predicate instead ({type: neural, class-size: K})",
                            predicate=name,
                            **where,
                        )
                    else:
                        raise ModelFileError(
                            f"predicate {name} has an unknown property {key!r}", predicate=name, **where
                        )
            else:
                raise ModelFileError(
                    f"predicate {name} must be 'open', 'closed', a property list such as [open, {{types: [...]}}] "
                    f"or {{type: neural, class-size: K}}, got {prop!r}",
                    predicate=name,
                    **where,
                )
        return closed, types, function

    def neural_declaration(self, spec: PredicateSpec, value: dict[str, Any], where: dict[str, Any]) -> PredicateSpec:
        opts = {str(k): _option_text(v) for k, v in value.items() if k != "type"}
        if "class-size" not in opts:
            raise ModelFileError(f"neural predicate {spec.name} needs 'class-size'", predicate=spec.name, **where)
        indexes = opts.get("entity-argument-indexes", ",".join(str(i) for i in range(spec.arity - 1)))
        mapping = opts.get("entity-data-map-path")
        spec.neural = NeuralSpec(
            int(opts["class-size"]),
            [int(i) for i in indexes.split(",")],
            str(self.path.parent / mapping) if mapping else None,
            opts,
        )
        _validate_neural(spec, str(self.path))
        return spec


def _as_list(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, list):
        return [str(v) for v in value]
    return [str(value)]


def _line_of(text: str, token: str) -> int | None:
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip().startswith(str(token)):
            return number
    return None


def load_model(path: str | Path, data: str | Path | None = None, *, phase: str = "infer") -> ModelSpec:
    """Load a model from files, choosing the reader by extension.

    Args:
        path: A runtime config (``.json``/``.yaml``/``.yml``) or a ``.psl`` rule file.
        data: With a ``.psl`` file: its ``.data`` file. With a config: a folder to
            resolve relative data paths against (default: the config's folder).
        phase: ``"infer"`` or ``"learn"``.

    Returns:
        The model description.

    Raises:
        ModelFileError: Unknown extension or any problem in the files.

    Examples:
        >>> load_model("pslbridge/examples/simple-acquaintances/simple-acquaintances.json", phase="learn").phase
        'learn'
    """
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix in (".json", ".yaml", ".yml"):
        return ModelSpec.from_runtime_config(path, phase, data_dir=data)
    if suffix == ".psl":
        if data is None:
            candidates = sorted(path.parent.glob("*.data"))
            if len(candidates) != 1:
                raise ModelFileError("a .psl rule file needs its .data file (pass data=...)", path=path)
            data = candidates[0]
        return ModelSpec.from_cli_files(path, data, phase)
    raise ModelFileError("unknown model file type: expected .json, .yaml, .yml or .psl", path=path)
