"""Experiment runs as Ray tasks: one process (one JVM, one TensorFlow) per run, retried if the process dies.

A *run* is one split of one setting: a function of the experiment runners (``"module:function"``) with its
keyword arguments. :func:`run_all` executes runs on a local Ray instance (started for you) or an existing
cluster (``address``). Each task declares its resources (one CPU, a memory estimate) so Ray does not
oversubscribe a machine, sizes its thread pools to that CPU (:func:`run_environment`, set by :func:`start_ray`:
PSL's workers and TensorFlow's op pools, which otherwise take every core of the machine), and runs in a worker
process that exits after it (``max_calls=1``): PSL keeps static state and a process holds one JVM, so runs never
share a process. A worker killed mid-run (``kill -9``,
the kernel's out-of-memory killer, a lost node) is retried by Ray; a run that *raises* (a model, data or
option error) is not retried: its error comes back as the run's result, and the runners report it in
``results.md``. Each run that finished without error is stored as ``<out>/runs/<key>.json``; a sweep
restarted with the same ``out`` skips the runs stored there (and tries the failed ones again).

The process that drives a sweep must not have started the JVM (Ray's driver installs crash-signal handlers
over the JVM's; a JVM started *after* Ray, as in each run's worker, is fine): :func:`run_all` refuses then.
Ray is optional (``pip install 'pslbridge[ray]'``): the sequential runners work without it, and asking for
Ray without it installed is a :class:`~pslbridge.errors.ConfigurationError`.

Example:
    >>> import tempfile
    >>> out = Path(tempfile.mkdtemp())
    >>> runs = [Run(f"double-{i}", "experiments.sweep:example_run", {"x": i}) for i in range(2)]
    >>> _ = (out / "runs").mkdir(), (out / "runs" / "double-1.json").write_text('{"value": 2}')
    >>> run_all(runs[1:], out)  # stored: not run again (Ray is not even started)
    {'double-1': {'value': 2}}

    ``run_all(runs, out, workers=2)`` runs ``double-0`` as a Ray task (see ``tests/test_sweep.py``).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import os
import re
import time
import traceback
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pslbridge import jvm
from pslbridge.errors import ConfigurationError

from .arguments import positive_int

__all__ = [
    "RUN_CPUS",
    "THREAD_VARIABLES",
    "RayOptions",
    "Run",
    "add_ray_arguments",
    "check_driver",
    "concurrent_runs",
    "example_run",
    "local_workers",
    "require_ray",
    "run_all",
    "run_digest",
    "run_environment",
    "start_ray",
    "workers_text",
]

#: CPUs each run (a Ray task or Tune trial) declares; its thread pools are sized to match (:func:`run_environment`).
RUN_CPUS = 1

#: The environment variables that size a run's thread pools: PSL's workers (``parallel.numthreads``, see
#: :mod:`pslbridge.jvm`) and TensorFlow's intra- and inter-op pools. Read when the JVM and TensorFlow start.
THREAD_VARIABLES = ("PSLBRIDGE_THREADS", "TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS")

#: Memory (MB) a run's process needs before its program: Python, TensorFlow, the JVM and its heap.
BASE_MEMORY_MB = 1500


@dataclass(frozen=True)
class Run:
    """One independent run: ``fn`` (``"module:function"``) called with ``kwargs`` in a fresh process.

    Attributes:
        key: Unique, file-name-safe id (the stored result is ``runs/<key>.json``).
        fn: The function to call, as ``"package.module:function"``; it returns a JSON-serialisable dict.
        kwargs: Its keyword arguments (plain values: they travel to the worker).
        memory_mb: Memory the run needs, declared to Ray so a machine is not oversubscribed.

    Example:
        >>> Run("add1-300-split0", "experiments.mnist_add.runner:run_split_json", {}).memory_mb
        1500
        >>> Run("a b", "m:f", {})
        Traceback (most recent call last):
        ...
        ValueError: run key 'a b' must be letters, digits, '.', '_', '+' or '-'
    """

    key: str
    fn: str
    kwargs: dict[str, Any] = field(default_factory=dict)
    memory_mb: int = BASE_MEMORY_MB

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[A-Za-z0-9._+-]+", self.key):
            raise ValueError(f"run key {self.key!r} must be letters, digits, '.', '_', '+' or '-'")


@dataclass(frozen=True)
class RayOptions:
    """Where a runner's runs go: an existing cluster's ``address``, or a local instance with ``workers`` CPUs.

    Example:
        >>> parser = argparse.ArgumentParser(); add_ray_arguments(parser)
        >>> RayOptions.from_args(parser.parse_args(["--ray", "--workers", "2"]))
        RayOptions(address=None, workers=2)
        >>> RayOptions.from_args(parser.parse_args([])) is None
        True
    """

    address: str | None = None
    workers: int | None = None

    @classmethod
    def from_args(cls, args: argparse.Namespace, parser: argparse.ArgumentParser | None = None) -> RayOptions | None:
        """The options ``add_ray_arguments`` parsed, or None for the sequential path.

        Ray is imported here, before any work: without it, ``parser`` exits with a usage error (status 2)
        saying how to install it (without a parser: :class:`~pslbridge.errors.ConfigurationError`).
        """

        def fail(message: str) -> None:
            if parser is not None:
                parser.error(message)
            raise ConfigurationError(message)

        if not (args.ray or args.ray_address):
            if args.workers is not None:
                fail("--workers applies to --ray runs only")
            return None
        try:
            require_ray()
        except ConfigurationError as exc:
            fail(str(exc))
        if args.workers is not None and args.ray_address:
            fail("--workers is for a local Ray instance")
        return cls(address=args.ray_address, workers=args.workers)

    def describe(self) -> str:
        """Where the runs went, in words (for results tables).

        Example:
            >>> RayOptions(workers=2).describe(), RayOptions(address="10.0.0.5:6379").describe()
            ('local Ray, 2 workers', 'Ray cluster at 10.0.0.5:6379')
        """
        if self.address:
            return f"Ray cluster at {self.address}"
        return f"local Ray, {local_workers(self.workers)} workers"


def local_workers(workers: int | None) -> int:
    """Concurrent runs of a local Ray instance: ``workers``, or one per CPU when None.

    Example:
        >>> local_workers(2), local_workers(None) == (os.cpu_count() or 1)
        (2, True)
    """
    return workers or os.cpu_count() or 1


def workers_text(ray: RayOptions | None) -> str:
    """Where a runner's runs go, in words, for its results tables; None: the sequential path.

    Example:
        >>> workers_text(None), workers_text(RayOptions(workers=2))
        ('one process, one run at a time', 'local Ray, 2 workers')
    """
    return ray.describe() if ray is not None else "one process, one run at a time"


def add_ray_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--ray``, ``--ray-address`` and ``--workers`` to a runner's parser."""
    parser.add_argument("--ray", action="store_true", help="run each split as a Ray task (local instance)")
    parser.add_argument("--ray-address", metavar="ADDR", help="run on an existing Ray cluster (implies --ray)")
    parser.add_argument(
        "--workers", type=positive_int, help="local Ray instance: concurrent runs (default: this machine's CPUs)"
    )


