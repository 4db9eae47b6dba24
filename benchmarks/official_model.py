"""The ``pslpython.deeppsl.model.DeepModel`` the jar's Python server loads for the official NeuPSL benchmark.

The server imports this file by path (outside the package), so it uses absolute imports only. It wraps
the same Keras network that pslbridge trains (LeNet or the citation dense layer), and its prediction
path avoids pslpython 2.4.1's ``numpy.array(..., copy=False)``, which NumPy 2 rejects, without editing
the installed wheel.

Example:
    >>> OfficialKerasModel.__name__
    'OfficialKerasModel'
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np

try:  # pragma: no cover - only in the benchmark environment
    from pslpython.deeppsl.model import DeepModel as _DeepModel
except ImportError:  # pragma: no cover
    _DeepModel = object  # type: ignore[assignment,misc]


__all__ = ["OfficialKerasModel"]


class OfficialKerasModel(_DeepModel):  # type: ignore[misc,valid-type]
    """The benchmark's network behind pslpython's DeepModel interface (loaded by the jar's Python server).

    Predicate options (from the runtime config): ``network`` (``lenet`` or ``dense``), ``class-size``,
    ``features`` (inputs per entity), ``learning-rate``, ``seed``, ``style``, ``timing-path`` (per
    learning-mode prediction, i.e. per iteration, the time and the seconds this server has spent in its
    handlers so far are appended there) and, for the accuracy comparison, ``save-path`` (the jar calls
    save once learning ends; the weights go there as ``.npz``).

    ``style="paper"`` (default) is how the NeuPSL authors' MNIST-Addition and citation models are
    written: the learning-mode prediction runs eagerly under a persistent ``GradientTape`` and ``fit``
    applies ``tape.gradient(predictions, weights, output_gradients=...)``. ``style="compiled"`` runs
    predict and fit as ``tf.function`` graphs, as pslbridge's ``Trainer`` does, to separate the
    bridge's share of the speed-up from graph compilation's.

    Example:
        >>> model = OfficialKerasModel()
        >>> _ = model.internal_init_model("learning", {"network": "dense", "class-size": "3", "features": "5"})
        >>> model._network.count_params()
        18
    """

    def internal_init_model(self, application: str, options: dict[str, Any] | None = None) -> dict[str, Any]:
        """Build the network (seeded, as pslbridge's worker does) and its optimizer."""
        import keras

        # Absolute import: the jar's server loads this file by path, outside the package.
        from benchmarks.problems import make_network

        options = options or {}
        self._options = dict(options)
        self._server_s = 0.0  # seconds spent in this server's predict and fit handlers
        self._kind = str(options.get("network", "lenet"))
        self._style = str(options.get("style", "paper"))
        self._tape: Any = None
        self._predictions: Any = None
        rate = float(options.get("learning-rate", 1e-3))
        self._network = make_network(
            self._kind, int(options["class-size"]), int(options.get("features", 784)), rate, int(options.get("seed", 0))
        )
        self._optimizer = keras.optimizers.Adam(rate)
        return {}

    def _inputs(self, data: np.ndarray) -> np.ndarray:
        data = np.asarray(data, dtype=np.float32)
        return data.reshape(-1, 28, 28, 1) if self._kind == "lenet" else data

    def _compiled(self) -> tuple[Any, Any]:
        """Graph-compiled predict and fit, as pslbridge's Trainer compiles its own (a fair comparison)."""
        cached = getattr(self, "_functions", None)
        if cached is not None:
            return cached
        import tensorflow as tf

        network, optimizer = self._network, self._optimizer
        optimizer.build(network.trainable_variables)

        @tf.function(reduce_retracing=True)
        def predict(inputs: Any) -> Any:
            return network(inputs, training=False)

        @tf.function(reduce_retracing=True)
        def fit(inputs: Any, upstream: Any) -> None:
            with tf.GradientTape() as tape:
                output = network(inputs, training=True)
            variables = network.trainable_variables
            grads = tape.gradient(output, variables, output_gradients=upstream)
            optimizer.apply_gradients(zip(grads, variables))

        self._functions = (predict, fit)
        return self._functions

    def internal_fit(self, data: np.ndarray, gradients: np.ndarray, options: dict[str, Any] | None = None) -> dict:
        """One backward pass with PSL's ∂energy/∂prediction as output gradients."""
        import tensorflow as tf

        if self._style == "compiled":
            _, fit = self._compiled()
            fit(self._inputs(data), np.asarray(gradients, dtype=np.float32))
            return {}
        variables = self._network.trainable_weights
        upstream = tf.constant(gradients, dtype=tf.float32)
        grads = self._tape.gradient(self._predictions, variables, output_gradients=upstream)
        self._optimizer.apply_gradients(zip(grads, variables))
        return {}

    def internal_predict(self, data: np.ndarray, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        """Class probabilities for the requested entities."""
        import tensorflow as tf

        if self._style == "compiled":
            predict, _ = self._compiled()
            return np.asarray(predict(self._inputs(data))), {}
        if (options or {}).get("learn"):
            with tf.GradientTape(persistent=True) as tape:
                self._predictions = self._network(self._inputs(data), training=True)
            self._tape = tape
            return np.asarray(self._predictions), {}
        return np.asarray(self._network(self._inputs(data), training=False)), {}

    def internal_eval(self, data: np.ndarray, options: dict[str, Any] | None = None) -> dict:
        """Nothing to evaluate here (the benchmark times learning)."""
        return {}

    def internal_save(self, options: dict[str, Any] | None = None) -> dict:
        """Write the weights to ``save-path`` (``.npz``) when the benchmark asked for them."""
        path = (options or {}).get("save-path") or self._options.get("save-path")
        if path:
            np.savez(path, *self._network.get_weights())
        return {}

    def _stamp(self) -> None:
        """Append ``<time> <server seconds so far> <snapshot-saving seconds so far>`` to ``timing-path``.

        Called once per learning iteration. With ``snapshot-dir`` and ``snapshot-every`` it also saves the
        network's weights every that many iterations (``iteration-<k>.npz``, with ``seconds``: learning time
        since the first iteration, the time spent saving snapshots left out).
        """
        now = time.perf_counter()
        folder, every = self._options.get("snapshot-dir"), int(self._options.get("snapshot-every", 0))
        saving = getattr(self, "_saving", 0.0)
        if folder and every:
            count = getattr(self, "_iterations", 0)
            self._iterations = count + 1
            if count == 0:
                self._first, saving = now, 0.0
            if count % every == 0:
                weights = self._network.get_weights()
                seconds = now - self._first - saving
                np.savez(Path(folder) / f"iteration-{count:06d}.npz", *weights, seconds=np.float64(seconds))
                saving += time.perf_counter() - now
            self._saving = saving
        path = self._options.get("timing-path")
        if path:
            with open(path, "a") as handle:
                handle.write(f"{now} {self._server_s} {saving}\n")

    def fit_predicate(self, options: dict[str, Any] | None = None) -> dict:
        """The pslpython handler, timed (reading gradients, assembling the data, fitting)."""
        start = time.perf_counter()
        try:
            return super().fit_predicate(options=options if options is not None else {})
        finally:
            self._server_s += time.perf_counter() - start

    def _predict_predicate(self, learn: bool, options: dict[str, Any] | None = None) -> dict:
        if learn:
            self._stamp()
        start = time.perf_counter()
        try:
            return self._predict_predicate_body(learn, options)
        finally:
            self._server_s += time.perf_counter() - start

    def _predict_predicate_body(self, learn: bool, options: dict[str, Any] | None = None) -> dict:
        # pslpython 2.4.1's version, except numpy.array(..., copy=False), which is an error on NumPy 2.
        options = options or {}
        options["learn"] = learn
        self._shared_buffer.seek(0)
        count = self._read_int()
        entity_indexes = self._read_values(">i4", count)
        data = np.array([self._data[index] for index in entity_indexes])  # as pslpython does
        predictions, response = self.internal_predict(data, options=options)
        self._shared_buffer.seek(0)
        self._write_int(int(options["class-size"]) * len(predictions))
        self._shared_buffer.write(np.asarray(predictions, dtype=">f4").tobytes(order="C"))
        return response
