"""Validating neural prediction arrays before anything crosses into Java.

Accepts numpy arrays and array-likes in entity order, TensorFlow/Keras tensors (anything with
``.numpy()``), ``(entity_ids, array)`` pairs and pandas DataFrames indexed by entity (both
reordered to the program's entity order, every entity exactly once). Everything becomes a
C-contiguous float32 array of shape ``(n_entities, n_classes)`` or a
:class:`~pslbridge.errors.NeuralInputError` naming the predicate and what was expected.

Examples:
    >>> import numpy as np
    >>> as_prediction_array("Digit", np.full((2, 3), 1 / 3), (2, 3)).dtype
    dtype('float32')
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from .errors import NeuralInputError

__all__ = ["align_rows", "as_prediction_array", "check_range", "entity_keys"]

_TOLERANCE = 1e-6


def _from_tensor(name: str, value: Any) -> Any:
    device = getattr(value, "device", None)
    if callable(getattr(value, "detach", None)):  # a torch tensor: leave its graph, then read it
        value = value.detach()
    if hasattr(value, "numpy") and callable(value.numpy):
        try:
            return value.numpy()
        except Exception as exc:  # noqa: BLE001 - framework-specific failures
            raise NeuralInputError(
                f"cannot read the tensor (device {device!r}) into host memory: {exc}; move it to the CPU first",
                predicate=name,
            ) from exc
    return value


def entity_keys(entities: pd.DataFrame) -> list[Any]:
    """The program's entities as lookup keys: a string per entity (a tuple of strings for several arguments).

    Examples:
        >>> entity_keys(pd.DataFrame({"arg0": ["a", "b"]}))
        ['a', 'b']
    """
    if entities.shape[1] == 1:
        return entities.iloc[:, 0].astype(str).tolist()
    return [tuple(map(str, row)) for row in entities.itertuples(index=False)]


def align_rows(name: str, ids: Sequence[Any], rows: Any, entities: pd.DataFrame) -> Any:
    """Reorder ``rows`` (given for the entities ``ids``, in that order) into the program's entity order.

    Args:
        name: The neural predicate (for messages).
        ids: One entity id per row of ``rows`` (a tuple for an entity of several arguments).
        rows: An array-like with one row per id (predictions, or a network's inputs).
        entities: The program's entity rows (:meth:`pslbridge.Bridge.entities`).

    Returns:
        ``rows`` as a numpy array, reordered.

    Raises:
        NeuralInputError: Ids and rows differ in number, an id repeats, or the ids are not exactly the program's
            entities (the first missing and the first unknown one are named).

    Examples:
        >>> align_rows("Digit", ["b", "a"], np.array([[0.9], [0.1]]), pd.DataFrame({"arg0": ["a", "b"]})).tolist()
        [[0.1], [0.9]]
        >>> align_rows("Digit", ["a", "c"], np.zeros((2, 1)), pd.DataFrame({"arg0": ["a", "b"]}))
        Traceback (most recent call last):
        ...
        pslbridge.errors.NeuralInputError: neural predicate 'Digit': ...lacks entity 'b' ...; 'c' is not one of ...
    """
    keys = [tuple(map(str, i)) if isinstance(i, (tuple, list)) else str(i) for i in ids]
    keys = [k[0] if isinstance(k, tuple) and len(k) == 1 and entities.shape[1] == 1 else k for k in keys]
    array = np.asarray(rows)
    if len(keys) != len(array):
        raise NeuralInputError(f"{len(keys)} entity ids for {len(array)} rows", predicate=name)
    position = {}
    for i, key in enumerate(keys):
        if key in position:
            raise NeuralInputError(f"entity {key!r} is given twice (rows {position[key]} and {i})", predicate=name)
        position[key] = i
    wanted = entity_keys(entities)
    missing = [k for k in wanted if k not in position]
    unknown = [k for k in keys if k not in set(wanted)]
    if missing or unknown:
        parts = []
        if missing:
            parts.append(f"lacks entity {missing[0]!r} ({len(missing)} missing)")
        if unknown:
            parts.append(f"{unknown[0]!r} is not one of the program's {len(wanted)} entities ({len(unknown)} unknown)")
        raise NeuralInputError("the rows' entity ids " + "; ".join(parts), predicate=name)
    return array[np.asarray([position[k] for k in wanted], dtype=np.int64)]


def as_prediction_array(
    name: str,
    value: Any,
    shape: tuple[int, int],
    entities: pd.DataFrame | None = None,
    classes: Sequence[str] | None = None,
) -> np.ndarray:
    """Validate and convert one neural predicate's predictions.

    Args:
        name: The neural predicate (for messages).
        value: The predictions.
        shape: Expected ``(n_entities, n_classes)``.
        entities: The program's entity rows (to align a DataFrame by its index).
        classes: The class labels (to align a DataFrame's columns).

    Returns:
        A C-contiguous float32 array of ``shape``.

    Raises:
        NeuralInputError: Wrong type, shape, dtype, NaN/inf, or values outside [0, 1].

    Examples:
        >>> as_prediction_array("Digit", [[0.5, 2.0]], (1, 2))  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        pslbridge.errors.NeuralInputError: neural predicate 'Digit': values must lie in [0, 1]; got 2.0 at row 0, ...
    """
    if isinstance(value, pd.DataFrame):
        value = _align_frame(name, value, entities, classes)
    elif isinstance(value, tuple) and len(value) == 2 and entities is not None and np.ndim(value[1]) == 2:
        ids, rows = value  # (entity ids, one row per id); a tuple of two prediction rows has a 1-d second item
        value = align_rows(name, list(ids), _from_tensor(name, rows), entities)
    value = _from_tensor(name, value)
    if isinstance(value, (str, bytes)) or value is None:
        raise NeuralInputError(f"expected an array of shape {shape}, got {type(value).__name__}", predicate=name)
    try:
        array = np.asarray(value)
    except (TypeError, ValueError) as exc:
        raise NeuralInputError(f"cannot turn {type(value).__name__} into an array: {exc}", predicate=name) from exc
    if array.dtype == object or not (np.issubdtype(array.dtype, np.number) or array.dtype == np.bool_):
        raise NeuralInputError(f"expected a numeric array, got dtype {array.dtype}", predicate=name)
    if np.issubdtype(array.dtype, np.complexfloating):
        raise NeuralInputError(f"expected real numbers, got dtype {array.dtype}", predicate=name)
    if array.ndim == 1 and shape[1] == 1 and array.shape[0] == shape[0]:
        array = array.reshape(shape)
    if array.shape != tuple(shape):
        raise NeuralInputError(f"expected shape {tuple(shape)} (entities x classes), got {array.shape}", predicate=name)
    array = np.ascontiguousarray(array, dtype=np.float32)
    finite = np.isfinite(array)
    if not finite.all():
        row, col = np.argwhere(~finite)[0]
        raise NeuralInputError(
            f"values must be finite; got {array[row, col]} at row {row}, column {col}", predicate=name
        )
    check_range(name, array)
    low, high = array.min(initial=0.0), array.max(initial=0.0)
    if low < 0.0 or high > 1.0:  # within the tolerance: clip (a new array; the input may be read-only)
        array = np.clip(array, 0.0, 1.0)
    return array


def check_range(name: str, array: np.ndarray) -> None:
    """Refuse probabilities outside [0, 1] (beyond a float32 rounding tolerance); NaN and infinity are not checked.

    Raises:
        NeuralInputError: The first value outside, with its row and column.

    Examples:
        >>> check_range("Digit", np.array([[0.2, 0.8]]))
        >>> check_range("Digit", np.array([[0.2, 1.5]]))
        Traceback (most recent call last):
        ...
        pslbridge.errors.NeuralInputError: neural predicate 'Digit': values must lie in [0, 1]; got 1.5 at row 0, ...
    """
    outside = (array < -_TOLERANCE) | (array > 1.0 + _TOLERANCE)
    if outside.any():
        row, col = np.argwhere(outside)[0]
        raise NeuralInputError(
            f"values must lie in [0, 1]; got {array[row, col]} at row {row}, column {col}", predicate=name
        )


def _align_frame(
    name: str, frame: pd.DataFrame, entities: pd.DataFrame | None, classes: Sequence[str] | None
) -> np.ndarray:
    if entities is None or classes is None:
        return frame.to_numpy()
    keys = entity_keys(entities)
    if entities.shape[1] == 1:
        index = frame.index.astype(str)
    else:
        index = pd.MultiIndex.from_tuples([tuple(map(str, t)) for t in frame.index])
    lookup = pd.Series(np.arange(len(frame)), index=index)
    if lookup.index.has_duplicates:
        raise NeuralInputError("the DataFrame index repeats an entity", predicate=name)
    missing = [k for k in keys if k not in lookup.index]
    if missing:
        raise NeuralInputError(f"the DataFrame lacks {len(missing)} entities, e.g. {missing[0]!r}", predicate=name)
    columns = [str(c) for c in frame.columns]
    if sorted(columns) != sorted(map(str, classes)):
        raise NeuralInputError(f"DataFrame columns {columns} must be the classes {list(classes)}", predicate=name)
    ordered = frame.copy()
    ordered.columns = columns
    rows = lookup.loc[keys].to_numpy()
    return ordered.iloc[rows][list(map(str, classes))].to_numpy()
