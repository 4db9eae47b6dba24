"""Opt-in quiet for TensorFlow's C++ start-up noise (``import pslbridge`` changes nothing in your process).

TensorFlow writes ``Could not find cuda drivers``, ``failed call to cuInit`` and oneDNN notices from C++ while
``import tensorflow`` runs, before its logging honours ``TF_CPP_MIN_LOG_LEVEL``. :func:`quiet_tensorflow`, called
before TensorFlow is imported, adds an import hook that runs TensorFlow's own import with file descriptor 2
pointed at ``/dev/null`` (Python exceptions from that import still propagate) and sets ``TF_CPP_MIN_LOG_LEVEL``
to 3 unless you set it. pslbridge's own programs (``python -m pslbridge``, the repository's experiments and
benchmarks) call it; a library user calls it only if they want it.

Examples:
    >>> import subprocess, sys
    >>> code = "import pslbridge; pslbridge.quiet_tensorflow(); import tensorflow"
    >>> env = {k: v for k, v in os.environ.items() if k not in ("TF_CPP_MIN_LOG_LEVEL", MARKER)}
    >>> proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    >>> proc.stderr, proc.returncode
    ('', 0)
    >>> env["TF_CPP_MIN_LOG_LEVEL"] = "0"  # the user's own level: everything shows
    >>> subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env).stderr != ""
    True
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import Any

__all__ = ["quiet_tensorflow"]


class _QuietLoader(importlib.abc.Loader):
    """Runs the real loader's ``exec_module`` with stderr's file descriptor on /dev/null."""

    def __init__(self, loader: Any) -> None:
        self.loader = loader

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self.loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        sys.stderr.flush()
        saved = os.dup(2)
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, 2)
            self.loader.exec_module(module)
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            os.close(devnull)


class _QuietTensorFlow(importlib.abc.MetaPathFinder):
    def find_spec(
        self, name: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if name != "tensorflow":
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return None
        spec.loader = _QuietLoader(spec.loader)
        return spec


#: Marks a ``TF_CPP_MIN_LOG_LEVEL`` that pslbridge set (so child processes, which inherit both, stay quiet too).
MARKER = "PSLBRIDGE_QUIET_TF"


def quiet_tensorflow() -> None:
    """Keep TensorFlow's C++ start-up noise off stderr, unless ``TF_CPP_MIN_LOG_LEVEL`` is set (idempotent).

    Call it before anything imports TensorFlow; afterwards it does nothing.

    Examples:
        >>> quiet_tensorflow()  # a second call, or one after TensorFlow's import, changes nothing
    """
    user_level = "TF_CPP_MIN_LOG_LEVEL" in os.environ and os.environ.get(MARKER) != "1"
    if user_level or "tensorflow" in sys.modules:
        return
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
    os.environ[MARKER] = "1"
    if not any(isinstance(f, _QuietTensorFlow) for f in sys.meta_path):
        sys.meta_path.insert(0, _QuietTensorFlow())
