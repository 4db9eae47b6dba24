"""``python -m pslbridge.benchmarks [resident] [options]`` (``make bench``)."""

import sys

from . import resident


def main(argv: list[str] | None = None) -> int:
    """Dispatch to a benchmark (only ``resident`` so far).

    Example:
        >>> main(["resident", "--sizes", "10", "--repeats", "1"])  # doctest: +SKIP
        0
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "resident":
        argv = argv[1:]
    if "--quick" in argv:
        argv.remove("--quick")
        argv = ["--sizes", "300", "1000", "--repeats", "3", "--runtime-repeats", "1", *argv]
    return resident.main(argv)


if __name__ == "__main__":
    sys.exit(main())
