"""Where each user row lives in PSL's atom store: target rows, neural blocks and atom names.

PSL orders atoms by its database; users give rows in their own order. The :class:`AtomIndex` reads every
atom's text once (one Java call), and maps rows of a predicate to atom-store indexes, so values move in and
out as whole numpy arrays. A neural predicate's atoms form a :class:`NeuralBlock`: (entities × classes)
indexes aligned with the entity rows the network's predictions must follow.

Examples:
    >>> render_key(PredicateSpec("Knows", 2), np.array([["a", "b"]], dtype=object))
    ["KNOWS('a', 'b')"]
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ..engine import datastore
from ..engine.failures import guard
from ..errors import ModelFileError, NeuralInputError
from ..model import DataTable, ModelSpec, PredicateSpec
from ..model_checks import EntityMap

__all__ = ["DELIMITER", "AtomIndex", "NeuralBlock", "TargetRows", "render_key"]

#: Separates atom texts in the one Java call that renders them all (PSL never writes it).
DELIMITER = "\u001e"


@dataclass
class TargetRows:
    """The target atoms of one open predicate.

    Attributes:
        frame: Argument columns ``arg0 ..``, in the order the user gave the rows.
        index: Atom-store index of each row.

    Examples:
        >>> rows = program.targets["KNOWS"]
        >>> len(rows.frame) == rows.index.size
        True
    """

    frame: pd.DataFrame
    index: np.ndarray


@dataclass
class NeuralBlock:
    """Where a neural predicate's atoms live in the atom-value array.

    Attributes:
        spec: The predicate.
        entities: DataFrame of entity arguments, one row per entity, in row order.
        classes: Class labels in column order.
        index: int64 array (n_entities, n_classes) of atom-store indexes.
        features: Feature matrix aligned with ``entities`` (from the entity-data map) or None.
        start: First index of the contiguous range ``index`` covers, or None when it is not contiguous.
        stop: One past its last index, or None.
        perm: ``index.ravel() - start`` when contiguous (a permutation), else None.

    Examples:
        >>> block = NeuralBlock(PredicateSpec("D", 2), pd.DataFrame({"arg0": ["a"]}), ["0", "1"],
        ...                     np.array([[4, 5]]), None, 4, 6, np.array([0, 1]))
        >>> block.shape
        (1, 2)
    """

    spec: PredicateSpec
    entities: pd.DataFrame
    classes: list[str]
    index: np.ndarray
    features: np.ndarray | None
    start: int | None
    stop: int | None
    perm: np.ndarray | None

    @property
    def shape(self) -> tuple[int, int]:
        """``(entities, classes)``: the prediction array's shape."""
        return int(self.index.shape[0]), int(self.index.shape[1])

    def write(self, java_values: Any, flat: np.ndarray) -> None:
        """Write a validated, flattened (entities × classes) float32 array into the atom-value array."""
        if flat.size == 0:
            return
        if self.perm is not None:
            chunk = np.empty(flat.size, dtype=np.float32)
            chunk[self.perm] = flat
            java_values[self.start : self.stop] = chunk
            return
        index = self.index.ravel()  # scattered atoms (rare): one write per contiguous run of indexes
        order = np.argsort(index, kind="stable")
        index, flat = index[order], flat[order]
        breaks = np.flatnonzero(np.diff(index) != 1) + 1
        for idx, vals in zip(np.split(index, breaks), np.split(flat, breaks)):
            java_values[int(idx[0]) : int(idx[-1]) + 1] = vals


def render_key(spec: PredicateSpec, args: np.ndarray) -> list[str]:
    """PSL's text of each atom ``spec(args row)``, as its ``toString`` writes it.

    Examples:
        >>> render_key(PredicateSpec("N", 1, ["UniqueIntID"]), np.array([["07"]], dtype=object))
        ["N('7')"]
    """
    name = spec.name.upper()
    rendered = [[_render(v, t) for v in args[:, i]] for i, t in enumerate(spec.types)]
    return [f"{name}({', '.join(parts)})" for parts in zip(*rendered)] if len(args) else []


def _render(value: Any, ctype: str) -> str:
    if ctype in ("UniqueIntID", "Integer", "Long"):
        return "'" + str(int(value)) + "'"
    return "'" + str(value).replace("\\", "\\\\").replace("'", "\\'") + "'"