def run_digest(*parts: Any) -> str:
    """A short digest of a run's arguments, so stored runs of different settings never collide.

    Example:
        >>> run_digest({"epochs": 5}, 0) == run_digest({"epochs": 5}, 0) != run_digest({"epochs": 6}, 0)
        True
    """
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:10]


def run_environment(cpus: int = RUN_CPUS) -> dict[str, str]:
    """The thread settings of a run's process: as many PSL and TensorFlow threads as the CPUs its task declares.

    Each task declares one CPU, but PSL and TensorFlow size their pools to the whole machine by default, so
    runs sharing a machine would each start a thread per core and contend for them. A variable set in the
    driver's environment is passed on as set (the user's choice wins).

    Args:
        cpus: The CPUs a task declares.

    Returns:
        ``{variable: value}`` for each of :data:`THREAD_VARIABLES`.

    Example:
        >>> import os
        >>> env = run_environment()
        >>> sorted(env) == sorted(THREAD_VARIABLES)
        True
        >>> all(env[v] == os.environ.get(v, "1") for v in THREAD_VARIABLES)
        True
    """
    return {variable: os.environ.get(variable, str(cpus)) for variable in THREAD_VARIABLES}


def _worker_path() -> str:
    """PYTHONPATH for Ray's worker processes: the repository root first (``experiments`` is not installed)."""
    root = str(Path(__file__).resolve().parent.parent)
    return os.pathsep.join([root, *[p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]])


