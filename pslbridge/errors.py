"""The exception tree of pslbridge.

Every failure that pslbridge detects is raised as a subclass of
:class:`PslBridgeError`, so one ``except`` clause catches them all, and the
children say what kind of thing went wrong:

.. code-block:: text

    PslBridgeError
    ├── ConfigurationError   bad option, or an option set after the JVM started
    ├── JavaNotFoundError    no usable Java runtime
    ├── JarError             PSL jar missing, or its checksum does not match
    ├── ModelFileError       a model or data file (or Python-given model) is wrong
    ├── NeuralInputError     a neural prediction array is wrong (also a ValueError)
    ├── EngineError          the PSL engine failed while grounding / solving / learning
    │   └── EngineMemoryError  the Java heap is too small for the model
    ├── DataError            a data set (MNIST, Planetoid) is missing or corrupt
    ├── CheckpointError      a training checkpoint cannot be written, or is missing, corrupt or foreign
    └── ClosedError          a method was called after ``close()``

    PslBridgeWarning (a UserWarning)   a condition the user should act on: the result is valid but not what was meant

Examples:
    >>> from pslbridge.errors import PslBridgeError, ModelFileError
    >>> try:
    ...     raise ModelFileError("bad rule", path="model.psl", line=3)
    ... except PslBridgeError as exc:
    ...     print(exc)
    model.psl:3: bad rule
"""

from __future__ import annotations

from pathlib import Path

__all__ = [
    "PslBridgeWarning",
    "CheckpointError",
    "ClosedError",
    "ConfigurationError",
    "DataError",
    "EngineError",
    "EngineMemoryError",
    "JarError",
    "JavaNotFoundError",
    "ModelFileError",
    "NeuralInputError",
    "PslBridgeError",
]


class PslBridgeError(Exception):
    """Root of every error pslbridge raises.

    Examples:
        >>> issubclass(JarError, PslBridgeError)
        True
    """


class ConfigurationError(PslBridgeError):
    """A bad option, or an option that can only be set before the JVM starts.

    Examples:
        >>> raise ConfigurationError("max_heap must look like '4g'")
        Traceback (most recent call last):
        ...
        pslbridge.errors.ConfigurationError: max_heap must look like '4g'
    """


class JavaNotFoundError(PslBridgeError):
    """No usable Java runtime (``libjvm``) was found.

    Examples:
        >>> str(JavaNotFoundError("no libjvm.so under /opt/java"))
        'no libjvm.so under /opt/java'
    """


class JarError(PslBridgeError):
    """The PSL jar is missing, unreadable or does not match its pinned checksum.

    Examples:
        >>> str(JarError("jar missing: run `make fetch-jars`"))
        'jar missing: run `make fetch-jars`'
    """


class ModelFileError(PslBridgeError):
    """A model description is wrong: rules, predicates, data files or config.

    The message is prefixed with ``path:line:`` when those are known, the way
    compilers report errors, so editors can jump to the place.

    Args:
        message: What is wrong and, where possible, what would fix it.
        path: The file at fault, as the user wrote it or as resolved.
        line: 1-based line number in ``path``.
        rule: The rule text at fault, if any.
        predicate: The predicate at fault, if any.

    Examples:
        >>> err = ModelFileError("expected 3 columns, got 2", path="obs.txt", line=7)
        >>> (err.path, err.line, str(err))
        ('obs.txt', 7, 'obs.txt:7: expected 3 columns, got 2')
    """

    def __init__(
        self,
        message: str,
        *,
        path: str | Path | None = None,
        line: int | None = None,
        rule: str | None = None,
        predicate: str | None = None,
    ) -> None:
        self.message = message
        self.path = None if path is None else str(path)
        self.line = line
        self.rule = rule
        self.predicate = predicate
        prefix = ""
        if self.path is not None:
            prefix = self.path + (f":{line}" if line is not None else "") + ": "
        super().__init__(prefix + message)


class NeuralInputError(PslBridgeError, ValueError):
    """A neural prediction array is unusable (name, shape, dtype, NaN, range).

    Args:
        message: What is wrong.
        predicate: The neural predicate the array was given for.

    Examples:
        >>> err = NeuralInputError("expected shape (4, 10), got (4, 9)", predicate="Digit")
        >>> str(err)
        "neural predicate 'Digit': expected shape (4, 10), got (4, 9)"
    """

    def __init__(self, message: str, *, predicate: str | None = None) -> None:
        self.predicate = predicate
        self.message = message
        text = message if predicate is None else f"neural predicate {predicate!r}: {message}"
        super().__init__(text)


class EngineError(PslBridgeError):
    """The PSL engine failed; the Java exception is kept.

    Attributes:
        java_class: Fully qualified name of the Java exception class (or None).
        java_trace: The Java stack trace as text (or None).

    Examples:
        >>> err = EngineError("grounding failed", java_class="java.lang.IllegalStateException")
        >>> err.java_class
        'java.lang.IllegalStateException'
    """

    def __init__(
        self,
        message: str,
        *,
        java_class: str | None = None,
        java_trace: str | None = None,
    ) -> None:
        self.java_class = java_class
        self.java_trace = java_trace
        super().__init__(message)


class EngineMemoryError(EngineError, MemoryError):
    """The Java heap was too small; raise it with ``pslbridge.jvm.configure(max_heap=...)``.

    Examples:
        >>> issubclass(EngineMemoryError, MemoryError)
        True
    """


class ClosedError(PslBridgeError):
    """A method was called on an object after its ``close()``.

    Examples:
        >>> str(ClosedError("Bridge is closed"))
        'Bridge is closed'
    """


class DataError(PslBridgeError):
    """A data set is missing or corrupt; the message says what to run.

    Examples:
        >>> str(DataError("run make data"))
        'run make data'
    """


class CheckpointError(PslBridgeError):
    """A training checkpoint cannot be written here, or the file is missing, corrupt or from elsewhere.

    Args:
        message: What is wrong.
        path: The checkpoint file.

    Examples:
        >>> str(CheckpointError("checksum mismatch in array 'net0/w1'", path="run.ckpt"))
        "run.ckpt: checksum mismatch in array 'net0/w1'"
    """

    def __init__(self, message: str, *, path: str | Path | None = None) -> None:
        self.path = None if path is None else str(path)
        self.message = message
        super().__init__(message if path is None else f"{path}: {message}")


class PslBridgeWarning(UserWarning):
    """A condition the user should act on (shown once per place by Python's default warning filter).

    Examples:
        >>> import warnings
        >>> with warnings.catch_warnings(record=True) as caught:
        ...     warnings.simplefilter("always")
        ...     warnings.warn("neural atoms in a hard constraint", PslBridgeWarning)
        >>> caught[0].category.__name__
        'PslBridgeWarning'
    """
