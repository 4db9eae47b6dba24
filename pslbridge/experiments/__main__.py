"""``python -m pslbridge.experiments <experiment> [options]``.

Experiments: ``mnist-add``, ``citation``, ``visual-sudoku``.
"""

import sys


def main(argv: list[str] | None = None) -> int:
    """Dispatch to an experiment runner.

    Example:
        >>> main(["mnist-add", "--help"])  # doctest: +SKIP
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    runners = {
        "mnist-add": "pslbridge.experiments.mnist_add_runner",
        "citation": "pslbridge.experiments.citation_runner",
        "visual-sudoku": "pslbridge.experiments.visual_sudoku_runner",
    }
    if not argv or argv[0] not in runners:
        print(f"usage: python -m pslbridge.experiments {{{','.join(runners)}}} [options]", file=sys.stderr)
        return 2
    import importlib

    return int(importlib.import_module(runners[argv[0]]).main(argv[1:]))


if __name__ == "__main__":
    sys.exit(main())
