"""PSL's log4j output, Java side: a Python appender, PSL's level, and each solve's statistics.

:mod:`pslbridge.jvm` installs the appenders once and decides which Python logger gets what; this module is
the Java half. The reasoner's closing event ("Final Objective: …, Total Number of Iterations: …") is the only
place PSL reports a solve's iteration count. It goes to a Java-side in-memory appender, not to Python: no
Python code runs while a solve finishes, so a Ctrl-C can never land inside a log callback and lose the event.
Each line is tagged with the Java thread that ran the solve, and :func:`solve_events` hands each calling
thread the statistics of its own solves only, so concurrent solves in other threads never mix them.

Examples:
    >>> import json, pslbridge
    >>> with solve_events() as solves:
    ...     pass
    >>> solves
    []
"""

from __future__ import annotations

import contextlib
import logging
import re
import threading
from collections.abc import Callable, Iterator
from typing import Any

from .classes import J

__all__ = ["install_appender", "remove_appender", "set_psl_log_level", "solve_events"]

_REASONER_LOGGER = "org.linqs.psl.reasoner.Reasoner"
_NAME = "pslbridge-python"
_FINAL = re.compile(
    r"^(\d+)\tFinal Objective: ([^,]+), Violated Constraints: (\d+), Total Optimization Time: (\d+), "
    r"Total Number of Iterations: (\d+)$"
)
_solves: list[Any] = []  # [the StringWriter the Java appender writes the closing events into]
_pending: dict[int, list[dict[str, float]]] = {}  # Java thread id -> events not yet handed out
_lock = threading.Lock()
_psl_log = logging.getLogger("pslbridge.psl")


@contextlib.contextmanager
def solve_events() -> Iterator[list[dict[str, float]]]:
    """Collect the statistics of every solve that finishes on this thread inside the block.

    Each entry has ``objective``, ``violated``, ``time_ms`` and ``iterations``; the list is filled when the
    block ends. The innermost block collects (every :meth:`pslbridge.program.Solver.solve` opens one).

    Examples:
        >>> import json, pslbridge.jvm
        >>> with solve_events() as events:
        ...     text, solves = pslbridge.jvm.run_psl_runtime(json.dumps({"rules": ["1: SeA(X) -> SeB(X) ^2"],
        ...         "predicates": {"SeA/1": {"observations": [["x", "1"]]}, "SeB/1": {"targets": [["x"]]}},
        ...         "options": {"runtime.log.level": "WARN"}}), ".", release=True)
        >>> events, solves[0]["violated"], solves[0]["iterations"] > 0
        ([], 0, True)
    """
    collected: list[dict[str, float]] = []
    try:
        yield collected
    finally:
        collected.extend(_take_events())


def _take_events() -> list[dict[str, float]]:
    """The closing events of the calling thread's solves since its last call."""
    if not _solves:
        return []
    import jpype

    thread = int(J.Thread.currentThread().getId())
    buffer = _solves[0].getBuffer()
    with _lock:
        with jpype.synchronized(buffer):
            text = str(buffer.toString())
            buffer.setLength(0)
        for line in text.splitlines():
            match = _FINAL.match(line)
            if match:
                event = {
                    "objective": float(match.group(2)),
                    "violated": int(match.group(3)),
                    "time_ms": int(match.group(4)),
                    "iterations": int(match.group(5)),
                }
                _pending.setdefault(int(match.group(1)), []).append(event)
        mine = _pending.pop(thread, [])
    if mine and _psl_log.isEnabledFor(logging.INFO):
        for event in mine:
            _psl_log.info(
                "Reasoner - Final Objective: %s, Violated Constraints: %d, Total Optimization Time: %d, Total Number "
                "of Iterations: %d",
                event["objective"],
                event["violated"],
                event["time_ms"],
                event["iterations"],
            )
    return mine


