"""pslbridge: NeuPSL for Python on the reference Java PSL 2.4.0 engine.

Heavy submodules load on first use, so ``python -m pslbridge.jars`` and
``import pslbridge`` stay light.

Examples:
    >>> import pslbridge
    >>> pslbridge.__version__
    '0.1.0'
"""

from __future__ import annotations

import importlib
import logging
from typing import Any

from ._version import __version__
from .errors import (
    CheckpointError,
    ClosedError,
    ConfigurationError,
    DataError,
    EngineError,
    EngineMemoryError,
    JarError,
    JavaNotFoundError,
    ModelFileError,
    NeuralInputError,
    PslBridgeError,
    PslBridgeWarning,
)

logging.getLogger(__name__).addHandler(logging.NullHandler())

_LAZY = {
    "Bridge": "bridge",
    "InferenceResult": "bridge",
    "close_all": "bridge",
    "ModelSpec": "model",
    "NeuralSpec": "model",
    "PredicateSpec": "model",
    "load_model": "model",
    "quiet_tensorflow": "quiet",
}

__all__ = [
    "Bridge",
    "CheckpointError",
    "ClosedError",
    "ConfigurationError",
    "DataError",
    "EngineError",
    "EngineMemoryError",
    "InferenceResult",
    "JarError",
    "JavaNotFoundError",
    "ModelFileError",
    "ModelSpec",
    "NeuralInputError",
    "NeuralSpec",
    "PredicateSpec",
    "PslBridgeError",
    "PslBridgeWarning",
    "__version__",
    "close_all",
    "load_model",
    "quiet_tensorflow",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'pslbridge' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value
