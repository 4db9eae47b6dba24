"""``python -m pslbridge.benchmarks [resident] [options]`` (``make bench``)."""

import sys

from . import overhead, resident, step_time


def main(argv: list[str] | None = None) -> int:
    """Dispatch to a benchmark.

    ``resident`` (default), ``steps`` (against the official NeuPSL loop) or ``overhead`` (bridge costs
    against one ADMM solve).

    Example:
        >>> main(["resident", "--sizes", "10", "--repeats", "1"])  # doctest: +SKIP
        0
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "steps":
        return step_time.main(argv[1:])
    if argv and argv[0] == "overhead":
        return overhead.main(argv[1:])
    if argv and argv[0] == "resident":
        argv = argv[1:]
    if "--quick" in argv:
        argv.remove("--quick")
        argv = ["--sizes", "300", "1000", "--repeats", "3", "--runtime-repeats", "1", *argv]
    return resident.main(argv)


if __name__ == "__main__":
    sys.exit(main())