def example_run(x: int, sleep_s: float = 0.0) -> dict[str, Any]:
    """A trivial run (doubles ``x`` after ``sleep_s`` seconds), for examples and tests.

    The result also names the process, its thread settings (:data:`THREAD_VARIABLES`; None where unset) and
    when it started (``time.time()``).

    Example:
        >>> example_run(3)["value"]
        6
    """
    started = time.time()
    time.sleep(sleep_s)
    threads = {v: os.environ.get(v) for v in THREAD_VARIABLES}
    return {"value": 2 * x, "pid": os.getpid(), "threads": threads, "started": started}


def require_ray() -> Any:
    """Import Ray, or raise a :class:`~pslbridge.errors.ConfigurationError` saying how to install it.

    Example:
        >>> require_ray().__name__
        'ray'
    """
    try:
        import ray
    except ImportError as exc:
        raise ConfigurationError(
            "--ray needs Ray: pip install 'pslbridge[ray]' (the runners work without it, one run after another)"
        ) from exc
    return ray


def execute(fn: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    """Call ``fn`` here; an exception becomes ``{"error": ...}`` (a run that raises is not retried).

    Example:
        >>> execute("experiments.sweep:example_run", {"x": 1})["value"]
        2
        >>> execute("experiments.sweep:example_run", {"y": 1})["error"]
        "TypeError: example_run() got an unexpected keyword argument 'y'"
    """
    module, _, name = fn.partition(":")
    try:
        return getattr(importlib.import_module(module), name)(**kwargs)
    except Exception as exc:  # noqa: BLE001 - reported as the run's result, with its trace
        return {"error": f"{type(exc).__name__}: {exc}", "trace": traceback.format_exc(limit=8)}


def run_all(
    runs: Sequence[Run],
    out: Path,
    *,
    address: str | None = None,
    workers: int | None = None,
    retries: int = 3,
    on_result: Callable[[Run, dict[str, Any]], None] | None = None,
) -> dict[str, dict[str, Any]]:
    """Run every run not stored under ``out/runs`` as a Ray task; return all results by key.

    Args:
        runs: The runs (keys unique). On a local instance they start in this order, one per free slot
            (:func:`concurrent_runs`), so put the longest first; an existing cluster gets them all at once.
        out: Results folder; runs that finish without error are stored in ``out/runs/<key>.json`` as they
            finish (failed ones are not, so a restart tries them again).
        address: An existing Ray cluster (``ray.init(address=...)``); None starts a local instance.
        workers: Local instance only: CPUs (= concurrent runs) to give Ray; None: all of this machine's.
        retries: How often Ray re-runs a run whose process died.
        on_result: Called in this process with each newly finished run and its result (e.g. to write rows).

    Returns:
        ``{key: result}``; a failed run's result has an ``"error"`` entry.

    Raises:
        ConfigurationError: Ray is missing, keys repeat, a run needs more memory than the cluster has, or this
            process has started the JVM (with runs left to do).
    """
    keys = [r.key for r in runs]
    if len(set(keys)) != len(keys):
        raise ConfigurationError(f"run keys repeat: {sorted(k for k in set(keys) if keys.count(k) > 1)}")
    store = Path(out) / "runs"
    results = {r.key: json.loads((store / f"{r.key}.json").read_text()) for r in runs if _stored(store, r)}
    todo = [r for r in runs if r.key not in results]
    if not todo:
        return results
    ray = require_ray()
    started = start_ray(address, workers)
    try:
        _check_memory(ray, todo)
        task = ray.remote(num_cpus=RUN_CPUS, max_calls=1, max_retries=retries, retry_exceptions=False)(execute)
        queue = deque(todo)
        # Ray does not start queued tasks in the order they were submitted when their resources differ (it
        # takes turns between resource shapes), so on a local instance runs are submitted one per free slot
        # and start in the order given. A cluster gets them all at once, so that its autoscaler sees the demand.
        window = len(todo) if address is not None else concurrent_runs(ray)
        pending: dict[Any, Run] = {}

        def submit() -> None:
            while queue and len(pending) < window:
                r = queue.popleft()
                pending[task.options(memory=r.memory_mb * 2**20, name=f"pslbridge:{r.key}").remote(r.fn, r.kwargs)] = r

        submit()
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            run = pending.pop(done[0])
            submit()  # the freed slot starts the next run before this one's result is handled
            result = _get(ray, done[0])
            if on_result is not None:
                on_result(run, result)
            if "error" not in result:  # a failed run is reported, not stored: a restart tries it again
                store.mkdir(parents=True, exist_ok=True)
                partial = store / f"{run.key}.json.partial"
                partial.write_text(json.dumps(result))
                os.replace(partial, store / f"{run.key}.json")  # a stored result is always whole
            results[run.key] = result
    finally:
        if started:
            ray.shutdown()
    return results


def check_driver() -> None:
    """Refuse to drive Ray from a process that runs the JVM (see the module notes).

    Raises:
        ConfigurationError: The JVM runs in this process.

    Example:
        >>> from pslbridge import jvm
        >>> jvm.start(); check_driver()
        Traceback (most recent call last):
        ...
        pslbridge.errors.ConfigurationError: this process already runs the JVM, ...
    """
    if jvm.is_started():
        raise ConfigurationError(
            "this process already runs the JVM, and a Ray driver started after it breaks it (Ray installs crash "
            "signal handlers over the JVM's, and the next Java call crashes the process): drive the sweep from a "
            "process that has not started PSL (the runs themselves each get their own process and JVM)"
        )


def _stored(store: Path, run: Run) -> bool:
    path = store / f"{run.key}.json"
    if not path.is_file():
        return False
    try:
        json.loads(path.read_text())
    except ValueError:
        return False  # a half-written result: run again
    return True


def start_ray(address: str | None = None, workers: int | None = None) -> bool:
    """Connect to Ray (unless connected): an existing cluster at ``address``, or a local loopback instance.

    Every task and trial of the connection gets :func:`run_environment`: one thread per pool, as each declares
    one CPU (a Ray connected by the caller keeps the caller's settings).

    Args:
        address: An existing cluster; None starts a local instance (loopback only, no dashboard).
        workers: Local instance: CPUs given to Ray (= concurrent runs); None: all of this machine's.

    Returns:
        True if this call connected (the caller then shuts Ray down), False if Ray was already connected.

    Raises:
        ConfigurationError: Ray is missing, or this process runs the JVM (see :func:`check_driver`).

    Example:
        >>> from pslbridge import jvm
        >>> jvm.start(); start_ray(workers=2)  # refused before Ray starts: this process runs the JVM
        Traceback (most recent call last):
        ...
        pslbridge.errors.ConfigurationError: this process already runs the JVM, ...
    """
    ray = require_ray()
    check_driver()
    if ray.is_initialized():
        return False
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    # As many threads per pool as each run declares CPUs; workers import the experiments from the repository.
    runtime_env = {"env_vars": {**run_environment(RUN_CPUS), "PYTHONPATH": _worker_path()}}
    if address is not None:
        ray.init(address=address, log_to_driver=False, runtime_env=runtime_env)
        return True
    ray.init(
        num_cpus=local_workers(workers),
        runtime_env=runtime_env,
        include_dashboard=False,
        log_to_driver=False,
        _node_ip_address="127.0.0.1",  # loopback only: nothing listens beyond this machine
    )
    return True


def concurrent_runs(ray: Any) -> int:
    """How many runs the connected Ray cluster holds at once: its CPUs over :data:`RUN_CPUS` (at least 1).

    Example:
        >>> class FakeRay:
        ...     def cluster_resources(self): return {"CPU": 2.0, "memory": 8e9}
        >>> concurrent_runs(FakeRay())
        2
    """
    return max(1, int(ray.cluster_resources().get("CPU", 1) // RUN_CPUS))


def _check_memory(ray: Any, runs: Sequence[Run]) -> None:
    available_mb = ray.cluster_resources().get("memory", 0) / 2**20
    too_big = [r.key for r in runs if r.memory_mb > available_mb]
    if too_big:
        raise ConfigurationError(
            f"runs {too_big} need more memory than the Ray cluster offers ({available_mb:.0f} MB): "
            "they would never be scheduled; add memory or run them without --ray"
        )


def _get(ray: Any, ref: Any) -> dict[str, Any]:
    """A task's result; a task whose process died more often than its retries allow is an error result."""
    try:
        return ray.get(ref)
    except Exception as exc:  # noqa: BLE001 - e.g. WorkerCrashedError after the last retry
        return {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"}
