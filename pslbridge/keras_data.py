"""The training data of :class:`pslbridge.keras.NeuPSLModel`: ground programs with their networks' inputs.

:class:`ProgramData` is what ``fit`` and ``evaluate`` take: one Keras batch per program, each with the inputs of
its entities and, optionally, its own labels (one resident program can serve many batches of one shape).
:func:`keras_views` hands Keras a view of it that is released when the call returns.

Examples:
    >>> from pslbridge import Bridge
    >>> from pslbridge.examples.mnist_addition import add1_spec
    >>> with Bridge(add1_spec([(0, 1)], sums=[3], phase="learn")) as b:
    ...     len(ProgramData([(b, {"Neural": np.zeros((2, 4))})], passes=2))
    2
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import keras
import numpy as np

from .bridge import Bridge
from .errors import ConfigurationError, ModelFileError
from .neural_inputs import align_rows
from .program.labels import first_bad_label

__all__ = ["ProgramData", "keras_views"]


class ProgramData(keras.utils.PyDataset):
    """The training data of a :class:`NeuPSLModel`: programs and their networks' inputs, one per Keras batch.

    Args:
        batches: ``(bridge, {neural predicate: inputs})`` per program; inputs have one row per entity, in
            :meth:`pslbridge.Bridge.entities` order, or are ``(entity_ids, inputs)`` (put into that order). A
            third item, ``{target predicate: values}``, gives the program's labels for this batch
            (:meth:`pslbridge.Bridge.set_labels`, set before each of its steps): one bridge can then serve
            many batches of the same shape without grounding again.
        passes: Passes over the programs per Keras epoch.
        shuffle: Visit the programs in a new random order every pass.
        seed: Seed of the order.

    Raises:
        ConfigurationError: No program, inputs that do not cover a program's neural predicates or rows, or
            labels that do not fit a program's truth rows.

    Examples:
        >>> from pslbridge import Bridge
        >>> from pslbridge.examples.mnist_addition import add1_spec
        >>> with Bridge(add1_spec([(0, 1)], sums=[3], phase="learn")) as b:
        ...     data = ProgramData([(b, {"Neural": np.zeros((2, 4))})], passes=3)
        ...     len(data), sorted(data[0])
        (3, ['Neural', 'program'])
        >>> with Bridge(add1_spec([(0, 1)], sums=[3], phase="learn")) as b:  # one program, two labellings
        ...     sums = [[float(row[-1] == str(total)) for row in b.truth_rows("ImageSum")] for total in (3, 5)]
        ...     data = ProgramData([(b, {"Neural": np.zeros((2, 4))}, {"ImageSum": s}) for s in sums])
        ...     len(data), data.prepared(1) is b, int(b.program.labels.label_values.argmax())
        (2, True, 5)
    """

    def __init__(
        self,
        batches: Sequence[tuple[Bridge, Mapping[str, Any]] | tuple[Bridge, Mapping[str, Any], Mapping[str, Any]]],
        *,
        passes: int = 1,
        shuffle: bool = True,
        seed: int = 0,
    ) -> None:
        super().__init__()
        if not batches:
            raise ConfigurationError("ProgramData needs at least one (bridge, inputs) pair")
        if not isinstance(passes, int) or passes < 1:
            raise ConfigurationError(f"passes must be an integer >= 1, got {passes!r}")
        self.bridges = [batch[0] for batch in batches]
        self.inputs = []
        self.labels: list[dict[str, np.ndarray] | None] = []
        truth_counts: dict[tuple[int, str], int] = {}
        for k, batch in enumerate(batches):
            if len(batch) not in (2, 3):
                raise ConfigurationError(
                    f"program {k}: give (bridge, inputs) or (bridge, inputs, labels), got {len(batch)} items"
                )
            bridge, inputs = batch[0], batch[1]
            self.labels.append(None if len(batch) == 2 else _checked_labels(k, bridge, batch[2], truth_counts))
            names = {p.upper(): p for p in bridge.neural_predicates}
            if {n.upper() for n in inputs} != set(names):
                raise ConfigurationError(
                    f"program {k}: give inputs for exactly its neural predicates {sorted(names.values())}, "
                    f"got {sorted(inputs)}"
                )
            arrays = {}
            for name, value in inputs.items():
                if isinstance(value, tuple) and len(value) == 2:  # (entity ids, inputs): put into entity order
                    value = align_rows(name, list(value[0]), np.asarray(value[1]), bridge.entities(name))
                array = np.asarray(value)
                rows = bridge.neural_shape(name)[0]
                if array.shape[0] != rows:
                    raise ConfigurationError(f"program {k}: inputs for {name} have {array.shape[0]} rows, not {rows}")
                arrays[names[name.upper()]] = array
            self.inputs.append(arrays)
        self.passes, self.shuffle = passes, shuffle
        self._rng = np.random.default_rng(seed)
        self._order = self._new_order()

    def _new_order(self) -> np.ndarray:
        n = len(self.bridges)
        parts = [self._rng.permutation(n) if self.shuffle else np.arange(n) for _ in range(self.passes)]
        return np.concatenate(parts)

    def __len__(self) -> int:
        return len(self.bridges) * self.passes

    def __getitem__(self, index: int) -> dict[str, np.ndarray]:
        k = int(self._order[index])
        return {"program": np.array([k], dtype=np.int32), **self.inputs[k]}

    def prepared(self, k: int) -> Bridge:
        """Program ``k``'s bridge, its labels for this batch set (when it has its own): what its step runs on.

        Examples:
            >>> from pslbridge import Bridge
            >>> from pslbridge.examples.mnist_addition import add1_spec
            >>> with Bridge(add1_spec([(0, 1)], sums=[3], phase="learn")) as b:
            ...     ProgramData([(b, {"Neural": np.zeros((2, 4))})]).prepared(0) is b
            True
        """
        bridge, labels = self.bridges[k], self.labels[k]
        if labels is not None:
            bridge.set_labels(labels)
        return bridge

    def on_epoch_end(self) -> None:
        """A new visiting order for the next epoch."""
        self._order = self._new_order()

    def order_state(self) -> dict[str, Any]:
        """The visiting order of the coming epoch and its generator's state (what a checkpoint keeps).

        Examples:
            >>> from pslbridge import Bridge
            >>> from pslbridge.examples.mnist_addition import add1_spec
            >>> with Bridge(add1_spec([(0, 1)], sums=[3], phase="learn")) as b:
            ...     data = ProgramData([(b, {"Neural": np.zeros((2, 4))})], passes=2)
            ...     state = data.order_state()
            ...     data.on_epoch_end(); data.restore_order(state)
            ...     data.order_state()["order"].tolist() == state["order"].tolist()
            True
        """
        return {"rng": self._rng.bit_generator.state, "order": self._order.copy()}

    def restore_order(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`order_state` (the next epoch visits the programs as the saved one would have).

        Raises:
            ConfigurationError: The order is for another number of programs or passes.
        """
        order = np.asarray(state["order"], dtype=np.int64)
        if order.shape != self._order.shape or (order.size and order.max() >= len(self.bridges)):
            raise ConfigurationError(f"a visiting order of shape {order.shape} does not fit these programs")
        self._rng.bit_generator.state = state["rng"]
        self._order = order


