"""Bridges dropped without close() release their Java objects and predicates; close_all() closes the rest."""

import pytest

from conftest import run_python

pytestmark = pytest.mark.subprocess


def test_bridges_dropped_without_close_release_their_predicates_and_java_objects():
    """30 programs built and dropped without close(): afterwards a model that redeclares their predicate with
    another arity is accepted (the registry forgot them) and the Java heap is back near where it started."""
    proc = run_python(
        """
        import gc
        import pslbridge
        from pslbridge import jvm
        from pslbridge.engine.classes import J
        from pslbridge.examples.mnist_addition import add1_spec

        def heap_mb():
            gc.collect()
            J.System.gc()
            return jvm.heap_used_bytes() / 2**20

        def build():
            bridge = pslbridge.Bridge(add1_spec([(2 * k, 2 * k + 1) for k in range(30)]))
            return bridge.term_count

        build()
        before = heap_mb()
        for _ in range(30):
            build()
        print("heap growth MB", round(heap_mb() - before, 1))
        again = pslbridge.Bridge.from_python(rules=["1: Neural(A, B, C) -> Other(A) ^2"],
                                            predicates={"Neural": 3, "Other": 1}, targets={"Other": [("x",)]})
        print("redeclared", again.term_count >= 0)
        print("open", len(list(pslbridge.bridge._OPEN)))
        """
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "redeclared True" in proc.stdout and "open 1" in proc.stdout, proc.stdout
    growth = float(proc.stdout.split("heap growth MB")[1].split()[0])
    assert growth < 20, proc.stdout  # each dropped program held several MB before finalization (12 -> 84 MB)


def test_close_all_closes_every_open_bridge_and_the_process_stays_usable():
    proc = run_python(
        """
        import pslbridge
        from pslbridge.examples import example_path

        config = example_path("simple-acquaintances") / "simple-acquaintances.json"
        kept = [pslbridge.Bridge(config) for _ in range(3)]
        print("closed", pslbridge.close_all(), pslbridge.close_all())
        try:
            kept[0].infer()
        except pslbridge.ClosedError as exc:
            print("refused", type(exc).__name__)
        with pslbridge.Bridge(config) as fresh:
            print("solved", fresh.infer().violated_constraints)
        """
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == ["closed", "3", "0", "refused", "ClosedError", "solved", "0"], proc.stdout


def test_a_forked_child_gets_a_typed_error_naming_spawn_instead_of_hanging():
    """os.fork() after the JVM started: the child's first use of a bridge (or a new one) is a ConfigurationError
    that names the spawn start method, within seconds; multiprocessing's default start method on Linux (fork)
    gives the parent that error instead of a hang; the parent's bridge keeps working."""
    proc = run_python(
        """
        import multiprocessing, os, sys
        import pslbridge
        from pslbridge.examples import example_path

        config = example_path("simple-acquaintances") / "simple-acquaintances.json"
        bridge = pslbridge.Bridge(config)
        pid = os.fork()
        if pid == 0:
            try:
                bridge.infer()
                os._exit(3)
            except pslbridge.ConfigurationError as exc:
                os._exit(0 if "spawn" in str(exc) else 4)
        _, status = os.waitpid(pid, 0)
        print("child exit", os.waitstatus_to_exitcode(status))

        def work(_):
            with pslbridge.Bridge(config) as b:
                return b.infer().violated_constraints

        with multiprocessing.get_context("fork").Pool(1) as pool:
            try:
                pool.map(work, [0], chunksize=1)
            except pslbridge.ConfigurationError as exc:
                print("pool", type(exc).__name__, "spawn" in str(exc))
        print("parent", bridge.infer().violated_constraints)
        """,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == ["child", "exit", "0", "pool", "ConfigurationError", "True", "parent", "0"], (
        proc.stdout
    )
