"""Benchmarks (``make bench``): pslbridge against PSL's own entry points, side by side.

Example:
    >>> from benchmarks import resident
    >>> resident.add1_problem(2, seed=0)[1].shape
    (4, 10)
"""

from pslbridge import quiet_tensorflow

# These are programs, not the library: keep TensorFlow's C++ start-up noise off their output.
quiet_tensorflow()