def set_psl_log_level(level: str) -> None:
    """Set PSL's (log4j root) level, e.g. ``"WARN"``; the reasoner's closing event stays on.

    Examples:
        >>> set_psl_log_level("WARN")
    """
    J.PslLogger.setLevel(level)
    context = J.LoggerContext.getContext(False)
    reasoner = context.getConfiguration().getLoggerConfig(_REASONER_LOGGER)
    if str(reasoner.getName()) == _REASONER_LOGGER:
        reasoner.setLevel(J.Log4jLevel.getLevel(level if level in ("DEBUG", "TRACE") else "INFO"))
        context.updateLoggers()


def _appender_class() -> type:
    import jpype

    @jpype.JImplements("org.apache.logging.log4j.core.Appender")
    class PythonAppender:
        def __init__(self, emit: Callable[[str, str, str], None]) -> None:
            self.emit = emit
            self.started = True

        @jpype.JOverride
        def append(self, event: Any) -> None:
            try:
                name = str(event.getLoggerName())
                self.emit(str(event.getLevel().name()), name, str(event.getMessage().getFormattedMessage()))
            except Exception:  # noqa: BLE001 - logging must never break the engine
                pass

        @jpype.JOverride
        def getName(self) -> str:
            return _NAME

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
            return J.LifeCycleState.STARTED if self.started else J.LifeCycleState.INITIALIZED

        @jpype.JOverride
        def initialize(self) -> None:
            pass

        @jpype.JOverride
        def start(self) -> None:
            self.started = True

        @jpype.JOverride
        def stop(self) -> None:
            self.started = False

        @jpype.JOverride
        def isStarted(self) -> bool:
            return self.started

        @jpype.JOverride
        def isStopped(self) -> bool:
            return not self.started

    return PythonAppender


def install_appender(emit: Callable[[str, str, str], None]) -> Any:
    """Route PSL's log: every event to ``emit(level, logger, message)``, solve statistics to memory.

    Replaces log4j's console appender with a Python one. The reasoner's INFO events (each solve's closing
    statistics) go to an in-memory Java appender instead (read by :func:`solve_events`); its warnings and
    errors reach ``emit`` like every other logger's.

    Args:
        emit: Receives the level name, the Java logger name and the formatted message.

    Returns:
        The appenders (keep a reference: log4j holds the Java side only).

    Examples:
        >>> from pslbridge import jvm
        >>> jvm.is_started()  # pslbridge installed its appenders when the JVM started
        True
    """
    import jpype

    appender = _appender_class()(emit)
    java_appender = jpype.JObject(appender, J.Appender)
    context = J.LoggerContext.getContext(False)
    config = context.getConfiguration()
    root = config.getLoggerConfig(J.LogManager.ROOT_LOGGER_NAME)
    for name in list(root.getAppenders().keySet()):
        root.removeAppender(name)
    config.addAppender(java_appender)
    root.addAppender(java_appender, None, None)
    writer = J.StringWriter()
    layout = J.PatternLayout.newBuilder().withPattern("%tid\t%m%n").withConfiguration(config).build()
    solves = J.WriterAppender.createAppender(layout, None, writer, _NAME + "-solves", False, True)
    solves.start()
    config.addAppender(solves)
    reasoner = J.LoggerConfig(_REASONER_LOGGER, J.Log4jLevel.INFO, False)
    reasoner.addAppender(solves, J.Log4jLevel.INFO, None)
    reasoner.addAppender(java_appender, J.Log4jLevel.WARN, None)
    config.addLogger(_REASONER_LOGGER, reasoner)
    context.updateLoggers()
    _solves[:] = [writer]
    return (appender, java_appender, solves)


def remove_appender() -> None:
    """Detach pslbridge's appenders (at interpreter exit, before the JVM shuts down).

    Examples:
        >>> callable(remove_appender)  # registered with atexit by pslbridge.jvm
        True
    """
    try:
        context = J.LoggerContext.getContext(False)
        config = context.getConfiguration()
        for logger in (config.getLoggerConfig(J.LogManager.ROOT_LOGGER_NAME), config.getLoggerConfig(_REASONER_LOGGER)):
            logger.removeAppender(_NAME)
            logger.removeAppender(_NAME + "-solves")
        context.updateLoggers()
    except Exception:  # noqa: BLE001 - best effort at exit
        pass
