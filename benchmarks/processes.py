"""Run a benchmark contender in its own process and record its peak memory.

Each contender (pslbridge's worker, the jar's CLI or learning loop with its Python server) runs as a
fresh process tree, so its resident-set high-water mark and Java heap are its own. Peak RSS is the sum
of ``VmHWM`` over the tree (Linux ``/proc``), sampled until the processes exit. Peak Java heap is the
largest heap occupancy the JVM's own GC log reports before a collection (``-Xlog:gc``): the heap
grows until a collection, so that is its high-water mark.

Example:
    >>> result = run_tracked([sys.executable, "-c", "print(1)"])
    >>> result.stdout.strip(), result.returncode
    ('1', 0)
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = ["TrackedRun", "gc_log_flag", "gc_peak_heap_mb", "run_tracked"]

_GC_LINE = re.compile(r"GC\(\d+\).*?(\d+)([KMG])->(\d+)([KMG])\(")
_UNIT = {"K": 1 / 1024, "M": 1.0, "G": 1024.0}


@dataclass
class TrackedRun:
    """What a tracked process left behind.

    Attributes:
        returncode: Exit status.
        stdout: Its standard output.
        stderr: Its standard error.
        wall_s: Wall-clock seconds from start to exit.
        peak_rss_mb: Sum of the peak resident set over the process and its descendants (MiB).

    Example:
        >>> TrackedRun(0, "", "", 1.0, 100.0).peak_rss_mb
        100.0
    """

    returncode: int
    stdout: str
    stderr: str
    wall_s: float
    peak_rss_mb: float


def _tree(pid: int) -> list[int]:
    """``pid`` and its live descendants."""
    found, queue = [], [pid]
    while queue:
        current = queue.pop()
        found.append(current)
        try:
            for task in Path(f"/proc/{current}/task").iterdir():
                children = (task / "children").read_text().split()
                queue.extend(int(c) for c in children)
        except OSError:
            continue
    return found


def _hwm_kb(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def run_tracked(
    command: list[str], *, env: dict[str, str] | None = None, cwd: str | Path | None = None, timeout: float = 3600.0
) -> TrackedRun:
    """Run ``command`` to completion, sampling the peak RSS of its process tree every 50 ms.

    Raises:
        subprocess.TimeoutExpired: It ran past ``timeout`` (the tree is killed).
    """
    peaks: dict[int, int] = {}
    start = time.perf_counter()
    proc = subprocess.Popen(command, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            for pid in _tree(proc.pid):
                peaks[pid] = max(peaks.get(pid, 0), _hwm_kb(pid))
            done.wait(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        for pid in reversed(_tree(proc.pid)):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        proc.communicate()
        raise
    finally:
        done.set()
        sampler.join()
    wall = time.perf_counter() - start
    return TrackedRun(proc.returncode, stdout, stderr, wall, sum(peaks.values()) / 1024.0)


def gc_log_flag(path: Path) -> str:
    """The JVM flag that writes GC events (with heap occupancy) to ``path``.

    Example:
        >>> gc_log_flag(Path("/tmp/gc.log"))
        '-Xlog:gc:file=/tmp/gc.log'
    """
    return f"-Xlog:gc:file={path}"


def gc_peak_heap_mb(path: Path) -> float:
    """Largest heap occupancy before a collection in a ``-Xlog:gc`` file (MiB); NaN without collections.

    Example:
        >>> import tempfile; p = Path(tempfile.mkdtemp()) / "gc.log"
        >>> _ = p.write_text("[0.1s][info][gc] GC(0) Pause Young (Allocation Failure) 64M->9M(245M) 3.1ms")
        >>> gc_peak_heap_mb(p)
        64.0
    """
    try:
        text = path.read_text()
    except OSError:
        return float("nan")
    peaks = [float(m.group(1)) * _UNIT[m.group(2)] for m in _GC_LINE.finditer(text)]
    return max(peaks) if peaks else float("nan")


if __name__ == "__main__":  # pragma: no cover
    print(run_tracked(sys.argv[1:]))
