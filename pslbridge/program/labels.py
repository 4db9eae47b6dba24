"""Labelled target atoms, and fixing them to their truth values the way PSL's learners do.

A learning step solves the *latent* problem: targets with a truth value are fixed to it, the rest are
solved for. PSL's learners swap each labelled random-variable atom in the atom store for its truth
``ObservedAtom`` and write the truth value (``fixLabeledRandomVariables``); unfixing swaps them back.
:class:`Labels` prepares the swapped-in blocks once, so fixing is one array copy per contiguous run.

Examples:
    >>> from pslbridge.model import ModelSpec
    >>> from pslbridge.program import GroundProgram
    >>> spec = ModelSpec.from_python(rules=["1: LbA(X) -> LbB(X) ^2"], predicates={"LbA": 1, "LbB": 1},
    ...     observations={"LbA": [("x", 1.0), ("y", 0.0)]}, targets={"LbB": [("x",), ("y",)]},
    ...     truth={"LbB": [("x", 1.0)]})
    >>> with GroundProgram(spec) as program:
    ...     labels = program.labels
    ...     (labels.label_index.size, labels.latent_count)
    (1, 1)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ..engine import datastore
from ..engine.failures import guard
from ..errors import ConfigurationError
from ..model import ModelSpec
from .atoms import DELIMITER, AtomIndex

__all__ = ["Labels", "first_bad_label", "set_labels", "truth_rows"]


class Labels:
    """The labelled target atoms of a program.

    Args:
        spec: The model (its truth tables give the labels).
        atoms: The program's atom index.
        atom_store: PSL's atom store of the target database.
        truth_store: The atom store of the truth database.

    Attributes:
        label_index: Atom-store indexes of labelled random-variable atoms (sorted).
        label_values: Their truth values (float32).
        latent_count: Target atoms without a label.
        fixed: Whether the labelled atoms are currently fixed.

    Examples:
        >>> program.labels.label_index.size  # the KNOWS atoms with a truth value
        40
    """

    def __init__(self, spec: ModelSpec, atoms: AtomIndex, atom_store: Any, truth_store: Any) -> None:
        self._atom_store = atom_store
        self._rv_count = atoms.rv_count
        self._rv_mask = atoms.rv_mask
        index, values, rows = _labels(spec, atoms)
        self.label_index = index
        self.label_values = values
        self.latent_count = int(sum(len(t.index) for t in atoms.targets.values())) - int(index.size)
        self._rows = rows
        self._runs = _runs(index, atoms, atom_store, truth_store)
        self._run_starts = np.array([start for start, _, _ in self._runs], dtype=np.int64)
        self.fixed = False

    def row_positions(self, key: str) -> np.ndarray:
        """The label (a position in :attr:`label_values`) of each truth row of a predicate, in the model's order.

        A row that names no random-variable atom of the program has no label (-1), as when the labels were read.

        Args:
            key: The predicate's key (upper-cased name).

        Raises:
            KeyError: The predicate has no truth rows.

        Examples:
            >>> program.labels.row_positions("KNOWS").size  # one per truth row of Knows
            40
        """
        return self._rows[key]

    def relabel(self, positions: np.ndarray, values: np.ndarray) -> int:
        """Give the labels at ``positions`` new truth values; the next :meth:`fix` uses them.

        PSL's truth atoms (what its evaluators read) take the new values too. Only the labels whose value
        changes are written.

        Args:
            positions: Positions in :attr:`label_values`.
            values: Their new values (float32, in [0, 1]; the caller checks them).

        Returns:
            How many labels changed.

        Examples:
            >>> labels = program.labels
            >>> old = labels.label_values[:2].copy()
            >>> labels.relabel(np.array([0, 1]), 1.0 - old), labels.relabel(np.array([0, 1]), old)
            (2, 2)
        """
        positions = np.asarray(positions, dtype=np.int64)
        values = np.asarray(values, dtype=np.float32)
        changed = np.flatnonzero(self.label_values[positions] != values)
        if changed.size == 0:
            return 0
        where, new = positions[changed], values[changed]
        atoms = self.label_index[where]
        runs = np.searchsorted(self._run_starts, atoms, side="right") - 1
        with guard("relabelling truth atoms"):
            for run in np.unique(runs).tolist():
                start, _, observed = self._runs[run]
                mine = runs == run
                datastore.assume_values(observed, (atoms[mine] - start).tolist(), new[mine].tolist())
            self.label_values[where] = new
            if self.fixed:
                java_values = self._atom_store.getAtomValues()
                for atom, value in zip(atoms.tolist(), new.tolist(), strict=True):
                    java_values[atom] = value
        return int(changed.size)

    def fix(self) -> None:
        """Swap labelled atoms for their truth atoms and write the truth values."""
        if self.fixed or not self._runs:
            self.fixed = True
            return
        store = self._atom_store
        atoms = store.getAtoms()
        with guard("fixing labelled atoms"):
            for start, _, observed in self._runs:
                datastore.array_copy(observed, atoms, start)
        java_values = store.getAtomValues()
        values = np.array(java_values[0 : self._rv_count], dtype=np.float32)
        values[self.label_index] = self.label_values
        java_values[0 : self._rv_count] = values
        self.fixed = True

    def unfix(self) -> None:
        """Put the random-variable atoms back (their values stay those of the labels until the next solve)."""
        if not self.fixed:
            return
        atoms = self._atom_store.getAtoms()
        with guard("unfixing labelled atoms"):
            for start, rv_block, _ in self._runs:
                datastore.array_copy(rv_block, atoms, start)
        self.fixed = False

    def unfixed_mask(self, atom_count: int, deep: np.ndarray) -> np.ndarray:
        """Boolean mask of the atoms a reasoner solves for now (not deep, not observed, not fixed labels).

        Examples:
            >>> mask = program.labels.unfixed_mask(program.atom_count, program.atoms.deep_mask)
            >>> bool((mask == program.atoms.rv_mask).all())  # no neural atoms, labels not fixed
            True
        """
        mask = np.zeros(atom_count, dtype=bool)
        mask[: self._rv_mask.size] = self._rv_mask
        mask &= ~deep
        if self.fixed:
            mask[self.label_index] = False
        return mask


def _labels(spec: ModelSpec, atoms: AtomIndex) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    """Labelled atoms (sorted), their values (a duplicate row's first value), and each truth row's label."""
    index_parts, value_parts, row_atoms = [], [], {}
    for key in atoms.targets:
        pred = spec.predicates[key]
        tables = [table for table in spec.tables(pred.name, "truth") if len(table)]
        for table in tables:
            idx = atoms.find(pred, table.args)
            keep = idx >= 0
            keep[keep] = atoms.rv_mask[idx[keep]]  # labels of random variables only (as PSL's training map)
            values = table.values if table.values is not None else np.ones(len(table))
            index_parts.append(idx[keep])
            value_parts.append(values[keep].astype(np.float32))
            row_atoms.setdefault(key, []).append(np.where(keep, idx, -1))
    if not index_parts:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32), {}
    index, values = np.concatenate(index_parts), np.concatenate(value_parts)
    order = np.argsort(index, kind="stable")
    index, values = index[order], values[order]
    unique, first = np.unique(index, return_index=True)
    rows = {}
    for key, parts in row_atoms.items():
        atom = np.concatenate(parts)
        rows[key] = np.where(atom >= 0, np.searchsorted(unique, atom), -1)
    return unique, values[first], rows


def _runs(index: np.ndarray, atoms: AtomIndex, atom_store: Any, truth_store: Any) -> list[tuple[int, Any, Any]]:
    """Contiguous runs ``(start, rv_block, observed_block)`` of labelled atoms, as Java atom arrays."""
    if index.size == 0:
        return []
    with guard("preparing labelled atoms"):
        n_truth = int(truth_store.size())
        truth_atoms = truth_store.getAtoms()
        text = datastore.join_texts(truth_atoms, n_truth, DELIMITER)
    truth_lookup = {k: i for i, k in enumerate(text.split(DELIMITER))} if n_truth else {}
    breaks = np.flatnonzero(np.diff(index) != 1) + 1
    runs = []
    store_atoms = atom_store.getAtoms()
    with guard("preparing labelled atoms"):
        for chunk in np.split(index, breaks):
            start, stop = int(chunk[0]), int(chunk[-1]) + 1
            rv_block = datastore.copy_range(store_atoms, start, stop)
            observed = datastore.copy_range(store_atoms, start, stop)
            for offset, atom_index in enumerate(range(start, stop)):
                observed[offset] = truth_atoms[truth_lookup[atoms.keys[atom_index]]]
            runs.append((start, rv_block, observed))
    return runs


def truth_rows(spec: ModelSpec, predicate: str) -> list[tuple[Any, ...]]:
    """The arguments of a predicate's truth rows, in the model's order (the rows :func:`set_labels` takes).

    Examples:
        >>> truth_rows(program.spec, "Knows")[0]
        ('alice', 'bob')
    """
    pred = spec.predicate(predicate)
    return [tuple(row) for table in spec.tables(pred.name, "truth") for row in table.args]


def first_bad_label(values: np.ndarray) -> int:
    """The first position of ``values`` that is no label (non-finite, or outside [0, 1]); -1 when all are.

    Examples:
        >>> first_bad_label(np.array([0.0, 1.0, 1.5, np.nan])), first_bad_label(np.array([0.5]))
        (2, -1)
    """
    bad = np.flatnonzero(~np.isfinite(values) | (values < 0.0) | (values > 1.0))
    return int(bad[0]) if bad.size else -1


def set_labels(program: Any, labels: Mapping[str, Any]) -> int:
    """Check every ``{target predicate: values}``, then give the program's labels those values (all or none).

    ``program`` is a :class:`~pslbridge.program.GroundProgram`; ``values`` holds one number in [0, 1] per truth
    row of the predicate, in :func:`truth_rows` order. The ground program is unchanged; learning steps and PSL's
    evaluators read the new labels. A row whose atom is not a random variable of the program has no label, as
    when the program was grounded (:meth:`Labels.row_positions`), so its value is checked and not used.

    Returns:
        How many labels changed.

    Raises:
        ConfigurationError: A predicate without truth rows, or values of another length, non-finite or outside
            [0, 1] (the first such row is named).
        ModelFileError: An unknown predicate.

    Examples:
        >>> spec = ModelSpec.from_python(rules=["1: SlA(X) -> SlB(X) ^2"], predicates={"SlA": 1, "SlB": 1},
        ...     observations={"SlA": [("x", 1.0)]}, targets={"SlB": [("x",)]}, truth={"SlB": [("x", 1.0)]})
        >>> from pslbridge.program import GroundProgram
        >>> with GroundProgram(spec) as relabelled:
        ...     set_labels(relabelled, {"SlB": [0.0]}), relabelled.labels.label_values.tolist()
        (1, [0.0])
    """
    program.check_open()
    checked = []
    for name, value in labels.items():
        pred = program.spec.predicate(str(name))
        try:
            positions = program.labels.row_positions(pred.key)
        except KeyError:
            raise ConfigurationError(
                f"set_labels: {pred.name} has no truth rows in this program; only labels grounded with the program "
                "(its truth partition) can be given new values"
            ) from None
        array = np.asarray(value, dtype=np.float64)
        if array.shape != positions.shape:
            raise ConfigurationError(
                f"set_labels: {pred.name} has {positions.size} truth rows; got values of shape {array.shape}"
            )
        row = first_bad_label(array)
        if row >= 0:
            arguments = ", ".join(map(str, truth_rows(program.spec, pred.name)[row]))
            raise ConfigurationError(
                f"set_labels: {pred.name} truth row {row} ({arguments}) got {array[row]}; a label is a number in [0, 1]"
            )
        keep = positions >= 0
        checked.append((positions[keep], array[keep].astype(np.float32)))
    with program.lock:
        return sum(program.labels.relabel(positions, values) for positions, values in checked)
