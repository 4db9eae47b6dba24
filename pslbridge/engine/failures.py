"""Java failures become Python ones here, at one choke point: typed errors, heap exhaustion, Ctrl-C.

:func:`guard` wraps every call into PSL; :func:`translate` turns a Java exception into the most specific
:class:`~pslbridge.errors.PslBridgeError` (rule syntax errors with file and line, heap exhaustion as
:class:`~pslbridge.errors.EngineMemoryError`), chained to JPype's Java exception.

Examples:
    >>> from pslbridge.engine.classes import J
    >>> with guard("an example"):
    ...     J.Integer.parseInt("x1")
    Traceback (most recent call last):
    ...
    pslbridge.errors.EngineError: PSL failed during an example: NumberFormatException: For input string: "x1"
"""

from __future__ import annotations

import contextlib
import logging
import re
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

from ..errors import EngineError, EngineMemoryError, ModelFileError, PslBridgeError
from .classes import J

log = logging.getLogger(__name__)


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
        >>> from pslbridge.engine.predicates import declare_predicate, unregister_predicate
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
