"""PSL's in-memory data store: partitions, rows, databases, option layers, inference objects and Java arrays.

Examples:
    >>> len(copy_range(new_float_array(3), 0, 2))
    2
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from .classes import REASONERS, J
from .failures import guard

log = logging.getLogger(__name__)


def open_memory_datastore(url: str, predicates: Sequence[Any]) -> tuple[Any, dict[str, Any]]:
    """An in-memory SQLite data store with the predicates registered and its three partitions.

    Examples:
        >>> store, parts = open_memory_datastore("jdbc:sqlite:file:doc?mode=memory&cache=shared", [])
        >>> sorted(parts)
        ['observations', 'targets', 'truth']
        >>> store.close()
    """
    with guard("opening the in-memory database"):
        datastore = J.RDBMSDataStore(J.SQLiteDriver(url, True))
        for predicate in predicates:
            datastore.registerPredicate(predicate)
        partitions = {name: datastore.getPartition(name) for name in ("observations", "targets", "truth")}
    return datastore, partitions


def java_rows(rows: Any) -> Any:
    """A nested Python list as a ``java.util.List`` in one JSON call (per-row calls are slow).

    Examples:
        >>> java_rows([["a", "b"]]).size()
        1
    """
    return J.ObjectMapper().readValue(json.dumps(rows), J.List)


def insert_rows(datastore: Any, predicate: Any, partition: Any, args: list[list[str]], values: Any = None) -> None:
    """Insert argument rows (and truth values) of one predicate into one partition.

    Examples:
        >>> from pslbridge.engine.predicates import declare_predicate, unregister_predicate
        >>> pred = declare_predicate("DocRows", ["UniqueStringID"], deep=False)
        >>> store, parts = open_memory_datastore("jdbc:sqlite:file:docrows?mode=memory&cache=shared", [pred])
        >>> insert_rows(store, pred, parts["observations"], [["a"], ["b"]], [1.0, 0.5])
        >>> db, truth = open_databases(store, parts, [pred])
        >>> int(db.getAtomStore().size())
        2
        >>> db.close(); truth.close(); store.close(); unregister_predicate("DocRows")
    """
    inserter = datastore.getInserter(predicate, partition)
    rows = java_rows(args)
    if values is not None:
        inserter.insertAllValues(java_rows([float(v) for v in values]), rows)
    else:
        inserter.insertAll(rows)


def open_databases(datastore: Any, partitions: Mapping[str, Any], closed: Sequence[Any]) -> tuple[Any, Any]:
    """The target database (targets over observations, ``closed`` predicates closed) and the truth database.

    Examples:
        >>> store, parts = open_memory_datastore("jdbc:sqlite:file:docdb?mode=memory&cache=shared", [])
        >>> db, truth = open_databases(store, parts, [])
        >>> int(db.getAtomStore().size())
        0
        >>> db.close(); truth.close(); store.close()
    """
    closed_set = J.HashSet()
    for predicate in closed:
        closed_set.add(predicate)
    db = datastore.getDatabase(partitions["targets"], closed_set, partitions["observations"])
    truth = datastore.getDatabase(partitions["truth"], datastore.getRegisteredPredicates())
    return db, truth


@contextlib.contextmanager
def config_layer(options: Mapping[str, str]) -> Iterator[None]:
    """PSL options set on a fresh configuration layer for the duration of the block.

    Examples:
        >>> with config_layer({"admmreasoner.maxiterations": "7"}):
        ...     str(J.Config.getString("admmreasoner.maxiterations", None))
        '7'
        >>> J.Config.getString("admmreasoner.maxiterations", None) is None
        True
    """
    J.Config.pushLayer()
    try:
        for key, value in options.items():
            J.Config.setProperty(key, value, False)
        yield
    finally:
        J.Config.popLayer()


def option_value(key: str) -> str | None:
    """A PSL option's current value, or None when unset.

    Examples:
        >>> option_value("parallel.numthreads") is not None
        True
    """
    value = J.Config.getString(key, None)
    return None if value is None else str(value)


def clear_option(key: str) -> None:
    """Unset a process-wide PSL option.

    Examples:
        >>> clear_option("pslbridge.never.set")
    """
    J.Config.clearProperty(key, False)


def new_inference(reasoner: str, rules: Sequence[Any], database: Any) -> Any:
    """The inference application of ``reasoner`` (a key of :data:`REASONERS`); it grounds ``rules``.

    Examples:
        >>> program.solver.app.getClass().getSimpleName()  # what GroundProgram built with it
        'ADMMInference'
    """
    rule_list = J.ArrayList()
    for rule in rules:
        rule_list.add(rule)
    return getattr(J, REASONERS[reasoner])(rule_list, database)


def join_texts(java_objects: Any, count: int, delimiter: str) -> str:
    """``toString()`` of the first ``count`` objects of a Java array, joined in one Java call.

    Examples:
        >>> join_texts(J.ArrayList().toArray(), 0, "|")
        ''
    """
    if count == 0:
        return ""
    return str(J.PslStringUtils.join(delimiter, J.Arrays.copyOf(java_objects, count)))


def term_objects(term_store: Any) -> Any:
    """The term store's terms as a Java ``Object[]`` (read through the store's own list).

    Examples:
        >>> len(term_objects(program.solver.term_store)) == program.term_count
        True
    """
    field = J.SimpleTermStore.class_.getDeclaredField("terms")
    field.setAccessible(True)
    return field.get(term_store).toArray()


def new_float_array(size: int) -> Any:
    """A zeroed Java ``float[]``.

    Examples:
        >>> len(new_float_array(3))
        3
    """
    import jpype

    return jpype.JArray(jpype.JFloat)(int(size))


def copy_range(java_array: Any, start: int, stop: int) -> Any:
    """A copy of ``java_array[start:stop]`` as a Java array of the same type.

    Examples:
        >>> list(copy_range(J.Arrays.asList(1, 2, 3).toArray(), 1, 3))
        [2, 3]
    """
    return J.Arrays.copyOfRange(java_array, int(start), int(stop))


def array_copy(source: Any, target: Any, start: int) -> None:
    """``System.arraycopy`` of all of ``source`` into ``target`` from ``start``.

    Examples:
        >>> target = new_float_array(3); array_copy(new_float_array(2), target, 1)
    """
    J.System.arraycopy(source, 0, target, int(start), len(source))


def assume_values(observed: Any, offsets: list[int], values: list[float]) -> None:
    """Give the observed atoms ``observed[offsets]`` new truth values (PSL's ``ObservedAtom._assumeValue``).

    Examples:
        >>> assume_values(J.ArrayList().toArray(), [], [])
    """
    for offset, value in zip(offsets, values, strict=True):
        observed[offset]._assumeValue(value)


def float32(value: float) -> float:
    """A value rounded to Java's ``float`` (PSL stores rule weights as ``float``).

    Examples:
        >>> float32(0.1)
        0.10000000149011612
    """
    return float(np.float32(value))
