"""Data generators, models and runners for the NeuPSL paper's experiments.

Example:
    >>> from pslbridge.experiments import mnist_add
    >>> mnist_add.add1_spec([(0, 1)], [3]).predicate("Neural").neural.class_size
    10
"""
