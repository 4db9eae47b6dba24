"""The JVM-facing layer: the one table of Java classes, and the one place Java exceptions become Python ones.

No other module names a Java class. Everything here assumes the JVM runs
(:func:`pslbridge.jvm.start`).

Example:
    >>> from pslbridge import _java
    >>> with _java.guard("grounding"):  # doctest: +SKIP
    ...     pass
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from .errors import EngineError, EngineMemoryError, ModelFileError, PslBridgeError

log = logging.getLogger(__name__)

_CLASSES = {
    "Config": "org.linqs.psl.config.Config",
    "StandardPredicate": "org.linqs.psl.model.predicate.StandardPredicate",
    "DeepPredicate": "org.linqs.psl.model.predicate.DeepPredicate",
    "Predicate": "org.linqs.psl.model.predicate.Predicate",
    "ConstantType": "org.linqs.psl.model.term.ConstantType",
    "ModelLoader": "org.linqs.psl.parser.ModelLoader",
    "RDBMSDataStore": "org.linqs.psl.database.rdbms.RDBMSDataStore",
    "SQLiteDriver": "org.linqs.psl.database.rdbms.driver.SQLiteDriver",
    "ADMMInference": "org.linqs.psl.application.inference.mpe.ADMMInference",
    "InferenceApplication": "org.linqs.psl.application.inference.InferenceApplication",
    "Reasoner": "org.linqs.psl.reasoner.Reasoner",
    "WeightedRule": "org.linqs.psl.model.rule.WeightedRule",
    "PslStringUtils": "org.linqs.psl.util.StringUtils",
    "Parallel": "org.linqs.psl.util.Parallel",
    "ObjectMapper": "com.fasterxml.jackson.databind.ObjectMapper",
    "ArrayList": "java.util.ArrayList",
    "HashSet": "java.util.HashSet",
    "List": "java.util.List",
    "Arrays": "java.util.Arrays",
    "System": "java.lang.System",
    "Runtime": "java.lang.Runtime",
    "Throwable": "java.lang.Throwable",
    "StringWriter": "java.io.StringWriter",
    "PrintWriter": "java.io.PrintWriter",
    "Float": "java.lang.Float",
    "JulLogger": "java.util.logging.Logger",
    "JulLevel": "java.util.logging.Level",
    "LogManager": "org.apache.logging.log4j.LogManager",
    "Log4jLevel": "org.apache.logging.log4j.Level",
    "LoggerConfig": "org.apache.logging.log4j.core.config.LoggerConfig",
    "LoggerContext": "org.apache.logging.log4j.core.LoggerContext",
    "PslLogger": "org.linqs.psl.util.Logger",
    "PslVersion": "org.linqs.psl.util.Version",
    "RecognitionException": "org.antlr.v4.runtime.RecognitionException",
    "ParseCancellationException": "org.antlr.v4.runtime.misc.ParseCancellationException",
}


class _ClassTable:
    """Lazily resolved Java classes, by short name (``J.Config``)."""

    def __init__(self) -> None:
        self._cache: dict[str, Any] = {}

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            return self._cache[name]
        except KeyError:
            import jpype

            cls = jpype.JClass(_CLASSES[name])
            self._cache[name] = cls
            return cls


J = _ClassTable()


# --- exceptions ----------------------------------------------------------------------


def _java_chain(exc: BaseException) -> list[Any]:
    chain = []
    current = exc
    seen = 0
    while current is not None and seen < 20:
        chain.append(current)
        try:
            current = current.getCause()
        except Exception:  # noqa: BLE001
            break
        seen += 1
    return chain


def _class_name(jexc: Any) -> str:
    try:
        return str(jexc.getClass().getName())
    except Exception:  # noqa: BLE001
        return type(jexc).__name__


def _message(jexc: Any) -> str | None:
    try:
        msg = jexc.getMessage()
    except Exception:  # noqa: BLE001
        return None
    return None if msg is None else str(msg)


def java_trace(jexc: Any) -> str:
    """Return a Java exception's stack trace as text.

    Example:
        >>> java_trace(exc)  # doctest: +SKIP
        'java.lang.IllegalStateException: ...'
    """
    try:
        writer = J.StringWriter()
        jexc.printStackTrace(J.PrintWriter(writer))
        return str(writer.toString())
    except Exception:  # noqa: BLE001
        return repr(jexc)


def _antlr_position(chain: list[Any]) -> tuple[int, int, str] | None:
    for jexc in chain:
        try:
            token = jexc.getOffendingToken()
        except Exception:  # noqa: BLE001
            continue
        if token is None:
            continue
        return int(token.getLine()), int(token.getCharPositionInLine()), str(token.getText())
    return None


def translate(
    exc: BaseException,
    context: str,
    *,
    rule: str | None = None,
    path: str | None = None,
    line: int | None = None,
    parser_message: str | None = None,
) -> PslBridgeError:
    """Turn a Java exception into the matching pslbridge error (most specific first).

    Args:
        exc: The exception JPype raised.
        context: What pslbridge was doing, e.g. ``"grounding"``.
        rule: The rule text being compiled, if any.
        path: The file the rule or data came from, if any.
        line: The line in ``path``, if known.
        parser_message: What the parser printed (ANTLR's console listener), if anything.

    Returns:
        A :class:`~pslbridge.errors.PslBridgeError` to raise ``from exc``.

    Example:
        >>> raise translate(java_exc, "inference") from java_exc  # doctest: +SKIP
    """
    chain = _java_chain(exc)
    names = [_class_name(j) for j in chain]
    messages = [m for m in (_message(j) for j in chain) if m]
    trace = java_trace(exc)
    if any(n == "java.lang.OutOfMemoryError" for n in names):
        return EngineMemoryError(
            f"the Java heap ran out during {context} ({'; '.join(messages) or 'OutOfMemoryError'}); "
            "raise it with pslbridge.jvm.configure(max_heap='8g') or PSLBRIDGE_HEAP=8g before the JVM starts",
            java_class="java.lang.OutOfMemoryError",
            java_trace=trace,
        )
    for jexc, name in zip(chain, names):
        if name.endswith("PersistedAtomManagementException"):
            text = _message(jexc) or ""
            atoms, bad_rule = "?", "?"
            if "Offending atom(s): " in text:
                atoms = text.split("Offending atom(s): ", 1)[1].split(". This", 1)[0]
            if "grounding of the rule: " in text:
                bad_rule = text.split("grounding of the rule: ", 1)[1].rstrip(".")
            return ModelFileError(
                f"grounding rule {bad_rule} needs target atom(s) {atoms} that are not in the targets; add them to "
                "the predicate's targets (or give them as observations if the predicate should be closed)",
                path=path,
            )
    if rule is not None:
        position = _antlr_position(chain)
        if position is not None or any(n.startswith("org.antlr") for n in names):
            if position is not None:
                rline, col, text = position
                where = f"at line {rline}, column {col + 1}" if rline > 1 else f"at column {col + 1}"
                detail = f"syntax error {where} near {text!r}"
                if parser_message:
                    detail += f" ({parser_message})"
                if text == "<EOF>":
                    detail += " (the rule ended early: a soft rule starts with 'weight:', a hard one ends with '.')"
                marker = "\n    " + rule.splitlines()[rline - 1 if rline >= 1 else 0] + "\n    " + " " * col + "^"
            else:
                detail, marker = "syntax error", ""
            return ModelFileError(f"{detail} in rule {rule!r}{marker}", path=path, line=line, rule=rule)
        inner = [m for m in messages if not m.startswith("Failed to compile rule")]
        detail = inner[-1] if inner else (messages[-1] if messages else names[-1])
        return ModelFileError(f"cannot compile rule {rule!r}: {detail}", path=path, line=line, rule=rule)
    detail = " <- ".join(f"{n.rsplit('.', 1)[-1]}: {m}" for n, m in zip(names, (_message(j) or "" for j in chain)))
    return EngineError(f"PSL failed during {context}: {detail}", java_class=names[0], java_trace=trace)


def is_java_exception(exc: BaseException) -> bool:
    """Return True if ``exc`` came from Java through JPype.

    Example:
        >>> is_java_exception(ValueError())
        False
    """
    try:
        import jpype
    except ImportError:  # pragma: no cover
        return False
    return isinstance(exc, jpype.JException)


@contextlib.contextmanager
def guard(context: str, *, rule: str | None = None, path: str | None = None, line: int | None = None) -> Iterator[None]:
    """Translate Java exceptions raised inside the block (the one choke point).

    Args:
        context: What is being done, for the message.
        rule: Rule text being compiled, if any.
        path: Source file, if any.
        line: Line in ``path``, if any.

    Example:
        >>> with guard("inference"):  # doctest: +SKIP
        ...     app.inference(False, False)
    """
    # Worker threads that die (e.g. of OutOfMemoryError) print their trace to System.err: keep it off the
    # user's terminal (discarded without allocating: the heap may be exhausted; the error carries the cause).
    with capture_stderr(keep=False):
        try:
            yield
        except PslBridgeError:
            raise
        except Exception as exc:
            if is_java_exception(exc):
                raise translate(exc, context, rule=rule, path=path, line=line) from exc
            if isinstance(exc, RuntimeError) and "Fatal error" in str(exc):
                # JPype could not even build the Java exception: in practice the heap ran out.
                raise EngineMemoryError(
                    f"the JVM failed during {context} ({exc}); this happens when the Java heap is exhausted: "
                    "raise it with pslbridge.jvm.configure(max_heap='8g') or PSLBRIDGE_HEAP=8g",
                    java_class="java.lang.OutOfMemoryError",
                ) from exc
            raise


def compile_rule(text: str, path: str | None = None, line: int | None = None) -> Any:
    """Compile one rule with PSL's parser; errors become :class:`ModelFileError` with the position.

    ANTLR's console listener prints the parser's own diagnosis to ``System.err``; it is captured
    (never shown raw) and folded into the message.

    Example:
        >>> compile_rule("1: A(X) -> B(X) ^2")  # doctest: +SKIP
    """
    with capture_stderr() as printed:
        try:
            return J.ModelLoader.loadRule(text)
        except Exception as exc:
            if not is_java_exception(exc):
                raise
            failure = exc
    import re

    message = re.sub(r"^line \d+:\d+ ", "", " ".join(printed)) if printed else None
    raise translate(failure, "compiling a rule", rule=text, path=path, line=line, parser_message=message) from failure


@contextlib.contextmanager
def capture_stderr(keep: bool = True) -> Iterator[list[str]]:
    """Capture what Java code writes to ``System.err`` inside the block.

    ANTLR's console listener prints parse errors there; the text is appended to the yielded list.

    Example:
        >>> with capture_stderr() as err:  # doctest: +SKIP
        ...     J.ModelLoader.loadRule(text)
    """
    import jpype

    buffer = (
        jpype.JClass("java.io.ByteArrayOutputStream")()
        if keep
        else jpype.JClass("java.io.OutputStream").nullOutputStream()
    )
    stream = jpype.JClass("java.io.PrintStream")(buffer, True)
    original = J.System.err
    J.System.setErr(stream)
    captured: list[str] = []
    try:
        yield captured
    finally:
        J.System.setErr(original)
        if keep:
            stream.flush()
            text = str(buffer.toString()).strip()
            if text:
                captured.append(text)


# --- PSL set-up ----------------------------------------------------------------------


_KEEP: list[Any] = []


def init_psl(threads: int) -> None:
    """Apply process-wide PSL options right after the JVM starts.

    Args:
        threads: PSL worker thread count.

    Example:
        >>> init_psl(2)  # doctest: +SKIP
    """
    config = J.Config
    config.setProperty("parallel.numthreads", str(threads), False)
    # The default RANDOM re-randomises every random-variable atom on reset, neural ones included.
    config.setProperty("inference.initialvalue", "ATOM", False)
    # netlib's "Failed to load implementation" warnings go through java.util.logging.
    off = J.JulLevel.OFF
    for name in ("com.github.fommil.netlib", "dev.ludovic.netlib", "com.github.fommil"):
        logger = J.JulLogger.getLogger(name)
        logger.setLevel(off)
        _KEEP.append(logger)  # java.util.logging holds loggers weakly


def psl_version() -> str:
    """Return the PSL version string of the loaded jar.

    Example:
        >>> psl_version()  # doctest: +SKIP
        '2.4.0-...'
    """
    return str(J.PslVersion.getFull())


def java_version() -> str:
    """Return the running JVM's version.

    Example:
        >>> java_version()  # doctest: +SKIP
        '25.0.2'
    """
    return str(J.System.getProperty("java.version"))


def heap_used_bytes() -> int:
    """Return the Java heap currently in use, in bytes.

    Example:
        >>> heap_used_bytes() > 0  # doctest: +SKIP
        True
    """
    rt = J.Runtime.getRuntime()
    return int(rt.totalMemory() - rt.freeMemory())


def set_property(key: str, value: str) -> None:
    """Set a PSL option (``Config.setProperty``).

    Example:
        >>> set_property("admmreasoner.maxiterations", "500")  # doctest: +SKIP
    """
    J.Config.setProperty(key, value, False)


def get_property(key: str) -> str | None:
    """Return a PSL option's current value, or None when unset.

    Example:
        >>> get_property("parallel.numthreads")  # doctest: +SKIP
        '2'
    """
    value = J.Config.getString(key, None)
    return None if value is None else str(value)


def clear_property(key: str) -> None:
    """Unset a PSL option.

    Example:
        >>> clear_property("admmreasoner.maxiterations")  # doctest: +SKIP
    """
    J.Config.clearProperty(key, False)


# --- logging -------------------------------------------------------------------------


#: Filled from PSL's "Final Objective ..." log line after each solve.
last_solve: dict[str, float] = {}
_FINAL_RE = None
_REASONER_LOGGER = "org.linqs.psl.reasoner.Reasoner"


def set_psl_log_level(level: str) -> None:
    """Set PSL's (log4j root) level, e.g. ``"WARN"``; the reasoner's summary line stays on.

    Example:
        >>> set_psl_log_level("WARN")  # doctest: +SKIP
    """
    J.PslLogger.setLevel(level)
    context = J.LoggerContext.getContext(False)
    reasoner = context.getConfiguration().getLoggerConfig(_REASONER_LOGGER)
    if str(reasoner.getName()) == _REASONER_LOGGER:
        reasoner.setLevel(J.Log4jLevel.getLevel(level if level in ("DEBUG", "TRACE") else "INFO"))
        context.updateLoggers()


def _record_final(message: str) -> None:
    global _FINAL_RE
    import re

    if _FINAL_RE is None:
        _FINAL_RE = re.compile(
            r"Final Objective: ([^,]+), Violated Constraints: (\d+), "
            r"Total Optimization Time: (\d+), Total Number of Iterations: (\d+)"
        )
    match = _FINAL_RE.search(message)
    if match:
        try:
            last_solve["objective"] = float(match.group(1))
        except ValueError:
            last_solve["objective"] = float("nan")
        last_solve["violated"] = int(match.group(2))
        last_solve["time_ms"] = int(match.group(3))
        last_solve["iterations"] = int(match.group(4))


def compute_objective(reasoner: Any, term_store: Any) -> tuple[float, int]:
    """Evaluate the weighted objective and violated constraints at the current values.

    Uses the reasoner's own (protected) ``parallelComputeObjective`` by reflection.

    Example:
        >>> compute_objective(reasoner, term_store)  # doctest: +SKIP
        (1.6, 0)
    """
    method = _protected_method(J.Reasoner, "parallelComputeObjective", "org.linqs.psl.reasoner.term.TermStore")
    result = method.invoke(reasoner, term_store)
    cls = result.getClass()
    objective = cls.getDeclaredField("objective")
    violated = cls.getDeclaredField("violatedConstraints")
    objective.setAccessible(True)
    violated.setAccessible(True)
    return float(objective.getFloat(result)), int(violated.getLong(result))


_METHODS: dict[tuple[str, str], Any] = {}
_REGISTRY: list[Any] = []


def unregister_predicate(name: str) -> None:
    """Remove a predicate from PSL's global (static) predicate registry.

    PSL never forgets a predicate; pslbridge removes the ones it declared once no open program
    uses them, so a later program may declare the same name with another arity or kind.

    Example:
        >>> unregister_predicate("Knows")  # doctest: +SKIP
    """
    if not _REGISTRY:
        field = J.Predicate.class_.getDeclaredField("predicates")
        field.setAccessible(True)
        _REGISTRY.append(field.get(None))
    _REGISTRY[0].remove(name.upper())


_ADMM_CACHE: list[Any] = []


def clear_admm_cache() -> None:
    """Empty ADMM's static cache of Cholesky factors.

    ``ADMMObjectiveTerm`` caches the factor of each squared term's system in a static map
    keyed by a 32-bit hash of (weight, step size, coefficients). Entries are never evicted,
    so in a long-lived process (several programs, changing rule weights while learning) the
    map grows without bound and a hash collision hands a term another term's factor: a wrong
    MAP state. Seen here: a second program's objective 0.9959 instead of 0.9418. Clearing the
    map before each solve makes every solve behave as in a fresh JVM.

    Example:
        >>> clear_admm_cache()  # doctest: +SKIP
    """
    if not _ADMM_CACHE:
        import jpype

        cls = jpype.JClass("org.linqs.psl.reasoner.admm.term.ADMMObjectiveTerm")
        field = cls.class_.getDeclaredField("lowerTriangleCache")
        field.setAccessible(True)
        _ADMM_CACHE.append(field.get(None))
    _ADMM_CACHE[0].clear()


def _protected_method(cls: Any, name: str, *param_classes: str) -> Any:
    key = (str(cls.class_.getName()), name)
    if key not in _METHODS:
        import jpype

        params = [jpype.JClass("java.lang.Class").forName(p) for p in param_classes]
        method = cls.class_.getDeclaredMethod(name, *params)
        method.setAccessible(True)
        _METHODS[key] = method
    return _METHODS[key]


def install_log_appender(emit: Callable[[str, str, str], None]) -> Any:
    """Replace log4j's console appender with one that calls ``emit(level, logger, message)``.

    Args:
        emit: Receives the level name, the Java logger name and the formatted message.

    Returns:
        The Java appender proxy (keep a reference).

    Example:
        >>> install_log_appender(lambda lvl, name, msg: None)  # doctest: +SKIP
    """
    import jpype

    started = [False]

    @jpype.JImplements("org.apache.logging.log4j.core.Appender")
    class _PythonAppender:
        @jpype.JOverride
        def append(self, event: Any) -> None:
            try:
                level = str(event.getLevel().name())
                name = str(event.getLoggerName())
                message = str(event.getMessage().getFormattedMessage())
                if name == _REASONER_LOGGER and message.startswith("Final Objective"):
                    _record_final(message)
                emit(level, name, message)
            except Exception:  # noqa: BLE001 - logging must never break the engine
                pass

        @jpype.JOverride
        def getName(self) -> str:
            return "pslbridge-python"

        @jpype.JOverride
        def getLayout(self) -> Any:
            return None

        @jpype.JOverride
        def ignoreExceptions(self) -> bool:
            return True

        @jpype.JOverride
        def getHandler(self) -> Any:
            return None

        @jpype.JOverride
        def setHandler(self, handler: Any) -> None:
            pass

        @jpype.JOverride
        def getState(self) -> Any:
            state = jpype.JClass("org.apache.logging.log4j.core.LifeCycle$State")
            return state.STARTED if started[0] else state.INITIALIZED

        @jpype.JOverride
        def initialize(self) -> None:
            pass

        @jpype.JOverride
        def start(self) -> None:
            started[0] = True

        @jpype.JOverride
        def stop(self) -> None:
            started[0] = False

        @jpype.JOverride
        def isStarted(self) -> bool:
            return started[0]

        @jpype.JOverride
        def isStopped(self) -> bool:
            return not started[0]

    appender = _PythonAppender()
    started[0] = True
    java_appender = jpype.JObject(appender, jpype.JClass("org.apache.logging.log4j.core.Appender"))
    context = J.LoggerContext.getContext(False)
    config = context.getConfiguration()
    root = config.getLoggerConfig(J.LogManager.ROOT_LOGGER_NAME)
    for name in list(root.getAppenders().keySet()):
        root.removeAppender(name)
    config.addAppender(java_appender)
    root.addAppender(java_appender, None, None)
    reasoner = J.LoggerConfig(_REASONER_LOGGER, J.Log4jLevel.INFO, False)
    reasoner.addAppender(java_appender, None, None)
    config.addLogger(_REASONER_LOGGER, reasoner)
    context.updateLoggers()
    return (appender, java_appender)


def remove_log_appender() -> None:
    """Detach the Python appender (at interpreter exit, before the JVM shuts down).

    Example:
        >>> remove_log_appender()  # doctest: +SKIP
    """
    try:
        context = J.LoggerContext.getContext(False)
        config = context.getConfiguration()
        for logger in (config.getLoggerConfig(J.LogManager.ROOT_LOGGER_NAME), config.getLoggerConfig(_REASONER_LOGGER)):
            logger.removeAppender("pslbridge-python")
        context.updateLoggers()
    except Exception:  # noqa: BLE001 - best effort at exit
        pass


# --- arrays --------------------------------------------------------------------------


def to_java_object_list(rows: Any) -> Any:
    """Convert a list of lists of strings to a ``java.util.List`` in one JSON call.

    Example:
        >>> to_java_object_list([["a", "b"]])  # doctest: +SKIP
    """
    import json

    return J.ObjectMapper().readValue(json.dumps(rows), J.List)


def float_array_view(java_array: Any, size: int) -> np.ndarray:
    """Copy the first ``size`` entries of a Java ``float[]`` into a numpy array.

    Example:
        >>> float_array_view(arr, 3)  # doctest: +SKIP
        array([0., 0., 0.], dtype=float32)
    """
    return np.array(java_array[0:size], dtype=np.float32)