def _checked_labels(
    k: int, bridge: Bridge, labels: Mapping[str, Any], counts: dict[tuple[int, str], int]
) -> dict[str, np.ndarray]:
    """Program ``k``'s labels as float32 arrays, one per truth row of each predicate (``counts`` caches those)."""
    out = {}
    for name, value in labels.items():
        key = (id(bridge), str(name).upper())
        if key not in counts:
            try:
                counts[key] = len(bridge.truth_rows(str(name)))
            except ModelFileError as exc:
                raise ConfigurationError(f"program {k}: labels for {name!r}: {exc.message}") from None
        array = np.asarray(value, dtype=np.float32)
        if array.shape != (counts[key],):
            raise ConfigurationError(
                f"program {k}: labels for {name} need one value per truth row ({counts[key]}), got shape {array.shape}"
            )
        row = first_bad_label(array)
        if row >= 0:
            raise ConfigurationError(
                f"program {k}: labels for {name}: truth row {row} got {array[row]}; a label is a number in [0, 1]"
            )
        out[str(name)] = array
    return out


class _KerasView(keras.utils.PyDataset):
    """What Keras iterates for a :class:`ProgramData`: the same batches, until :meth:`release` drops the data.

    Keras 3 on TensorFlow keeps every dataset given to ``fit`` or ``evaluate`` alive after the call (the
    ``tf.data`` generator it builds is never freed), so each call's ProgramData, with its copy of every program's
    inputs, would stay in memory for the life of the process. Keras gets this view instead, released when the
    call returns: what stays behind is the empty view.
    """

    def __init__(self, data: ProgramData) -> None:
        super().__init__()
        self.data: ProgramData | None = data

    def __len__(self) -> int:
        return 0 if self.data is None else len(self.data)

    def __getitem__(self, index: int) -> dict[str, np.ndarray]:
        if self.data is None:
            raise IndexError("this view of a ProgramData was released when its fit or evaluate returned")
        return self.data[index]

    def on_epoch_begin(self) -> None:
        if self.data is not None:
            self.data.on_epoch_begin()

    def on_epoch_end(self) -> None:
        if self.data is not None:
            self.data.on_epoch_end()

    def release(self) -> None:
        self.data = None


@contextmanager
def keras_views(data: ProgramData, kwargs: dict[str, Any]) -> Iterator[_KerasView]:
    """A view of ``data`` for Keras, and of ``kwargs["validation_data"]`` in place if given; released on exit.

    Examples:
        >>> from pslbridge import Bridge
        >>> from pslbridge.examples.mnist_addition import add1_spec
        >>> with Bridge(add1_spec([(0, 1)], sums=[3], phase="learn")) as b:
        ...     data = ProgramData([(b, {"Neural": np.zeros((2, 4))})])
        ...     with keras_views(data, {}) as view:
        ...         inside = len(view)
        ...     inside, len(view)
        (1, 0)
    """
    views = [_KerasView(data)]
    if kwargs.get("validation_data") is not None:
        views.append(_KerasView(kwargs["validation_data"]))
        kwargs["validation_data"] = views[1]
    try:
        yield views[0]
    finally:
        for view in views:
            view.release()
