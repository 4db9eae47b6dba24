"""The JVM-facing layer: Java classes, Java exceptions, and the class-level operations the engine room needs.

Here are the one table of Java classes, the one place Java exceptions become Python ones, and the few
constructors and static calls the engine room needs. No other module names a Java class;
:mod:`pslbridge.program` holds the Java objects these functions return and calls their methods. The class
table is guarded: using it before the JVM runs raises :class:`~pslbridge.errors.ConfigurationError` instead
of JPype's bare error. PSL's log4j output is routed by :mod:`pslbridge._javalog`.

Examples:
    >>> from pslbridge import _java
    >>> _java.J.Config.getString("inference.initialvalue", None)
    'ATOM'
    >>> with _java.guard("an example"):
    ...     _java.J.Integer.parseInt("x1")
    Traceback (most recent call last):
    ...
    pslbridge.errors.EngineError: PSL failed during an example: NumberFormatException: For input string: "x1"
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from .errors import ConfigurationError, EngineError, EngineMemoryError, ModelFileError, PslBridgeError

log = logging.getLogger(__name__)

_PSL = "org.linqs.psl."
_CLASSES = {
    "Config": _PSL + "config.Config",
    "StandardPredicate": _PSL + "model.predicate.StandardPredicate",
    "DeepPredicate": _PSL + "model.predicate.DeepPredicate",
    "Predicate": _PSL + "model.predicate.Predicate",
    "ConstantType": _PSL + "model.term.ConstantType",
    "ModelLoader": _PSL + "parser.ModelLoader",
    "RDBMSDataStore": _PSL + "database.rdbms.RDBMSDataStore",
    "SQLiteDriver": _PSL + "database.rdbms.driver.SQLiteDriver",
    "ADMMInference": _PSL + "application.inference.mpe.ADMMInference",
    "DualBCDInference": _PSL + "application.inference.mpe.DualBCDInference",
    "DistributedDualBCDInference": _PSL + "application.inference.mpe.DistributedDualBCDInference",
    "SGDInference": _PSL + "application.inference.mpe.SGDInference",
    "Reasoner": _PSL + "reasoner.Reasoner",
    "ADMMObjectiveTerm": _PSL + "reasoner.admm.term.ADMMObjectiveTerm",
    "SimpleTermStore": _PSL + "reasoner.term.SimpleTermStore",
    "UnmanagedObservedAtom": _PSL + "model.atom.UnmanagedObservedAtom",
    "WeightedArithmeticRule": _PSL + "model.rule.arithmetic.WeightedArithmeticRule",
    "WeightedGroundArithmeticRule": _PSL + "model.rule.arithmetic.WeightedGroundArithmeticRule",
    "ArithmeticRuleExpression": _PSL + "model.rule.arithmetic.expression.ArithmeticRuleExpression",
    "ConstantNumber": _PSL + "model.rule.arithmetic.expression.coefficient.ConstantNumber",
    "FunctionComparator": _PSL + "reasoner.function.FunctionComparator",
    "PslRuntime": _PSL + "runtime.Runtime",
    "ExternalFunctionalPredicate": _PSL + "model.predicate.ExternalFunctionalPredicate",
    "Reflection": _PSL + "util.Reflection",
    "Options": _PSL + "config.Options",
    "RuntimeOptions": _PSL + "config.RuntimeOptions",
    "Option": _PSL + "config.Option",
    "Modifier": "java.lang.reflect.Modifier",
    "PslStringUtils": _PSL + "util.StringUtils",
    "Parallel": _PSL + "util.Parallel",
    "PslLogger": _PSL + "util.Logger",
    "PslVersion": _PSL + "util.Version",
    "ObjectMapper": "com.fasterxml.jackson.databind.ObjectMapper",
    "ArrayList": "java.util.ArrayList",
    "HashSet": "java.util.HashSet",
    "List": "java.util.List",
    "Arrays": "java.util.Arrays",
    "System": "java.lang.System",
    "Runtime": "java.lang.Runtime",
    "Integer": "java.lang.Integer",
    "Float": "java.lang.Float",
    "Class": "java.lang.Class",
    "StringWriter": "java.io.StringWriter",
    "PrintWriter": "java.io.PrintWriter",
    "PrintStream": "java.io.PrintStream",
    "OutputStream": "java.io.OutputStream",
    "ByteArrayOutputStream": "java.io.ByteArrayOutputStream",
    "JulLogger": "java.util.logging.Logger",
    "JulLevel": "java.util.logging.Level",
    "LogManager": "org.apache.logging.log4j.LogManager",
    "Log4jLevel": "org.apache.logging.log4j.Level",
    "LoggerConfig": "org.apache.logging.log4j.core.config.LoggerConfig",
    "LoggerContext": "org.apache.logging.log4j.core.LoggerContext",
    "Appender": "org.apache.logging.log4j.core.Appender",
    "WriterAppender": "org.apache.logging.log4j.core.appender.WriterAppender",
    "PatternLayout": "org.apache.logging.log4j.core.layout.PatternLayout",
    "Thread": "java.lang.Thread",
    "ManagementFactory": "java.lang.management.ManagementFactory",
    "MemoryType": "java.lang.management.MemoryType",
    "LifeCycleState": "org.apache.logging.log4j.core.LifeCycle$State",
    "TimeUnit": "java.util.concurrent.TimeUnit",
    "Executors": "java.util.concurrent.Executors",
    "JPypeReferenceQueue": "org.jpype.ref.JPypeReferenceQueue",
}

#: Reasoner names accepted by :class:`pslbridge.Bridge` and the inference application each one uses.
REASONERS = {
    "admm": "ADMMInference",
    "dualbcd": "DualBCDInference",
    "distributeddualbcd": "DistributedDualBCDInference",
    "sgd": "SGDInference",
}
#: The reasoners built on the regularised dual LCQP (their objective carries ``λ Σ x²``).
DUAL_REASONERS = ("dualbcd", "distributeddualbcd")


class _ClassTable:
    """Java classes by short name (``J.Config``), resolved on first use; refuses before the JVM runs."""

    def __init__(self) -> None:
        self._cache: dict[str, Any] = {}

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            return self._cache[name]
        except KeyError:
            pass
        if name not in _CLASSES:
            raise AttributeError(f"no Java class {name!r} in pslbridge's class table")
        import jpype

        if not jpype.isJVMStarted():
            raise ConfigurationError(
                f"Java class {name} was used before the JVM started; call pslbridge.jvm.start() first "
                "(pslbridge starts it on the first Bridge)"
            )
        cls = jpype.JClass(_CLASSES[name])
        self._cache[name] = cls
        return cls


J = _ClassTable()


# --- exceptions ----------------------------------------------------------------------


def _java_chain(exc: BaseException) -> list[Any]:
    chain, current = [], exc
    while current is not None and len(chain) < 20:
        chain.append(current)
        try:
            current = current.getCause()
        except Exception as failure:  # noqa: BLE001 - not a Java throwable, or no heap left to answer
            if _is_out_of_memory(failure):
                chain.append(failure)  # the walk ran out of heap: as good as the lost cause
            break
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

    Examples:
        >>> java_trace(ValueError("not Java"))
        "ValueError('not Java')"
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


def _rule_error(
    chain: list[Any], names: list[str], messages: list[str], rule: str, path: str | None, line: int | None, hint: str
) -> ModelFileError:
    position = _antlr_position(chain)
    if position is not None or any(n.startswith("org.antlr") for n in names):
        if position is not None:
            rline, col, text = position
            where = f"at line {rline}, column {col + 1}" if rline > 1 else f"at column {col + 1}"
            detail = f"syntax error {where} near {text!r}"
            if hint:
                detail += f" ({hint})"
            if text == "<EOF>":
                detail += " (the rule ended early: a soft rule starts with 'weight:', a hard one ends with '.')"
            marker = "\n    " + rule.splitlines()[rline - 1 if rline >= 1 else 0] + "\n    " + " " * col + "^"
        else:
            detail, marker = "syntax error", ""
        return ModelFileError(f"{detail} in rule {rule!r}{marker}", path=path, line=line, rule=rule)
    inner = [m for m in messages if not m.startswith("Failed to compile rule")]
    detail = inner[-1] if inner else (messages[-1] if messages else names[-1])
    return ModelFileError(f"cannot compile rule {rule!r}: {detail}", path=path, line=line, rule=rule)


def _grounding_error(text: str, path: str | None) -> ModelFileError:
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


#: How many times a heap pool was found still full after a garbage collection, as last seen by
#: :func:`heap_ran_out` (each exhaustion is reported once).
_HEAP_FULL_SEEN = [0]
#: The heap pools whose collection usage :func:`watch_heap` watches.
_HEAP_POOLS: list[Any] = []
#: A heap pool still this full after a collection has, for practical purposes, run out.
HEAP_FULL_FRACTION = 0.97


def watch_heap() -> None:
    """Have the JVM count collections after which a heap pool stays nearly full (called when PSL starts).

    Examples:
        >>> watch_heap()
    """
    pools = []
    for pool in J.ManagementFactory.getMemoryPoolMXBeans():
        # The tenured pool only: it is the one that supports a usage threshold too. A survivor space is often
        # full right after a young collection (its overflow goes to the tenured pool), which is no exhaustion.
        if (
            pool.getType() == J.MemoryType.HEAP
            and pool.isCollectionUsageThresholdSupported()
            and pool.isUsageThresholdSupported()
        ):
            limit = pool.getUsage().getMax()
            if limit > 0:
                pool.setCollectionUsageThreshold(int(HEAP_FULL_FRACTION * limit))
                pools.append(pool)
    _HEAP_POOLS[:] = pools  # kept: asking for the pools again allocates, which fails once the heap is full
    forget_exhaustion()


def forget_exhaustion() -> None:
    """Mark every heap exhaustion so far as reported, so that a later failure is not blamed on it.

    Examples:
        >>> forget_exhaustion(); heap_ran_out()
        False
    """
    heap_ran_out()
    heap_peaked()


def heap_ran_out() -> bool:
    """Return True if a heap pool stayed nearly full after a collection since the last call.

    When the heap runs out on a PSL worker thread, the main thread often fails next with an error whose
    ``OutOfMemoryError`` cause was lost (a ``BootstrapMethodError``, a ``NoClassDefFoundError``,
    "Self-suppression not permitted"); this tells those apart from real faults. Each exhaustion answers
    True once, so a later, unrelated failure is not blamed on it. If the question itself runs out of heap,
    the answer is True (and the exhaustion is counted at the next call that gets an answer).

    Examples:
        >>> heap_ran_out()
        False
    """
    try:
        count = sum(int(pool.getCollectionUsageThresholdCount()) for pool in _HEAP_POOLS)
    except Exception:  # noqa: BLE001 - a JVM too short of memory to answer fails in several ways
        # An OutOfMemoryError, or JPype's "Fatal error" when it cannot even build the Java exception: either
        # way these read-only calls fail only for want of heap.
        return True
    seen, _HEAP_FULL_SEEN[0] = _HEAP_FULL_SEEN[0], count
    return count > seen


def heap_peaked() -> bool:
    """Return True if a heap pool was nearly full at any moment since the last call, then reset the peaks.

    Weaker evidence than :func:`heap_ran_out` (a busy heap fills up before each full collection), so it
    only decides for errors that are themselves the usual symptoms of an exhaustion on another thread (see
    :func:`translate`). If the question fails, the answer is True, as for :func:`heap_ran_out`.

    Examples:
        >>> heap_peaked()
        False
    """
    try:
        peaked = any(
            pool.getPeakUsage().getUsed() >= HEAP_FULL_FRACTION * pool.getUsage().getMax() for pool in _HEAP_POOLS
        )
        for pool in _HEAP_POOLS:
            pool.resetPeakUsage()
    except Exception:  # noqa: BLE001 - as in heap_ran_out
        return True
    return peaked


def _is_out_of_memory(exc: BaseException) -> bool:
    """True for a Java ``OutOfMemoryError`` (told by its Python type: asking Java may fail for want of heap)."""
    return type(exc).__name__.endswith("java.lang.OutOfMemoryError")


#: Errors that a thread meets when another thread has just exhausted the heap and the cause was lost.
_LOST_OOM_CLASSES = ("java.lang.BootstrapMethodError", "java.lang.NoClassDefFoundError")
#: How deep each thread is in :func:`guard` blocks (the outermost one starts a fresh watch of the heap).
_GUARD_DEPTH = threading.local()
#: Heap exhaustions reported in this process (as :class:`EngineMemoryError`), see :func:`translate`.
_MEMORY_ERRORS = [0]
#: Added to a linkage error's message after an exhaustion was reported: the JVM may be repeating an old failure.
STALE_LINK_HINT = (
    "; after an earlier heap exhaustion in this process this can also be Java code that failed to link "
    "(a call site or a class) while the heap was full: the JVM repeats such a failure for the life of the "
    "process, so if it recurs with a small model, restart the process"
)


def _linkage_error(names: Sequence[str]) -> bool:
    """True when the chain holds one of :data:`_LOST_OOM_CLASSES` (Java code that failed to link or initialise)."""
    return any(n in _LOST_OOM_CLASSES for n in names)


def _lost_out_of_memory(names: Sequence[str], messages: Sequence[str]) -> bool:
    """True for the errors that a heap exhaustion on a worker thread leaves on the main thread."""
    return _linkage_error(names) or any("Self-suppression not permitted" in m for m in messages)


def translate(
    exc: BaseException,
    context: str,
    *,
    rule: str | None = None,
    path: str | None = None,
    line: int | None = None,
    parser_message: str | None = None,
) -> PslBridgeError | KeyboardInterrupt:
    """Turn a Java exception into the matching pslbridge error (most specific first).

    A PSL worker interrupted by Ctrl-C (``InterruptedException`` anywhere in the chain) becomes
    :class:`KeyboardInterrupt`, the same as an interrupt of the calling thread itself.

    Args:
        exc: The exception JPype raised.
        context: What pslbridge was doing, e.g. ``"grounding"``.
        rule: The rule text being compiled, if any.
        path: The file the rule or data came from, if any.
        line: The line in ``path``, if known.
        parser_message: What the parser printed (ANTLR's console listener), if anything.

    Returns:
        The error to raise ``from exc``.

    Examples:
        >>> try:
        ...     J.Integer.parseInt("seven")
        ... except Exception as exc:
        ...     print(type(translate(exc, "reading a number")).__name__)
        EngineError
    """
    chain = _java_chain(exc)
    names = [_class_name(j) for j in chain]
    messages = [m for m in (_message(j) for j in chain) if m]
    if any(n == "java.lang.InterruptedException" for n in names) or any(
        "Interrupted waiting for worker" in m for m in messages
    ):
        return KeyboardInterrupt(f"interrupted during {context}")
    trace = java_trace(exc)
    detail = " <- ".join(f"{n.rsplit('.', 1)[-1]}: {m}" for n, m in zip(names, (_message(j) or "" for j in chain)))
    out_of_memory = any(n == "java.lang.OutOfMemoryError" for n in names)
    if not out_of_memory:
        for jexc, name in zip(chain, names):
            if name.endswith("PersistedAtomManagementException"):
                return _grounding_error(_message(jexc) or "", path)
        if rule is not None:
            return _rule_error(chain, names, messages, rule, path, line, parser_message or "")
    # A model or rule error above is the model's fault whatever the heap did; any other failure right after the
    # heap filled up is blamed on the heap (its cause may have been lost, see heap_ran_out), its Java error kept.
    # Both checks run (each forgets what it answered); the peak decides only for an exhaustion's usual symptoms.
    ran_out, peaked = heap_ran_out(), heap_peaked()
    hint = STALE_LINK_HINT if _linkage_error(names) and _MEMORY_ERRORS[0] else ""
    if out_of_memory or ran_out or (peaked and _lost_out_of_memory(names, messages)):
        _MEMORY_ERRORS[0] += 1
        return EngineMemoryError(
            f"the Java heap ran out during {context} ({detail}); "
            f"raise it with pslbridge.jvm.configure(max_heap='8g') or PSLBRIDGE_HEAP=8g before the JVM starts{hint}",
            java_class="java.lang.OutOfMemoryError",
            java_trace=trace,
        )
    return EngineError(f"PSL failed during {context}: {detail}{hint}", java_class=names[0], java_trace=trace)


def is_java_exception(exc: BaseException) -> bool:
    """Return True if ``exc`` came from Java through JPype.

    Examples:
        >>> is_java_exception(ValueError())
        False
    """
    import jpype

    return isinstance(exc, jpype.JException)


def absorb_pending_interrupt(timeout: float = 0.5) -> bool:
    """Wait briefly for the Python half of a Ctrl-C whose Java half already ended a call; True if it came.

    JPype's SIGINT handler (on a Java thread) first interrupts Java's main thread, then schedules Python's own
    SIGINT handling. The interrupted call can return to Python before the second half lands, which then raised
    a second ``KeyboardInterrupt`` inside the next Java call: one Ctrl-C, two interrupts. Waiting here (only
    after an interruption) takes that second half in, so one Ctrl-C is one ``KeyboardInterrupt``.

    Examples:
        >>> absorb_pending_interrupt(timeout=0.01)  # no Ctrl-C pending
        False
    """
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            time.sleep(0.002)
    except KeyboardInterrupt:
        return True
    return False


@contextlib.contextmanager
def guard(context: str, *, rule: str | None = None, path: str | None = None, line: int | None = None) -> Iterator[None]:
    """Translate Java exceptions raised inside the block (the one choke point).

    Args:
        context: What is being done, for the message.
        rule: Rule text being compiled, if any.
        path: Source file, if any.
        line: Line in ``path``, if any.

    Examples:
        >>> with guard("parsing"):
        ...     J.Integer.parseInt("12")
        12
    """
    # A failure is blamed on the heap only if it ran out during this call: exhaustions before it were reported
    # or outlived. The JVM counts the collections that leave the heap full on its service thread, so the count of
    # an exhaustion already reported and forgotten can still rise afterwards; it must not make a later, unrelated
    # error a memory error.
    depth = getattr(_GUARD_DEPTH, "n", 0)
    if depth == 0:
        forget_exhaustion()
    _GUARD_DEPTH.n = depth + 1
    # Worker threads that die (e.g. of OutOfMemoryError) print their trace to System.err: keep it off the
    # user's terminal (discarded without allocating: the heap may be exhausted; the error carries the cause).
    try:
        with capture_stderr(keep=False):
            try:
                yield
            except PslBridgeError:
                raise
            except Exception as exc:
                if is_java_exception(exc):
                    translated = translate(exc, context, rule=rule, path=path, line=line)
                    if isinstance(translated, KeyboardInterrupt):
                        absorb_pending_interrupt()
                    raise translated from exc
                if isinstance(exc, RuntimeError) and "Fatal error" in str(exc):
                    # JPype could not even build the Java exception: in practice the heap ran out.
                    forget_exhaustion()  # this exhaustion is now reported
                    _MEMORY_ERRORS[0] += 1
                    raise EngineMemoryError(
                        f"the JVM failed during {context} ({exc}); this happens when the Java heap is exhausted: "
                        "raise it with pslbridge.jvm.configure(max_heap='8g') or PSLBRIDGE_HEAP=8g",
                        java_class="java.lang.OutOfMemoryError",
                    ) from exc
                raise
    finally:
        _GUARD_DEPTH.n -= 1


def compile_rule(text: str, path: str | None = None, line: int | None = None) -> Any:
    """Compile one rule with PSL's parser; errors become :class:`ModelFileError` with the position.

    ANTLR's console listener prints the parser's own diagnosis to ``System.err``; it is captured
    (never shown raw) and folded into the message.

    Examples:
        >>> declare_predicate("DocA", ["UniqueStringID"], deep=False).getName()
        'DOCA'
        >>> str(compile_rule("1: DocA(X) -> DocA(X) ^2"))
        '1.0: DOCA(X) >> DOCA(X) ^2'
        >>> compile_rule("1: DocA(X) -> ")
        Traceback (most recent call last):
        ...
        pslbridge.errors.ModelFileError: syntax error at column 15 near '<EOF>' ...
        >>> unregister_predicate("DocA")
    """
    with capture_stderr() as printed:
        try:
            return J.ModelLoader.loadRule(text)
        except Exception as exc:
            if not is_java_exception(exc):
                raise
            failure = exc
    message = re.sub(r"^line \d+:\d+ ", "", " ".join(printed)) if printed else None
    raise translate(failure, "compiling a rule", rule=text, path=path, line=line, parser_message=message) from failure


@contextlib.contextmanager
def capture_stderr(keep: bool = True) -> Iterator[list[str]]:
    """Capture what Java code writes to ``System.err`` inside the block.

    ANTLR's console listener prints parse errors there; the text is appended to the yielded list.

    Examples:
        >>> with capture_stderr() as err:
        ...     J.System.err.println("from Java")
        >>> err
        ['from Java']
    """
    buffer = J.ByteArrayOutputStream() if keep else J.OutputStream.nullOutputStream()
    stream = J.PrintStream(buffer, True)
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


# --- PSL set-up and facts ---------------------------------------------------------------


_KEEP: list[Any] = []


def init_psl(threads: int) -> None:
    """Apply process-wide PSL options right after the JVM starts.

    Args:
        threads: PSL worker thread count.

    Examples:
        >>> init_psl(2)
    """
    config = J.Config
    config.setProperty("parallel.numthreads", str(threads), False)
    watch_heap()  # also loads the heap-watch classes now: after the heap runs out, loading can fail
    _prepare_recovery()
    # Walk the error path once: JPype builds a Java method's dispatch cache on its first call, and a cache
    # whose first call ran out of heap crashes the process later (a segfault in printStackTrace on the
    # next error after an EngineMemoryError).
    try:
        J.Integer.parseInt("not a number")
    except Exception as exc:  # noqa: BLE001 - the point is to translate it
        translate(exc, "starting PSL")
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

    Examples:
        >>> psl_version().startswith("2.4.0")
        True
    """
    return str(J.PslVersion.getFull())


def java_version() -> str:
    """Return the running JVM's version.

    Examples:
        >>> int(java_version().split(".")[0]) >= 11
        True
    """
    return str(J.System.getProperty("java.version"))


def heap_used_bytes() -> int:
    """Return the Java heap currently in use, in bytes.

    Examples:
        >>> heap_used_bytes() > 0
        True
    """
    rt = J.Runtime.getRuntime()
    return int(rt.totalMemory() - rt.freeMemory())


def thread_count() -> int:
    """PSL's worker thread count.

    Examples:
        >>> thread_count() >= 1
        True
    """
    return int(J.Parallel.getNumThreads())


def release_workers(timeout_s: float = 30.0) -> None:
    """Shut PSL's worker pool down after a failed parallel task and wait until what it held is freed.

    A task that fails (e.g. grounding that runs out of heap) skips PSL's own worker clean-up, so the
    pool's static worker list keeps the half-built ground terms alive, and workers still running go on
    filling the heap. This shuts the pool down and waits (up to ``timeout_s``) until its threads have
    ended; while the heap is still full each step may itself fail, so it is retried. The next parallel
    task starts a fresh pool. Afterwards a heap exhaustion already reported is forgotten
    (:func:`forget_exhaustion`), so a later, unrelated failure is not blamed on it.

    Args:
        timeout_s: How long to keep trying before giving up (the caller is already failing).

    Examples:
        >>> release_workers()
        >>> thread_count() >= 1
        True
    """
    deadline = time.monotonic() + timeout_s
    pool = None
    while True:
        try:
            # Taken before close(), which forgets the pool once it has waited for it (at most 10 s).
            field = _RECOVERY.get("pool")
            pool = pool if pool is not None or field is None else field.get(None)
            J.Parallel.close()
            # A worker thread killed by the exhaustion may never be counted out of the pool, so "no worker is
            # running a task" (their task locks are released in a finally block) is as good as terminated.
            if pool is not None and not (
                pool.awaitTermination(200, J.TimeUnit.MILLISECONDS) or pool.getActiveCount() == 0
            ):
                raise TimeoutError("PSL's workers are still running")
            J.System.gc()
            break
        except Exception:  # noqa: BLE001 - while the heap is full any step can fail; try again
            if time.monotonic() > deadline:
                log.warning("PSL's worker pool did not stop within %.0f s of a failed task", timeout_s)
                break
            time.sleep(0.1)
    forget_exhaustion()


def _prepare_recovery() -> None:
    """Make the failure paths' Java calls ready while the heap has room (called when PSL starts).

    Reflection builds accessor classes on first use, which fails while the heap is exhausted; the
    fields that :func:`release_workers` and :func:`unregister_predicate` read are opened and read once here.
    """
    field = J.Parallel.class_.getDeclaredField("pool")
    field.setAccessible(True)
    field.get(None)
    _RECOVERY["pool"] = field
    # JPype builds a class's Python wrapper when it first meets one of its objects; built while the heap is
    # exhausted, it lacks methods. PSL's pool is a ThreadPoolExecutor: meet one now, and call what is used.
    executor = J.Executors.newFixedThreadPool(1)
    executor.shutdown()
    executor.awaitTermination(1, J.TimeUnit.SECONDS)
    executor.getActiveCount()
    _registry_map()


def stop_reference_queue() -> None:
    """Stop JPype's reference queue: the Java thread that releases Python objects once Java no longer holds them.

    JPype stops it itself when it destroys the JVM at exit. A process that exits without destroying the JVM (one
    whose JVM was started off the main thread, see :mod:`pslbridge.jvm`) stops it with this, from an ``atexit``
    handler: a release that reaches Python while the interpreter finalizes aborts the process ("FATAL: exception
    not rethrown"). The Python objects Java still holds are released on the calling thread.

    Examples:
        >>> J.JPypeReferenceQueue.getInstance().isRunning()  # the thread this stops (not here: the process goes on)
        True
    """
    J.JPypeReferenceQueue.getInstance().stop()


def max_heap_bytes() -> int:
    """The JVM's ``-Xmx`` in bytes.

    Examples:
        >>> max_heap_bytes() > 0
        True
    """
    return int(J.Runtime.getRuntime().maxMemory())


# --- predicates -----------------------------------------------------------------------


_REGISTRY: list[Any] = []
#: Reflected fields that the failure paths read, opened when PSL starts (see :func:`_prepare_recovery`).
_RECOVERY: dict[str, Any] = {}


def find_predicate(name: str) -> Any | None:
    """PSL's registered predicate of that name (case-insensitive), or None.

    Examples:
        >>> find_predicate("NoSuchPredicateAnywhere") is None
        True
    """
    return J.Predicate.get(name)


def predicate_signature(predicate: Any) -> tuple[list[str], bool, bool]:
    """``(argument types, is a DeepPredicate, is a StandardPredicate)`` of a registered predicate.

    Examples:
        >>> p = declare_predicate("DocSig", ["UniqueStringID", "UniqueIntID"], deep=True)
        >>> predicate_signature(p)
        (['UniqueStringID', 'UniqueIntID'], True, True)
        >>> unregister_predicate("DocSig")
    """
    types = [str(predicate.getArgumentType(i)) for i in range(int(predicate.getArity()))]
    return types, bool(isinstance(predicate, J.DeepPredicate)), bool(isinstance(predicate, J.StandardPredicate))


def declare_predicate(name: str, types: Sequence[str], *, deep: bool) -> Any:
    """Declare (or fetch) a predicate in PSL's global registry.

    Examples:
        >>> declare_predicate("DocDecl", ["UniqueStringID"], deep=False).getArity()
        1
        >>> unregister_predicate("DocDecl")
    """
    java_types = [getattr(J.ConstantType, t) for t in types]
    with guard(f"declaring predicate {name}"):
        if deep:
            return J.DeepPredicate.get(name, *java_types)
        return J.StandardPredicate.get(name, *java_types)


def unregister_predicate(name: str) -> None:
    """Remove a predicate from PSL's global (static) predicate registry.

    PSL never forgets a predicate; pslbridge removes the ones it declared once no open program
    uses them, so a later program may declare the same name with another arity or kind.

    Examples:
        >>> _ = declare_predicate("DocGone", ["UniqueStringID"], deep=False)
        >>> unregister_predicate("DocGone"); find_predicate("DocGone") is None
        True
    """
    _registry_map().remove(name.upper())


def _registry_map() -> Any:
    """PSL's static name -> predicate map (``Predicate.predicates``)."""
    if not _REGISTRY:
        field = J.Predicate.class_.getDeclaredField("predicates")
        field.setAccessible(True)
        _REGISTRY.append(field.get(None))
    return _REGISTRY[0]


class FunctionErrors(list):
    """Failures of Python callables behind external functional predicates, recorded during grounding."""


def declare_function(name: str, types: Sequence[str], fn: Callable[..., float], errors: FunctionErrors) -> Any:
    """Declare an external functional predicate whose values come from the Python callable ``fn``.

    PSL calls ``fn(*arguments)`` (the arguments as the data write them, strings) while grounding; it must return a
    number in [0, 1]. A callable that raises or returns anything else makes the call count 0 and is recorded in
    ``errors`` (the program then refuses to build, naming the predicate, arguments and problem).

    Examples:
        >>> errors = FunctionErrors()
        >>> pred = declare_function("DocSim", ["UniqueStringID"] * 2, lambda a, b: float(a == b), errors)
        >>> str(pred.getName()), int(pred.getArity())
        ('DOCSIM', 2)
        >>> unregister_predicate("DocSim")
    """
    import jpype

    java_types = jpype.JArray(J.ConstantType)([getattr(J.ConstantType, t) for t in types])

    @jpype.JImplements(_PSL + "model.function.ExternalFunction")
    class PythonFunction:
        @jpype.JOverride
        def getValue(self, db: Any, args: Any) -> float:
            values = [_constant_text(a) for a in args]
            try:
                value = float(fn(*values))
            except Exception as exc:  # noqa: BLE001 - reported after grounding, with the arguments
                errors.append(f"{name}{tuple(values)} raised {type(exc).__name__}: {exc}")
                return 0.0
            if not 0.0 <= value <= 1.0:
                errors.append(f"{name}{tuple(values)} returned {value}, not a number in [0, 1]")
                return 0.0
            return value

        @jpype.JOverride
        def getArity(self) -> int:
            return len(types)

        @jpype.JOverride
        def getArgumentTypes(self) -> Any:
            return java_types

    with guard(f"declaring functional predicate {name}"):
        return J.ExternalFunctionalPredicate.get(name, PythonFunction())


def _constant_text(constant: Any) -> str:
    for getter in ("getID", "getValue"):
        method = getattr(constant, getter, None)
        if method is not None:
            return str(method())
    return str(constant.rawToString())


def evaluate(evaluator: str, options: Mapping[str, str], predicate: Any, database: Any, truth: Any) -> dict[str, Any]:
    """Run one of PSL's evaluators (built under its options) on a predicate's values against its truth.

    Returns:
        ``rep_metric``, ``normalized`` (PSL's normalised representative metric), ``higher_is_better`` and ``stats``
        (its ``getAllStats()`` text, as the jar prints it).

    Examples:
        >>> from pslbridge.model_files import EvaluationSpec, ModelSpec
        >>> from pslbridge.program import GroundProgram
        >>> spec = ModelSpec.from_python(rules=["1: EvA(X) -> EvB(X) ^2"], predicates={"EvA": 1, "EvB": 1},
        ...     observations={"EvA": [("x", 1.0)]}, targets={"EvB": [("x",)]}, truth={"EvB": [("x", 1.0)]})
        >>> spec.predicates["EVB"].evaluations = [EvaluationSpec("ContinuousEvaluator")]
        >>> with GroundProgram(spec) as small:  # GroundProgram.evaluate calls this
        ...     _ = small.solve(reset=True)
        ...     row = small.evaluate()[0]
        >>> row["evaluator"], row["stats"].startswith("MAE")
        ('ContinuousEvaluator', True)
    """
    with config_layer(options), guard(f"evaluating with {evaluator}"):
        instance = J.Reflection.newObject(evaluator)
        instance.compute(database, truth, predicate)
        return {
            "evaluator": str(instance.getClass().getSimpleName()),
            "rep_metric": float(instance.getRepMetric()),
            "normalized": float(instance.getNormalizedRepMetric()),
            "higher_is_better": bool(instance.isHigherRepBetter()),
            "stats": str(instance.getAllStats()),
        }


_KNOWN_OPTIONS: list[str] = []


def known_options() -> list[str]:
    """Every option name PSL 2.4.0 declares (``Options`` and ``RuntimeOptions``), read from the jar.

    Examples:
        >>> "admmreasoner.maxiterations" in known_options(), "duallcqp.primaldualthreshold" in known_options()
        (True, True)
    """
    if not _KNOWN_OPTIONS:
        for holder in (J.Options, J.RuntimeOptions):
            for field in holder.class_.getFields():
                if J.Modifier.isStatic(field.getModifiers()) and J.Option.class_.isAssignableFrom(field.getType()):
                    _KNOWN_OPTIONS.append(str(field.get(None).name()))
    return list(_KNOWN_OPTIONS)


# --- data store, grounding --------------------------------------------------------------


def open_memory_datastore(url: str, predicates: Sequence[Any]) -> tuple[Any, dict[str, Any]]:
    """An in-memory SQLite data store with the predicates registered and its three partitions.

    Examples:
        >>> store, parts = open_memory_datastore("jdbc:sqlite:file:doc?mode=memory&cache=shared", [])
        >>> sorted(parts)
        ['observations', 'targets', 'truth']
        >>> store.close()
    """
    with guard("opening the in-memory database"):
        datastore = J.RDBMSDataStore(J.SQLiteDriver(url, True))
        for predicate in predicates:
            datastore.registerPredicate(predicate)
        partitions = {name: datastore.getPartition(name) for name in ("observations", "targets", "truth")}
    return datastore, partitions


def java_rows(rows: Any) -> Any:
    """A nested Python list as a ``java.util.List`` in one JSON call (per-row calls are slow).

    Examples:
        >>> java_rows([["a", "b"]]).size()
        1
    """
    return J.ObjectMapper().readValue(json.dumps(rows), J.List)


def insert_rows(datastore: Any, predicate: Any, partition: Any, args: list[list[str]], values: Any = None) -> None:
    """Insert argument rows (and truth values) of one predicate into one partition.

    Examples:
        >>> pred = declare_predicate("DocRows", ["UniqueStringID"], deep=False)
        >>> store, parts = open_memory_datastore("jdbc:sqlite:file:docrows?mode=memory&cache=shared", [pred])
        >>> insert_rows(store, pred, parts["observations"], [["a"], ["b"]], [1.0, 0.5])
        >>> db, truth = open_databases(store, parts, [pred])
        >>> int(db.getAtomStore().size())
        2
        >>> db.close(); truth.close(); store.close(); unregister_predicate("DocRows")
    """
    inserter = datastore.getInserter(predicate, partition)
    rows = java_rows(args)
    if values is not None:
        inserter.insertAllValues(java_rows([float(v) for v in values]), rows)
    else:
        inserter.insertAll(rows)


def open_databases(datastore: Any, partitions: Mapping[str, Any], closed: Sequence[Any]) -> tuple[Any, Any]:
    """The target database (targets over observations, ``closed`` predicates closed) and the truth database.

    Examples:
        >>> store, parts = open_memory_datastore("jdbc:sqlite:file:docdb?mode=memory&cache=shared", [])
        >>> db, truth = open_databases(store, parts, [])
        >>> int(db.getAtomStore().size())
        0
        >>> db.close(); truth.close(); store.close()
    """
    closed_set = J.HashSet()
    for predicate in closed:
        closed_set.add(predicate)
    db = datastore.getDatabase(partitions["targets"], closed_set, partitions["observations"])
    truth = datastore.getDatabase(partitions["truth"], datastore.getRegisteredPredicates())
    return db, truth


@contextlib.contextmanager
def config_layer(options: Mapping[str, str]) -> Iterator[None]:
    """PSL options set on a fresh configuration layer for the duration of the block.

    Examples:
        >>> with config_layer({"admmreasoner.maxiterations": "7"}):
        ...     str(J.Config.getString("admmreasoner.maxiterations", None))
        '7'
        >>> J.Config.getString("admmreasoner.maxiterations", None) is None
        True
    """
    J.Config.pushLayer()
    try:
        for key, value in options.items():
            J.Config.setProperty(key, value, False)
        yield
    finally:
        J.Config.popLayer()


def option_value(key: str) -> str | None:
    """A PSL option's current value, or None when unset.

    Examples:
        >>> option_value("parallel.numthreads") is not None
        True
    """
    value = J.Config.getString(key, None)
    return None if value is None else str(value)


def clear_option(key: str) -> None:
    """Unset a process-wide PSL option.

    Examples:
        >>> clear_option("pslbridge.never.set")
    """
    J.Config.clearProperty(key, False)


def new_inference(reasoner: str, rules: Sequence[Any], database: Any) -> Any:
    """The inference application of ``reasoner`` (a key of :data:`REASONERS`); it grounds ``rules``.

    Examples:
        >>> program.solver.app.getClass().getSimpleName()  # what GroundProgram built with it
        'ADMMInference'
    """
    rule_list = J.ArrayList()
    for rule in rules:
        rule_list.add(rule)
    return getattr(J, REASONERS[reasoner])(rule_list, database)


def join_texts(java_objects: Any, count: int, delimiter: str) -> str:
    """``toString()`` of the first ``count`` objects of a Java array, joined in one Java call.

    Examples:
        >>> join_texts(J.ArrayList().toArray(), 0, "|")
        ''
    """
    if count == 0:
        return ""
    return str(J.PslStringUtils.join(delimiter, J.Arrays.copyOf(java_objects, count)))


def term_objects(term_store: Any) -> Any:
    """The term store's terms as a Java ``Object[]`` (read through the store's own list).

    Examples:
        >>> len(term_objects(program.solver.term_store)) == program.term_count
        True
    """
    field = J.SimpleTermStore.class_.getDeclaredField("terms")
    field.setAccessible(True)
    return field.get(term_store).toArray()


def new_float_array(size: int) -> Any:
    """A zeroed Java ``float[]``.

    Examples:
        >>> len(new_float_array(3))
        3
    """
    import jpype

    return jpype.JArray(jpype.JFloat)(int(size))


def copy_range(java_array: Any, start: int, stop: int) -> Any:
    """A copy of ``java_array[start:stop]`` as a Java array of the same type.

    Examples:
        >>> list(copy_range(J.Arrays.asList(1, 2, 3).toArray(), 1, 3))
        [2, 3]
    """
    return J.Arrays.copyOfRange(java_array, int(start), int(stop))


def array_copy(source: Any, target: Any, start: int) -> None:
    """``System.arraycopy`` of all of ``source`` into ``target`` from ``start``.

    Examples:
        >>> target = new_float_array(3); array_copy(new_float_array(2), target, 1)
    """
    J.System.arraycopy(source, 0, target, int(start), len(source))


# --- reasoner internals ---------------------------------------------------------------


_METHODS: dict[tuple[str, str], Any] = {}
_ADMM_CACHE: list[Any] = []


def _protected_method(cls: Any, name: str, *param_classes: str) -> Any:
    key = (str(cls.class_.getName()), name)
    if key not in _METHODS:
        params = [J.Class.forName(p) for p in param_classes]
        method = cls.class_.getDeclaredMethod(name, *params)
        method.setAccessible(True)
        _METHODS[key] = method
    return _METHODS[key]


def compute_objective(reasoner: Any, term_store: Any) -> tuple[float, int]:
    """The reasoner's weighted objective and violated constraints at the current values.

    Uses the reasoner's own (protected) ``parallelComputeObjective`` by reflection. For the dual-BCD
    reasoners it includes their regularisation ``λ Σ x²`` over unfixed atoms.

    Examples:
        >>> objective, violated = compute_objective(program.solver.reasoner, program.solver.term_store)
        >>> objective >= 0, violated
        (True, 0)
    """
    method = _protected_method(J.Reasoner, "parallelComputeObjective", _PSL + "reasoner.term.TermStore")
    result = method.invoke(reasoner, term_store)
    cls = result.getClass()
    objective = cls.getDeclaredField("objective")
    violated = cls.getDeclaredField("violatedConstraints")
    objective.setAccessible(True)
    violated.setAccessible(True)
    return float(objective.getFloat(result)), int(violated.getLong(result))


def clear_admm_cache() -> None:
    """Empty ADMM's static cache of Cholesky factors.

    ``ADMMObjectiveTerm`` caches the factor of each squared term's system in a static map
    keyed by a 32-bit hash of (weight, step size, coefficients). Entries are never evicted,
    so in a long-lived process (several programs, changing rule weights while learning) the
    map grows without bound and a hash collision hands a term another term's factor: a wrong
    MAP state. Seen here: a second program's objective 0.9959 instead of 0.9418. Clearing the
    map before each solve makes every solve behave as in a fresh JVM.

    Examples:
        >>> clear_admm_cache()
    """
    if not _ADMM_CACHE:
        field = J.ADMMObjectiveTerm.class_.getDeclaredField("lowerTriangleCache")
        field.setAccessible(True)
        _ADMM_CACHE.append(field.get(None))
    _ADMM_CACHE[0].clear()


def regularization_parameter(reasoner: Any) -> float:
    """The dual-BCD reasoner's ``regularizationParameter`` (λ), 0 for other reasoners.

    Examples:
        >>> regularization_parameter(program.solver.reasoner)  # ADMM has none
        0.0
    """
    try:
        return float(reasoner.regularizationParameter)
    except AttributeError:
        return 0.0


def add_proximity_terms(database: Any, term_store: Any, atom_indexes: Sequence[int], weight: float) -> tuple[Any, list]:
    """Add the bilevel learners' proximity terms ``weight · (x_i − p_i)²`` for each atom index ``i``.

    Reproduces what PSL 2.4.0's ``Minimizer`` adds after grounding: per atom one observed
    ``augmented<Predicate>`` atom ``p_i`` appended to the atom store, and the two ground terms (``<=`` and
    ``>=``) of the squared arithmetic rule ``x_i − p_i = 0``, with constants left unmerged so that ``p_i``
    stays a variable read from the atom-value array. PSL makes one rule object per atom; here all terms
    share one (terms read only its weight and active flag), so switching them on and off is one call.

    Args:
        database: The program's target database.
        term_store: Its term store.
        atom_indexes: Atom-store indexes of the (unfixed) atoms.
        weight: The proximity weight (``minimizer.proxruleweight``).

    Returns:
        The shared proximity rule (inactive) and the observed proximity atoms, in ``atom_indexes`` order
        (they follow the existing atoms in the atom store, in the same order).

    Examples:
        >>> from pslbridge.model_files import ModelSpec
        >>> from pslbridge.program import GroundProgram
        >>> spec = ModelSpec.from_python(rules=["1: ApA(X) -> ApB(X) ^2"], predicates={"ApA": 1, "ApB": 1},
        ...     observations={"ApA": [("x", 1.0)]}, targets={"ApB": [("x",)]})
        >>> with GroundProgram(spec, reasoner="dualbcd") as small:  # GroundProgram.proximity calls it
        ...     small.proximity(0.01).atoms.tolist(), int(small.solver.term_store.size())
        ([2], 3)
    """
    atom_store = database.getAtomStore()
    generator = term_store.getTermGenerator()
    merge = bool(generator.getMergeConstants())
    one, minus_one, zero = J.ConstantNumber(1.0), J.ConstantNumber(-1.0), J.ConstantNumber(0.0)
    comparators = J.FunctionComparator
    floats = J.Arrays.asList(J.Float.valueOf(1.0), J.Float.valueOf(-1.0))
    rule, observed_atoms = None, []
    generator.setMergeConstants(False)
    try:
        with guard("adding proximity terms"):
            for index in atom_indexes:
                atom = atom_store.getAtom(int(index))
                source = atom.getPredicate()
                predicate = J.StandardPredicate.get("augmented" + str(source.getName()), source.getArgumentTypes())
                observed = J.UnmanagedObservedAtom(predicate, atom.getArguments(), atom.getValue())
                atom_store.addAtom(observed)
                pair = J.Arrays.asList(atom, observed)
                if rule is None:
                    expression = J.ArithmeticRuleExpression(J.Arrays.asList(one, minus_one), pair, comparators.EQ, zero)
                    rule = J.WeightedArithmeticRule(expression, float(weight), True)
                    rule.setActive(False)
                for comparator in (comparators.LTE, comparators.GTE):
                    term_store.add(J.WeightedGroundArithmeticRule(rule, floats, pair, comparator, 0.0))
                observed_atoms.append(observed)
    finally:
        generator.setMergeConstants(merge)
    return rule, observed_atoms


def set_observed_values(atoms: Sequence[Any], values: np.ndarray) -> None:
    """Give observed atoms new values (their objects: the dual reasoners read fixed atoms from them).

    Examples:
        >>> from pslbridge.model_files import ModelSpec
        >>> from pslbridge.program import GroundProgram
        >>> spec = ModelSpec.from_python(rules=["1: SoA(X) -> SoB(X) ^2"], predicates={"SoA": 1, "SoB": 1},
        ...     observations={"SoA": [("x", 1.0)]}, targets={"SoB": [("x",)]})
        >>> with GroundProgram(spec, reasoner="dualbcd") as small:  # Proximity.set calls it
        ...     proximity = small.proximity(0.01)
        ...     proximity.set(np.array([0.25]))
        ...     proximity.values().tolist()
        [0.25]
    """
    with guard("setting proximity values"):
        for atom, value in zip(atoms, values.tolist()):
            atom._assumeValue(value)


def proximity_predicates() -> list[str]:
    """Names of the ``augmented*`` predicates the proximity terms registered.

    Examples:
        >>> isinstance(proximity_predicates(), list)
        True
    """
    return [str(k) for k in _registry_map().keySet() if str(k).startswith("AUGMENTED")]


# --- PSL's own Runtime ----------------------------------------------------------------


def run_runtime_config(config_json: str, base_path: str) -> tuple[str, list[dict[str, float]]]:
    """Run PSL's ``Runtime.serializedRun`` on a config; return its JSON answer and each solve's stats.

    Examples:
        >>> config = {"rules": ["1: RcA(X) -> RcB(X) ^2"], "options": {"runtime.log.level": "WARN"},
        ...           "predicates": {"RcA/1": {"observations": [["x", "1"]]}, "RcB/1": {"targets": [["x"]]}}}
        >>> text, solves = run_runtime_config(json.dumps(config), ".")
        >>> json.loads(text)["atoms"][0]["predicate"], solves[0]["violated"]
        ('RCB', 0)
        >>> unregister_predicate("RcA"); unregister_predicate("RcB")
    """
    from . import _javalog

    with _javalog.solve_events() as solves, guard("running PSL's Runtime"):
        result = str(J.PslRuntime.serializedRun(config_json, base_path))
    return result, [dict(s) for s in solves]


def float32(value: float) -> float:
    """A value rounded to Java's ``float`` (PSL stores rule weights as ``float``).

    Examples:
        >>> float32(0.1)
        0.10000000149011612
    """
    return float(np.float32(value))