class AtomIndex:
    """Row ↔ atom-store index maps of one grounded program.

    Args:
        spec: The model.
        atom_store: PSL's atom store of the target database.
        entity_maps: Entity-data maps of the neural predicates that have one.
        neural_targets: Generated target tables of neural predicates (entities × classes).

    Examples:
        >>> program.atoms.counts()
        {'KNOWS': 56, 'LIKES': 21, 'LIVED': 12}
    """

    def __init__(
        self,
        spec: ModelSpec,
        atom_store: Any,
        entity_maps: Mapping[str, EntityMap],
        neural_targets: Mapping[str, DataTable],
    ) -> None:
        self.spec = spec
        self._atom_store = atom_store
        self.atom_count = int(atom_store.size())
        self.rv_count = int(atom_store.getMaxRVAIndex()) + 1
        with guard("indexing atoms"):
            text = datastore.join_texts(atom_store.getAtoms(), self.atom_count, DELIMITER)
        keys = text.split(DELIMITER) if self.atom_count else []
        if len(keys) != self.atom_count:
            raise ModelFileError("an argument contains the control character U+001E; remove it from the data")
        self.keys = keys
        self.lookup = {k: i for i, k in enumerate(keys)}
        self.targets: dict[str, TargetRows] = {}
        for pred in spec.predicates.values():
            if spec.is_closed(pred.name) or pred.neural is not None:
                continue
            tables = spec.tables(pred.name, "targets")
            args = np.concatenate([t.args for t in tables]) if tables else np.empty((0, pred.arity), dtype=object)
            frame = pd.DataFrame(args, columns=[f"arg{i}" for i in range(pred.arity)])
            self.targets[pred.key] = TargetRows(frame, self._rows(pred, args))
        self.neural: dict[str, NeuralBlock] = {
            pred.key: self._neural_block(pred, entity_maps.get(pred.key), neural_targets.get(pred.key))
            for pred in spec.neural_predicates
        }
        self.deep_mask = np.zeros(self.atom_count, dtype=bool)
        for block in self.neural.values():
            self.deep_mask[block.index.ravel()] = True
        # Random-variable atoms are exactly the targets (neural ones included); observed atoms of open
        # predicates may sit among them, below rv_count.
        self.rv_mask = self.deep_mask.copy()
        for rows in self.targets.values():
            self.rv_mask[rows.index] = True

    def block(self, predicate: str) -> NeuralBlock:
        """The block of a neural predicate (case-insensitive).

        Raises:
            NeuralInputError: Not a neural predicate of this model.

        Examples:
            >>> program.atoms.block("Knows")
            Traceback (most recent call last):
            ...
            pslbridge.errors.NeuralInputError: neural predicate 'Knows': not a neural predicate of this model; ...
        """
        block = self.neural.get(str(predicate).upper())
        if block is None:
            names = [b.spec.name for b in self.neural.values()] or "none"
            raise NeuralInputError(
                f"not a neural predicate of this model; neural predicates: {names}", predicate=predicate
            )
        return block

    def find(self, spec: PredicateSpec, args: np.ndarray) -> np.ndarray:
        """Atom-store index of each row of ``args`` (-1 where the atom is not in the program).

        Examples:
            >>> program.atoms.find(program.spec.predicate("Knows"), np.array([["alice", "bob"], ["no", "one"]],
            ...                    dtype=object)).tolist()[1]
            -1
        """
        keys = render_key(spec, args)
        return np.fromiter((self.lookup.get(k, -1) for k in keys), dtype=np.int64, count=len(keys))

    def _rows(self, spec: PredicateSpec, args: np.ndarray) -> np.ndarray:
        index = self.find(spec, args)
        missing = np.flatnonzero(index < 0)
        if missing.size:
            key = render_key(spec, args[missing[:1]])[0]
            raise ModelFileError(f"atom {key} was loaded but is not in PSL's atom store", predicate=spec.name)
        return index

    def index_of(self, predicate: str, args: Any) -> int:
        """The atom-store index of ``predicate(args)``, or -1 when the atom is not in the program.

        Raises:
            KeyError: Wrong argument count.

        Examples:
            >>> program.atoms.index_of("Knows", ("alice", "bob")) >= 0
            True
        """
        spec = self.spec.predicate(predicate)
        if len(args) != spec.arity:
            raise KeyError(f"{spec.name} takes {spec.arity} arguments, got {len(args)}: {tuple(args)}")
        return int(self.find(spec, np.asarray([list(map(str, args))], dtype=object))[0])

    def name(self, index: int) -> str:
        """PSL's text of the atom at an atom-store index.

        Examples:
            >>> program.atoms.name(program.atoms.index_of("Knows", ("alice", "bob")))
            "KNOWS('alice', 'bob')"
        """
        return self.keys[index] if 0 <= index < self.atom_count else f"<atom {index}>"

    def kinds(self, indexes: Any) -> list[str]:
        """PSL's class of each atom now (``RandomVariableAtom``, ``ObservedAtom``; labels swap them while fixed).

        Examples:
            >>> rv = int(program.targets["KNOWS"].index[0])
            >>> program.atoms.kinds([rv, program.atom_count - 1])
            ['RandomVariableAtom', 'ObservedAtom']
        """
        atoms = self._atom_store.getAtoms()
        with guard("reading atom kinds"):
            return [str(atoms[int(i)].getClass().getSimpleName()) for i in indexes]

    def counts(self) -> dict[str, int]:
        """Atoms per (upper-cased) predicate name.

        Examples:
            >>> sorted(program.atoms.counts())
            ['KNOWS', 'LIKES', 'LIVED']
        """
        names, counts = np.unique([k.split("(", 1)[0] for k in self.keys], return_counts=True)
        return {str(n): int(c) for n, c in zip(names, counts)}

    def _neural_block(self, spec: PredicateSpec, ent_map: EntityMap | None, generated: DataTable | None) -> NeuralBlock:
        assert spec.neural is not None
        k = spec.neural.class_size
        tables = self.spec.tables(spec.name, "targets")
        args = np.concatenate([t.args for t in tables]) if tables else generated.args  # type: ignore[union-attr]
        if ent_map is not None:
            entities, features = ent_map.entities, ent_map.features
        else:
            entities = pd.DataFrame(args[:, :-1], columns=[f"arg{i}" for i in range(spec.arity - 1)])
            entities, features = entities.drop_duplicates(ignore_index=True), None
        classes = list(dict.fromkeys(args[:, -1].tolist())) or [str(c) for c in range(k)]  # no entities: 0..k-1
        if all(str(c).lstrip("-").isdigit() for c in classes):
            classes = sorted(classes, key=lambda c: int(c))
        if len(classes) != k:
            raise ModelFileError(
                f"neural predicate {spec.name} declares class-size {k} but its atoms use {len(classes)} class "
                f"value(s): {classes[:12]}",
                predicate=spec.name,
                path=self.spec.source,
            )
        ent = entities.to_numpy(dtype=object)
        full = np.empty((len(ent) * k, spec.arity), dtype=object)
        full[:, :-1] = np.repeat(ent, k, axis=0)
        full[:, -1] = np.tile(np.asarray(classes, dtype=object), len(ent))
        index = self.find(spec, full)
        if ent_map is not None:
            # Like NeuPSL: entities of the map without any atom in this program (another split) are skipped.
            present = (index.reshape(len(ent), k) >= 0).any(axis=1)
            if not present.all():
                entities = entities[present].reset_index(drop=True)
                features = None if features is None else features[present]
                full = full.reshape(-1, k, spec.arity)[present].reshape(-1, spec.arity)
                index = index.reshape(-1, k)[present].ravel()
        self._check_block(spec, full, index, len(args), ent_map is not None)
        return _block(spec, entities.reset_index(drop=True), [str(c) for c in classes], index.reshape(-1, k), features)

    def _check_block(self, spec: PredicateSpec, full: np.ndarray, index: np.ndarray, given: int, mapped: bool) -> None:
        assert spec.neural is not None
        if (index < 0).any():
            bad = int(np.flatnonzero(index < 0)[0])
            raise ModelFileError(
                f"neural predicate {spec.name}: entity {tuple(full[bad, :-1])} has no atom for class "
                f"{full[bad, -1]!r}; every entity needs all {spec.neural.class_size} class atoms",
                predicate=spec.name,
                path=spec.neural.entity_data_map_path or self.spec.source,
            )
        if given > index.size and mapped:
            raise ModelFileError(
                f"neural predicate {spec.name} has {given - index.size} target atom(s) for entities missing from "
                "its entity-data map",
                predicate=spec.name,
                path=spec.neural.entity_data_map_path,
            )


def _block(
    spec: PredicateSpec, entities: pd.DataFrame, classes: list[str], index: np.ndarray, features: np.ndarray | None
) -> NeuralBlock:
    flat = index.ravel()
    if flat.size == 0:
        return NeuralBlock(spec, entities, classes, index, features, None, None, None)
    start, stop = int(flat.min()), int(flat.max()) + 1
    if stop - start == flat.size:
        return NeuralBlock(spec, entities, classes, index, features, start, stop, flat - start)
    return NeuralBlock(spec, entities, classes, index, features, None, None, None)
