"""The NeuPSL paper's experiments (MNIST-Addition, citation graphs, Visual Sudoku) and their shared harness.

Not part of the installed package: run them from the repository root, ``python -m experiments <name>``.

Example:
    >>> from experiments import arguments
    >>> arguments.positive_int("3")
    3
"""
