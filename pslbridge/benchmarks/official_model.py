"""The ``pslpython.deeppsl.model.DeepModel`` the jar's Python server loads for the official NeuPSL benchmark.

The server imports this file by path (outside the package), so it uses absolute imports only. It wraps
the same Keras LeNet that pslbridge trains, and its prediction path avoids pslpython 2.4.1's
``numpy.array(..., copy=False)``, which NumPy 2 rejects, without editing the installed wheel.

Example:
    >>> OfficialLeNetModel  # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any

import numpy as np

try:  # pragma: no cover - only in the benchmark environment
    from pslpython.deeppsl.model import DeepModel as _DeepModel
except ImportError:  # pragma: no cover
    _DeepModel = object  # type: ignore[assignment,misc]


__all__ = ["OfficialLeNetModel"]


class OfficialLeNetModel(_DeepModel):  # type: ignore[misc,valid-type]
    """The paper's LeNet behind pslpython's DeepModel interface (loaded by the jar's Python server).

    Example:
        >>> OfficialLeNetModel  # doctest: +SKIP
    """

    def internal_init_model(self, application: str, options: dict[str, Any] | None = None) -> dict[str, Any]:
        """Build the network (seeded) and its optimizer."""
        import keras

        # Absolute imports: the jar's server loads this file by path, outside the package.
        from pslbridge.experiments.mnist_add import lenet
        from pslbridge.training import set_seed

        options = options or {}
        set_seed(int(options.get("seed", 0)))
        self._network = lenet(10, float(options.get("learning-rate", 1e-3)))
        self._optimizer = keras.optimizers.Adam(float(options.get("learning-rate", 1e-3)))
        return {}

    def _inputs(self, data: np.ndarray) -> np.ndarray:
        return np.asarray(data, dtype=np.float32).reshape(-1, 28, 28, 1)

    def internal_fit(self, data: np.ndarray, gradients: np.ndarray, options: dict[str, Any] | None = None) -> dict:
        """One backward pass with PSL's ∂energy/∂prediction as output gradients."""
        import tensorflow as tf

        with tf.GradientTape() as tape:
            predictions = self._network(self._inputs(data), training=True)
        variables = self._network.trainable_variables
        grads = tape.gradient(predictions, variables, output_gradients=tf.constant(gradients, dtype=predictions.dtype))
        self._optimizer.apply_gradients(zip(grads, variables))
        return {}

    def internal_predict(self, data: np.ndarray, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        """Class probabilities for the requested entities."""
        return np.asarray(self._network(self._inputs(data), training=False)), {}

    def internal_eval(self, data: np.ndarray, options: dict[str, Any] | None = None) -> dict:
        """Nothing to evaluate here (the benchmark times learning)."""
        return {}

    def internal_save(self, options: dict[str, Any] | None = None) -> dict:
        """Nothing is saved by the benchmark."""
        return {}

    def _predict_predicate(self, learn: bool, options: dict[str, Any] | None = None) -> dict:
        # pslpython 2.4.1's version calls numpy.array(..., copy=False), an error on NumPy 2.
        options = options or {}
        options["learn"] = learn
        self._shared_buffer.seek(0)
        count = self._read_int()
        entity_indexes = self._read_values(">i4", count)
        data = np.asarray(self._data)[np.asarray(entity_indexes, dtype=np.int64)]
        predictions, response = self.internal_predict(data, options=options)
        self._shared_buffer.seek(0)
        self._write_int(int(options["class-size"]) * len(predictions))
        self._shared_buffer.write(np.asarray(predictions, dtype=">f4").tobytes(order="C"))
        return response
