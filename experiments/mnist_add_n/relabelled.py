"""Abduced one-place additions trained on resident programs relabelled per batch, grounded once per size.

With every target of a one-place addition labelled (``label_totals`` and ``label_carry_in`` of
:func:`~experiments.mnist_add_n.model.addition_n_spec`), the ground programs of any two batches of the same
number of places differ only in their labels and in which images their digits are. :class:`RelabelledPlaces`
grounds one program per batch size, with place ``k``'s two digits as entities ``2k`` and ``2k + 1``, and serves
each batch as that program, its images and its labels (:meth:`pslbridge.Bridge.set_labels` before each step).
The batches hold the same places as :func:`pslbridge.batching.component_batches` would make of the places'
own program with the same seed, and each step reads the same energy and gradient; no abduction round grounds.

Example:
    >>> from experiments.mnist_add_n.model import AdditionsN
    >>> places = AdditionsN(np.arange(10).reshape(5, 2, 1), np.arange(10), np.zeros((5, 2, 1), dtype=int),
    ...                     np.array([[3, 0], [7, 1], [0, 1], [9, 0], [5, 1]]), np.array([0, 1, 1, 0, 0]))
    >>> with RelabelledPlaces() as programs:
    ...     batches = programs.batches(places, np.eye(10, 4), per_batch=2, seed=0)
    ...     [(len(inputs["Neural"][0]), int(labels["SumDigit"].sum())) for _, inputs, labels in batches]
    [(4, 2), (4, 2), (2, 1)]
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pslbridge import Bridge
from pslbridge.neural_inputs import entity_keys

from .model import AdditionsN, addition_n_spec

__all__ = ["RelabelledPlaces", "batch_places"]


def batch_places(count: int, per_batch: int, seed: int | None) -> list[np.ndarray]:
    """The places of each batch, as :func:`pslbridge.batching.component_specs` groups one-place additions.

    Each one-place addition is one component, numbered in order; the components are shuffled with ``seed`` and
    cut into batches of ``per_batch`` (the last may hold fewer), each in ascending order.

    Example:
        >>> [b.tolist() for b in batch_places(5, 2, seed=None)]
        [[0, 1], [2, 3], [4]]
    """
    order = np.arange(count) if seed is None else np.random.default_rng(seed).permutation(count)
    return [np.sort(order[start : start + per_batch]) for start in range(0, count, per_batch)]


class RelabelledPlaces:
    """One resident program of one-place additions per batch size, relabelled for each batch.

    Args:
        form: A key of :data:`~experiments.mnist_add_n.model.FORMS`.
        **bridge_kwargs: For :class:`pslbridge.Bridge` (``reasoner=``, ``options=``).

    Example:
        >>> with RelabelledPlaces() as programs:
        ...     programs.bridge(3).neural_shape("Neural")
        (6, 10)
    """

    def __init__(self, form: str = "pairs", **bridge_kwargs: Any) -> None:
        self.form, self.bridge_kwargs = form, bridge_kwargs
        self._bridges: dict[int, Bridge] = {}
        self._rows: dict[int, dict[str, np.ndarray]] = {}  # per size: each label predicate's truth rows
        self._keys: dict[int, list[Any]] = {}  # per size: the program's entities, in its row order

    def bridge(self, size: int) -> Bridge:
        """The program of ``size`` places (grounded on first use): place ``k``'s digits are entities 2k, 2k+1."""
        if size not in self._bridges:
            slots = AdditionsN(
                np.arange(2 * size).reshape(size, 2, 1),
                np.arange(2 * size),
                np.zeros((size, 2, 1), dtype=np.int64),
                np.zeros((size, 2), dtype=np.int64),
                np.zeros(size, dtype=np.int64),
            )
            spec = addition_n_spec(slots, form=self.form, label_totals=True, label_carry_in=True)
            bridge = Bridge(spec, **self.bridge_kwargs)
            self._bridges[size] = bridge
            self._rows[size] = {
                name: np.asarray(bridge.truth_rows(name), dtype=np.int64) for name in ("SumDigit", "Carry", "PlaceSum")
            }
            self._keys[size] = entity_keys(bridge.entities("Neural"))
        return self._bridges[size]

    def labels(self, places: AdditionsN) -> dict[str, np.ndarray]:
        """The labels of ``places`` (a batch) for :meth:`bridge` of their number, in its truth rows' order."""
        size = places.n_additions
        self.bridge(size)
        digit, carry_out = places.sum_digits[:, 0], places.sum_digits[:, 1]
        carry_in = np.zeros(size, dtype=np.int64) if places.carry_in is None else places.carry_in
        rows = self._rows[size]
        a, d = rows["SumDigit"][:, 0], rows["SumDigit"][:, 2]
        out = {"SumDigit": (digit[a] == d).astype(np.float32)}
        a, p, c = rows["Carry"].T
        out["Carry"] = (np.where(p == 0, carry_in[a], carry_out[a]) == c).astype(np.float32)
        a, z = rows["PlaceSum"][:, 0], rows["PlaceSum"][:, 2]
        out["PlaceSum"] = (digit[a] + 10 * carry_out[a] == z).astype(np.float32)
        return out

    def batches(
        self, places: AdditionsN, images: np.ndarray, per_batch: int, seed: int | None
    ) -> list[tuple[Bridge, dict[str, tuple[list[Any], np.ndarray]], dict[str, np.ndarray]]]:
        """``(bridge, inputs, labels)`` per batch of ``places``: what :class:`pslbridge.keras.ProgramData` takes.

        Args:
            places: One-place additions with a carry in (:func:`~experiments.mnist_add_n.model.abduced_places`).
            images: The network's input of each entity of ``places`` (row ``e`` for entity ``e``).
            per_batch: Places per batch.
            seed: As :func:`batch_places`.
        """
        out = []
        for batch in batch_places(places.n_additions, per_batch, seed):
            chosen = places.take(batch)
            bridge = self.bridge(chosen.n_additions)
            keys = self._keys[chosen.n_additions]
            slot = np.asarray(keys, dtype=np.int64)
            entity = chosen.images[slot // 2, slot % 2, 0]
            out.append((bridge, {"Neural": (keys, np.asarray(images)[entity])}, self.labels(chosen)))
        return out

    def close(self) -> None:
        """Close the programs."""
        for bridge in self._bridges.values():
            bridge.close()
        self._bridges.clear()

    def __enter__(self) -> RelabelledPlaces:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
