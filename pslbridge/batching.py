"""Mini-batches by connected component: one model's data split into programs that share no ground rule.

Many NeuPSL models are a union of independent pieces: every MNIST addition, every puzzle, every query is its own
connected component of the ground program. :func:`component_specs` finds those pieces in the model's *data*,
before anything is grounded, and returns one :class:`~pslbridge.model.ModelSpec` per mini-batch of
``per_batch`` components; :func:`component_batches` grounds each as its own resident
:class:`~pslbridge.Bridge` (warm-starting from its previous solve, like any bridge) with the networks' inputs of
its entities, ready for :class:`pslbridge.keras.ProgramData` or a :class:`pslbridge.torch.PSLLoss` loop.

How the pieces are found: the rules' variables tie argument positions together into *domains* (``Img1`` in
``Neural(Img1, X) & ImageSumBlock(Img1, Img2)`` ties ``Neural``'s first argument to ``ImageSumBlock``'s first).
The domains of the neural predicates' entity arguments (plus any named in ``entities=``) are entity domains; every
data row links the entity constants it holds, and the linked sets are the components. Rows without an entity
constant (``DigitSum(X, Y, Z)``: a table of values) are shared: every batch gets them. A target row without an
entity constant would be one atom coupling every component, so such a model is refused.

Memory: every row with an entity constant lands in exactly one batch, so all batches together hold the whole
program's atoms and ground rules once, plus one copy of the shared rows per batch.

Examples:
    >>> from pslbridge.examples.mnist_addition import add1_spec
    >>> specs = component_specs(add1_spec([(0, 1), (2, 3), (4, 5)], sums=[1, 5, 9], phase="learn"), per_batch=2)
    >>> [len(s.tables("ImageSumBlock", "observations")[0]) for s in specs]
    [2, 1]
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .errors import ConfigurationError
from .model import ModelSpec
from .model.parts import DataTable
from .rule_text import rule_atoms

__all__ = ["component_batches", "component_specs", "components"]


class _UnionFind:
    def __init__(self) -> None:
        self.parent: dict[Any, Any] = {}

    def find(self, item: Any) -> Any:
        parent = self.parent.setdefault(item, item)
        while parent != item:
            grand = self.parent[parent]
            self.parent[item] = grand
            item, parent = parent, grand
        return item

    def union(self, a: Any, b: Any) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[rb] = ra


def _is_variable(arg: str) -> bool:
    text = arg.lstrip("+")
    return bool(text) and not text.startswith(("'", '"')) and not text.lstrip("-").replace(".", "").isdigit()


def _entity_positions(
    spec: ModelSpec, entities: Mapping[str, Sequence[int]] | None
) -> dict[str, list[tuple[int, Any]]]:
    """``(position, domain)`` of each argument holding entity constants, by predicate key."""
    domains = _UnionFind()
    for rule in spec.rules:
        where: dict[str, list[tuple[str, int]]] = {}
        for atom in rule_atoms(rule.text):
            for position, arg in enumerate(atom.args):
                if _is_variable(arg):
                    where.setdefault(arg.lstrip("+"), []).append((atom.predicate.upper(), position))
        for positions in where.values():
            for other in positions[1:]:
                domains.union(positions[0], other)
    neural = spec.neural_predicates
    seeds = [(p.key, i) for p in neural for i in p.neural.entity_argument_indexes]  # type: ignore[union-attr]
    for name, positions in (entities or {}).items():
        seeds += [(spec.predicate(name).key, int(i)) for i in positions]
    if not seeds:
        raise ConfigurationError(
            "no entity arguments to split by: the model has no neural predicate; name them with "
            "entities={predicate: [argument positions]}"
        )
    entity_domains = {domains.find(seed) for seed in seeds}
    out = {}
    for pred in spec.predicates.values():
        found = [(i, domains.find((pred.key, i))) for i in range(pred.arity)]
        out[pred.key] = [(i, d) for i, d in found if d in entity_domains]
    return out


def components(spec: ModelSpec, *, entities: Mapping[str, Sequence[int]] | None = None) -> list[np.ndarray]:
    """The component of each row of each of ``spec.data``'s tables (-1: shared by every component).

    Components are numbered by first appearance. See the module's description for how they are found.

    Raises:
        ConfigurationError: Nothing to split by, or a target row holds no entity constant.

    Examples:
        >>> from pslbridge.examples.mnist_addition import add1_spec
        >>> spec = add1_spec([(0, 1), (2, 3)], sums=[1, 5], phase="learn")
        >>> [t.predicate for t in spec.data][:2], [c.tolist()[:3] for c in components(spec)][:2]
        (['ImageSumBlock', 'DigitSum'], [[0, 1], [-1, -1, -1]])
    """
    positions = _entity_positions(spec, entities)
    links = _UnionFind()
    keyed: list[list[list[tuple[Any, str]]]] = []
    for table in spec.data:
        where = positions.get(spec.predicate(table.predicate).key, [])
        # A constant is typed by its domain, not its position: one image in two positions is one entity.
        rows = [[(d, str(row[i])) for i, d in where] for row in table.args] if where else [[]] * len(table)
        keyed.append(rows)
        for nodes in rows:
            for node in nodes[1:]:
                links.union(nodes[0], node)
    numbering: dict[Any, int] = {}
    out = []
    for table, rows in zip(spec.data, keyed):
        ids = np.full(len(table), -1, dtype=np.int64)
        for r, nodes in enumerate(rows):
            if nodes:
                ids[r] = numbering.setdefault(links.find(nodes[0]), len(numbering))
            elif table.partition != "observations":
                raise ConfigurationError(
                    f"predicate {table.predicate} has {table.partition} rows without an entity argument (e.g. "
                    f"{tuple(table.args[r])}): each such atom couples every component, so the program does not split"
                )
        out.append(ids)
    return out


def component_specs(
    spec: ModelSpec,
    per_batch: int,
    *,
    entities: Mapping[str, Sequence[int]] | None = None,
    seed: int | None = None,
) -> list[ModelSpec]:
    """One model per mini-batch of ``per_batch`` components (the last may hold fewer), with the shared rows.

    Args:
        spec: The whole model.
        per_batch: Components per batch (e.g. additions per batch).
        entities: Argument positions holding entities, by predicate, beyond the neural predicates' entity arguments.
        seed: Shuffle the components into batches with this seed (None: in order of first appearance).

    Raises:
        ConfigurationError: ``per_batch`` is not a positive integer, or as :func:`components`.

    Examples:
        >>> from pslbridge.examples.mnist_addition import add1_spec
        >>> spec = add1_spec([(0, 1), (2, 3), (4, 5)], sums=[1, 5, 9], phase="learn")
        >>> [len(s.tables("Neural", "targets")[0]) for s in component_specs(spec, per_batch=1, seed=0)]
        [20, 20, 20]
    """
    if not isinstance(per_batch, int) or per_batch < 1:
        raise ConfigurationError(f"per_batch must be an integer >= 1, got {per_batch!r}")
    ids = components(spec, entities=entities)
    count = max((int(c.max()) for c in ids if len(c)), default=-1) + 1
    order = np.arange(count) if seed is None else np.random.default_rng(seed).permutation(count)
    batch_of = np.empty(count, dtype=np.int64)
    batch_of[order] = np.arange(count) // per_batch
    n_batches = int(np.ceil(count / per_batch))
    # Each table's rows grouped by batch once (in their order within a batch), not one scan per batch.
    rows_of = [_rows_by_batch(np.where(comp >= 0, batch_of[np.maximum(comp, 0)], -1), n_batches) for comp in ids]
    out = []
    for batch in range(n_batches):
        tables = [_rows(table, rows[batch]) for table, rows in zip(spec.data, rows_of)]
        out.append(dataclasses.replace(spec, data=tables, source=f"{spec.source} [batch {batch}]"))
    return out


def _rows_by_batch(row_batch: np.ndarray, n_batches: int) -> list[np.ndarray]:
    """Per batch, the indexes, ascending, of its rows and of the shared rows (``row_batch`` -1)."""
    shared = np.flatnonzero(row_batch < 0)
    own = np.argsort(row_batch, kind="stable")[len(shared) :]  # ascending within a batch: the sort is stable
    bounds = np.searchsorted(row_batch[own], np.arange(1, n_batches))
    return [np.union1d(shared, mine) if len(shared) else mine for mine in np.split(own, bounds)]


def _rows(table: DataTable, keep: np.ndarray) -> DataTable:
    return dataclasses.replace(
        table,
        args=table.args[keep],
        values=None if table.values is None else table.values[keep],
        lines=None if table.lines is None else table.lines[keep],
    )


def component_batches(
    spec: ModelSpec,
    inputs: Mapping[str, tuple[Sequence[Any], Any]],
    per_batch: int,
    *,
    entities: Mapping[str, Sequence[int]] | None = None,
    seed: int | None = None,
    **bridge_kwargs: Any,
) -> list[tuple[Any, dict[str, tuple[list[Any], np.ndarray]]]]:
    """Ground each mini-batch of :func:`component_specs` as a bridge, with its entities' network inputs.

    Args:
        spec: The whole model.
        inputs: ``{neural predicate: (entity ids, inputs)}``, one input row per id, for every entity of the model.
        per_batch: Components per batch.
        entities: As :func:`component_specs`.
        seed: As :func:`component_specs`.
        **bridge_kwargs: For :class:`pslbridge.Bridge` (``reasoner=``, ``options=``, ...).

    Returns:
        ``(bridge, {predicate: (ids, inputs)})`` per batch: what :class:`pslbridge.keras.ProgramData` takes.
        Close the bridges when done.

    Raises:
        NeuralInputError: An entity of a batch has no input row.

    Examples:
        >>> from pslbridge.examples.mnist_addition import add1_spec
        >>> from pslbridge.keras import ProgramData
        >>> spec = add1_spec([(0, 1), (2, 3), (4, 5)], sums=[1, 5, 9], phase="learn")
        >>> batches = component_batches(spec, {"Neural": (range(6), np.eye(6, 4))}, per_batch=2)
        >>> data = ProgramData(batches)
        >>> [b.neural_shape("Neural") for b, _ in batches]
        [(4, 10), (2, 10)]
        >>> for bridge, _ in batches:
        ...     bridge.close()
    """
    from .bridge import Bridge
    from .errors import NeuralInputError
    from .neural_inputs import entity_keys

    rows = {}
    for name, (ids, array) in inputs.items():
        rows[name] = ({str(i): k for k, i in enumerate(ids)}, np.asarray(array))
    out = []
    for batch_spec in component_specs(spec, per_batch, entities=entities, seed=seed):
        bridge = Bridge(batch_spec, **bridge_kwargs)
        batch_inputs = {}
        for name, (index, array) in rows.items():
            keys = entity_keys(bridge.entities(name))
            missing = [k for k in keys if str(k) not in index]
            if missing:
                bridge.close()
                raise NeuralInputError(f"no input row for entity {missing[0]!r}", predicate=name)
            batch_inputs[name] = (keys, array[[index[str(k)] for k in keys]])
        out.append((bridge, batch_inputs))
    return out
