"""PSL's process-wide set-up after the JVM starts, and facts about the running JVM (versions, heap, threads).

Examples:
    >>> psl_version().startswith("2.4.0")
    True
"""

from __future__ import annotations

import contextlib
import logging
import re
import threading
import time
from collections.abc import Iterator
from typing import Any

from ..errors import EngineMemoryError
from .classes import J
from .failures import forget_exhaustion, translate, watch_heap
from .predicates import registry_map

log = logging.getLogger(__name__)

#: Reflected fields that the failure paths read, opened when PSL starts (see :func:`_prepare_recovery`).
_RECOVERY: dict[str, Any] = {}

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
    _forget_workers()
    forget_exhaustion()


#: Names of the threads of a ``java.util.concurrent`` pool (PSL's worker pool is one): ``pool-<pool>-thread-<n>``,
#: numbered from 1 in the order the pool made them.
_POOL_THREAD = re.compile(r"pool-(\d+)-thread-(\d+)")
#: How long :func:`watch_workers` waits for a worker that is still ending to finish (its replacement then exists).
_SETTLE_S = 1.0


def _pool_threads(group: Any) -> list[Any]:
    """Every live thread of ``group`` (the root thread group) named as a ``java.util.concurrent`` pool's thread."""
    import jpype

    threads = jpype.JArray(J.Thread)(group.activeCount() + 8)
    count = group.enumerate(threads, True)
    return [t for t in threads[:count] if _POOL_THREAD.fullmatch(str(t.getName()))]


def _numbers(thread: Any) -> tuple[int, int]:
    """The pool number and the thread number in a pool thread's name."""
    pool, number = _POOL_THREAD.fullmatch(str(thread.getName())).groups()
    return int(pool), int(number)


#: What :func:`watch_workers` last saw: the pool threads alive, how many threads the JVM had started, the pools with a
#: dead worker and not yet reported, and those reported (the pool is then shut down, so a pool is reported once).
_WORKERS: dict[str, Any] = {"threads": [], "started": -1, "dead": set(), "reported": set(), "in_flight": 0}
_IN_FLIGHT = threading.Lock()


def _look_at_workers() -> None:
    """Note the pools whose known threads ended, and look at the pool threads again if any thread started."""
    if "root" not in _WORKERS:
        group = J.Thread.currentThread().getThreadGroup()
        while (parent := group.getParent()) is not None:
            group = parent
        _WORKERS.update(root=group, mx=J.ManagementFactory.getThreadMXBean())
    terminated = J.ThreadState.TERMINATED
    ended = {_numbers(t)[0] for t in _WORKERS["threads"] if t.getState() == terminated}
    started = int(_WORKERS["mx"].getTotalStartedThreadCount())  # a thread replaced within the block counts too
    dead = set()
    if ended or started != _WORKERS["started"]:
        threads = _pool_threads(_WORKERS["root"])
        live = [_numbers(t) for t in threads]
        size = thread_count()
        # A thread that ended in a pool still running died (a pool that was shut down has no threads left); a fixed
        # pool makes a thread numbered past its size only to replace a dead one.
        dead = (ended & {pool for pool, _ in live}) | {pool for pool, number in live if number > size}
        _WORKERS.update(threads=threads, started=started)
    _WORKERS["dead"] |= dead - _WORKERS["reported"]


def _dead_workers() -> set[int]:
    """Pools (numbers in their threads' names) with a worker thread found dead since the last call."""
    _look_at_workers()
    dead, _WORKERS["dead"] = _WORKERS["dead"], set()
    _WORKERS["reported"] |= dead
    return dead


def _forget_workers() -> None:
    """Forget the pool threads seen (PSL's pool was shut down: its threads end without having died)."""
    _WORKERS.update(threads=[], started=-1)


@contextlib.contextmanager
def watch_workers(context: str) -> Iterator[None]:
    """Raise :class:`~pslbridge.errors.EngineMemoryError` if a PSL worker thread died during the block.

    PSL's workers catch ``Exception`` only: a worker that fails with a Java ``Error`` (in practice an
    ``OutOfMemoryError``) dies with its piece of work undone while the task goes on and returns normally,
    so a grounding would lack ground rules, or an inference step would skip term updates, silently. After
    the block this looks for a pool thread seen before that has ended, or one numbered past the pool's size
    (the pool's replacement of a dead thread); a failing block raises its own error unchanged. PSL's pool is
    then shut down, so the next task starts a fresh one. 30-80 microseconds a call (2 cores).

    Args:
        context: What the block does, for the message.

    Raises:
        EngineMemoryError: A worker thread died during the block (or during a call before it or beside it on
            another thread).

    Examples:
        >>> with watch_workers("grounding"):
        ...     pass
    """
    with _IN_FLIGHT:
        _WORKERS["in_flight"] += 1
    try:
        yield
    finally:
        with _IN_FLIGHT:
            _WORKERS["in_flight"] -= 1
            alone = _WORKERS["in_flight"] == 0
    deadline = time.monotonic() + _SETTLE_S
    runnable = J.ThreadState.RUNNABLE
    _look_at_workers()
    # A worker that died at the task's end may still be ending (RUNNABLE) and not yet replaced. Only the last
    # watched call to end waits: while other threads' calls run, their workers are busy (and they check).
    while alone and any(t.getState() == runnable for t in _WORKERS["threads"]) and time.monotonic() < deadline:
        time.sleep(0.001)
        _look_at_workers()
    if _dead_workers():
        release_workers()
        raise EngineMemoryError(
            f"a PSL worker thread died during {context} (a Java error on a worker thread, in "
            "practice the heap running out), so its result would be incomplete; raise the heap with "
            "pslbridge.jvm.configure(max_heap='8g') or PSLBRIDGE_HEAP=8g",
            java_class="java.lang.OutOfMemoryError",
        )


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
    registry_map()


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
