"""Keras callbacks for :class:`~pslbridge.keras.NeuPSLModel`: resuming ``fit`` after a crash.

:class:`BackupAndRestore` is Keras' ``BackupAndRestore`` for a NeuPSL model: after every epoch it writes one
verified checkpoint (:mod:`pslbridge.checkpoints`: arrays and a JSON manifest, no pickle, atomic, the previous
one kept) holding everything the next epoch depends on, and when ``fit`` starts with a checkpoint present it
restores all of it and continues after the epoch it recorded. Kept: every network weight (trainable or not, such
as a :class:`~pslbridge.keras.ClassBalance` running mean), the optimizer's state, the learned rule weights and
the weight optimizer's step count, each training program's atom values (the warm start of its next solve) and
the programs' visiting order, and Python's and numpy's random states (Keras' ``fit(shuffle=True)`` draws the
batch order from Python's). Not kept: Keras' ``History`` of the epochs before the crash (as with Keras' own
callback) and random streams inside the networks (dropout), so a network with dropout resumes close to, not
exactly on, the uninterrupted run.

Examples:
    >>> import tempfile, keras
    >>> from pslbridge import Bridge
    >>> from pslbridge.examples.mnist_addition import add1_spec
    >>> from pslbridge.keras import NeuPSLModel, ProgramData
    >>> path = tempfile.mkdtemp() + "/run.ckpt"
    >>> with Bridge(add1_spec([(0, 1)], sums=[18], phase="learn")) as bridge:
    ...     net = keras.Sequential([keras.Input((2,)), keras.layers.Dense(10, activation="softmax")])
    ...     model = NeuPSLModel({"Neural": net})
    ...     model.compile(optimizer=keras.optimizers.Adam(0.1))
    ...     data = ProgramData([(bridge, {"Neural": np.eye(2, dtype="float32")})])
    ...     history = model.fit(data, epochs=2, verbose=0, callbacks=[BackupAndRestore(path, delete_at_end=False)])
    ...     again = model.fit(data, epochs=3, verbose=0, callbacks=[BackupAndRestore(path)])  # resumes at epoch 2
    >>> again.epoch
    [2]
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import keras
import numpy as np

from . import checkpoints
from .errors import CheckpointError, ConfigurationError
from .keras import NeuPSLModel

__all__ = ["BackupAndRestore"]

_KIND = "neupsl-fit"


class BackupAndRestore(keras.callbacks.Callback):
    """Write a checkpoint after every epoch of ``NeuPSLModel.fit`` and resume from it when ``fit`` starts again.

    Args:
        path: The checkpoint file (checked before the first epoch; ``<path>.prev`` keeps the one before).
        delete_at_end: Remove the checkpoint when ``fit`` ends without a crash (Keras' behaviour); False keeps it.

    Raises:
        CheckpointError: The path cannot be written, or the checkpoint to resume from is corrupt or was written for
            other networks or programs (nothing is restored then).
        ConfigurationError: The model is not a :class:`~pslbridge.keras.NeuPSLModel`.

    Examples:
        >>> BackupAndRestore("")
        Traceback (most recent call last):
        ...
        pslbridge.errors.CheckpointError: the checkpoint path is empty; give a file name such as 'run.ckpt'
    """

    def __init__(self, path: str | Path, *, delete_at_end: bool = True) -> None:
        super().__init__()
        self.path = checkpoints.check_path(path)
        self.delete_at_end = delete_at_end
        self.resumed_from: int | None = None  # the epoch a resumed fit continued after (None: a fresh start)

    def _neupsl_model(self) -> NeuPSLModel:
        if not isinstance(self.model, NeuPSLModel) or self.model.data is None:
            raise ConfigurationError("BackupAndRestore works with NeuPSLModel.fit on a ProgramData")
        return self.model

    def on_train_begin(self, logs: dict[str, Any] | None = None) -> None:
        """Restore the newest readable checkpoint, if any, and make ``fit`` continue after its epoch."""
        model = self._neupsl_model()
        self.resumed_from = None
        source = checkpoints.resume_source(self.path)
        if source is None:
            return
        manifest, arrays = checkpoints.read(source)
        self._check(manifest, arrays, model, source)
        variables = model.weights
        for i, variable in enumerate(variables):
            variable.assign(arrays[f"weight{i}"])
        optimizer = model.optimizer
        if manifest["optimizer_variables"]:
            if not optimizer.built:
                optimizer.build(model.trainable_variables)
            if len(optimizer.variables) != manifest["optimizer_variables"]:
                raise CheckpointError("it holds another optimizer's state", path=source)
            for i, variable in enumerate(optimizer.variables):
                variable.assign(arrays[f"optimizer{i}"])
        data = model.data
        assert data is not None
        for k, bridge in enumerate(data.bridges):
            bridge.program.restore({"atom_values": arrays[f"program{k}"], "rule_weights": bridge.rule_weights})
        model.restore_learned_weights(arrays.get("rule_weights"), manifest["weight_steps"])
        data.restore_order({"rng": manifest["order_rng"], "order": arrays["order"]})
        version, python_state, gauss = manifest["python_rng"]  # Keras' fit(shuffle=True) draws from it
        random.setstate((version, tuple(python_state), gauss))
        kind, pos, has_gauss, cached = manifest["numpy_rng"]
        np.random.set_state((kind, arrays["numpy_rng"], pos, has_gauss, cached))
        self.resumed_from = int(manifest["epoch"])
        model.resume_at(self.resumed_from + 1)

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        """Write the checkpoint of the finished epoch."""
        model = self._neupsl_model()
        data = model.data
        assert data is not None
        arrays: dict[str, np.ndarray] = {f"weight{i}": np.asarray(v) for i, v in enumerate(model.weights)}
        optimizer_variables = list(model.optimizer.variables) if model.optimizer.built else []
        arrays.update({f"optimizer{i}": np.asarray(v) for i, v in enumerate(optimizer_variables)})
        for k, bridge in enumerate(data.bridges):
            arrays[f"program{k}"] = bridge.program.state()["atom_values"]
        if model.rule_weights is not None:
            arrays["rule_weights"] = np.asarray(model.rule_weights)
        order = data.order_state()
        arrays["order"] = order["order"]
        steps = model.weight_optimizer.steps_taken if model.weight_optimizer is not None else None
        kind, keys, pos, has_gauss, cached = np.random.get_state()
        arrays["numpy_rng"] = keys
        version, python_state, gauss = random.getstate()
        manifest = {
            "kind": _KIND,
            "epoch": int(epoch),
            "weights": [list(v.shape) for v in model.weights],
            "optimizer_variables": len(optimizer_variables),
            "programs": [int(b.program.rv_count) for b in data.bridges],
            "weight_steps": steps,
            "order_rng": order["rng"],
            "python_rng": [version, list(python_state), gauss],
            "numpy_rng": [kind, int(pos), int(has_gauss), float(cached)],
        }
        checkpoints.write(self.path, manifest, arrays)

    def on_train_end(self, logs: dict[str, Any] | None = None) -> None:
        """Remove the checkpoint after a fit that ended without a crash (unless ``delete_at_end=False``)."""
        self._neupsl_model().resume_at(0)  # a later fit starts where it is told to again
        if self.delete_at_end:
            for path in (self.path, checkpoints.previous(self.path)):
                path.unlink(missing_ok=True)

    @staticmethod
    def _check(manifest: dict[str, Any], arrays: dict[str, np.ndarray], model: NeuPSLModel, path: Path) -> None:
        if manifest.get("kind") != _KIND:
            raise CheckpointError("it is not a NeuPSLModel.fit checkpoint (written by another trainer?)", path=path)
        shapes = [list(v.shape) for v in model.weights]
        if manifest["weights"] != shapes:
            raise CheckpointError(
                f"it holds weights of shapes {manifest['weights']}, the model has {shapes}", path=path
            )
        data = model.data
        assert data is not None
        programs = [int(b.program.rv_count) for b in data.bridges]
        if manifest["programs"] != programs:
            raise CheckpointError(
                f"it was written for programs of {manifest['programs']} random-variable atoms, not {programs}",
                path=path,
            )
