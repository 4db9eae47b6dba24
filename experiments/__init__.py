"""The NeuPSL paper's experiments (MNIST-Addition, citation graphs, Visual Sudoku) and their shared harness.

Not part of the installed package: run them from the repository root, ``python -m experiments <name>``.

Example:
    >>> from experiments import arguments
    >>> arguments.positive_int("3")
    3
"""

from pslbridge import quiet_tensorflow

# These are programs, not the library: keep TensorFlow's C++ start-up noise off their output.
quiet_tensorflow()
