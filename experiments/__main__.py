"""``python -m experiments <experiment> [options]``.

Experiments: ``mnist-add``, ``mnist-add-n``, ``citation``, ``visual-sudoku``; ``search``: a hyper-parameter search
(Ray Tune); ``results-page``: the reproductions' tables into ``docs/results.md``.
"""

import sys


def main(argv: list[str] | None = None) -> int:
    """Dispatch to an experiment runner.

    Example:
        >>> main(["--help"])
        usage: python -m experiments {mnist-add,mnist-add-n,citation,visual-sudoku,search,results-page} [options]
        ...
        0
        >>> main(["no-such-experiment"])
        2
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    runners = {
        "mnist-add": "experiments.mnist_add.runner",
        "mnist-add-n": "experiments.mnist_add_n.runner",
        "citation": "experiments.citation.runner",
        "visual-sudoku": "experiments.visual_sudoku.runner",
        "search": "experiments.search",
        "results-page": "experiments.results_page",
    }
    usage = f"usage: python -m experiments {{{','.join(runners)}}} [options]"
    if argv and argv[0] in ("-h", "--help"):
        print(usage)
        print("\nRun the paper's experiments; `python -m experiments <experiment> --help` lists each one's")
        print("options. mnist-add: MNIST-Addition; mnist-add-n: N-digit MNIST-Addition at scale; citation:")
        print("Cora/Citeseer; visual-sudoku: Visual Sudoku; search: a hyper-parameter search on validation data")
        print("(Ray Tune, ASHA); results-page: copy out/*/results.md into docs/results.md.")
        return 0
    if not argv or argv[0] not in runners:
        print(usage, file=sys.stderr)
        print(f"error: choose an experiment: {', '.join(runners)}", file=sys.stderr)
        return 2
    import importlib

    return int(importlib.import_module(runners[argv[0]]).main(argv[1:]))


if __name__ == "__main__":
    sys.exit(main())
