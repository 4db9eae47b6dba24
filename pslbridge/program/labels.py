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

from typing import Any

import numpy as np

from ..engine import datastore
from ..engine.failures import guard
from ..model import ModelSpec
from .atoms import DELIMITER, AtomIndex

__all__ = ["Labels"]


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
        index, values = _labels(spec, atoms)
        self.label_index = index
        self.label_values = values
        self.latent_count = int(sum(len(t.index) for t in atoms.targets.values())) - int(index.size)
        self._runs = _runs(index, atoms, atom_store, truth_store)
        self.fixed = False

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


def _labels(spec: ModelSpec, atoms: AtomIndex) -> tuple[np.ndarray, np.ndarray]:
    index_parts, value_parts = [], []
    for key in atoms.targets:
        pred = spec.predicates[key]
        for table in spec.tables(pred.name, "truth"):
            if len(table) == 0:
                continue
            idx = atoms.find(pred, table.args)
            keep = idx >= 0
            keep[keep] = atoms.rv_mask[idx[keep]]  # labels of random variables only (as PSL's training map)
            values = table.values if table.values is not None else np.ones(len(table))
            index_parts.append(idx[keep])
            value_parts.append(values[keep].astype(np.float32))
    if not index_parts:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32)
    index, values = np.concatenate(index_parts), np.concatenate(value_parts)
    order = np.argsort(index, kind="stable")
    index, values = index[order], values[order]
    unique, first = np.unique(index, return_index=True)
    return unique, values[first]


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
