"""One model description (a :class:`ModelSpec`) from any of PSL's three sources.

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
import logging
import math
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ModelFileError, PslBridgeWarning
from .cli_files import read_cli_files
from .parts import DataTable, NeuralSpec, PredicateSpec, RuleSpec
from .python_objects import read_python
from .runtime_config import read_runtime_config

log = logging.getLogger(__name__)

__all__ = ["ModelSpec", "load_model"]


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
        model = cls(*read_runtime_config(path, phase, data_dir))
        model.validate()
        return model

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
        model = cls(*read_cli_files(rules_path, data_path, phase))
        model.validate()
        return model

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
        model = cls(
            *read_python(
                rules=rules,
                predicates=predicates,
                observations=observations,
                targets=targets,
                truth=truth,
                neural=neural,
                closed=closed,
                options=options,
            )
        )
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
        self._warn_unmatched_truth()

    def _warn_unmatched_truth(self) -> None:
        """Warn about truth rows no target atom has: a typo in an id, or labels of observed or neural atoms."""
        for key, spec in self.predicates.items():
            truth = [t for t in self.data if t.predicate.upper() == key and t.partition == "truth" and len(t)]
            if not truth:
                continue
            rows = [tuple(r) for t in truth for r in t.args.tolist()]
            if spec.neural is not None:
                reason = f"{spec.name} is a neural predicate (its values come from the network)"
                unmatched = rows
            else:
                targets = {
                    tuple(r)
                    for t in self.data
                    if t.predicate.upper() == key and t.partition == "targets"
                    for r in t.args.tolist()
                }
                unmatched = [r for r in rows if r not in targets]
                reason = f"{spec.name} has no target atom for them" + ("" if targets else " (it has no targets)")
            if unmatched:
                warnings.warn(
                    f"{len(unmatched)} of {len(rows)} truth rows for {spec.name} label no target atom, e.g. "
                    f"{unmatched[0]!r}: {reason}; PSL ignores them",
                    PslBridgeWarning,
                    stacklevel=4,
                )


def _data_file_of(rules: Path) -> Path:
    """The ``.data`` file of a ``.psl`` file: the one of its name, else the folder's only one (with a warning)."""
    same = rules.with_suffix(".data")
    if same.is_file():
        return same
    candidates = sorted(rules.parent.glob("*.data"))
    if len(candidates) != 1:
        found = f" (the folder has {', '.join(c.name for c in candidates)})" if candidates else ""
        raise ModelFileError(f"no {same.name} beside it{found}; pass its .data file (data=... or --data)", path=rules)
    warnings.warn(
        f"{rules}: no {same.name}; using the folder's only .data file, {candidates[0].name} (pass data=... to choose)",
        PslBridgeWarning,
        stacklevel=3,
    )
    return candidates[0]


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
            data = _data_file_of(path)
        return ModelSpec.from_cli_files(path, data, phase)
    raise ModelFileError("unknown model file type: expected .json, .yaml, .yml or .psl", path=path)
