"""MNIST-Add-N at scale (N = 4, 15, 100): model, runner, presets; tuning history in ``NOTES.md``.

Example:
    >>> from experiments.mnist_add_n.model import sum_digits
    >>> import numpy as np
    >>> sum_digits(np.array([[[5], [7]]])).tolist()  # 5 + 7 = 12, ones place first
    [[2, 1]]
"""
