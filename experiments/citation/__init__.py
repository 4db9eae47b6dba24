"""Citation graphs (Cora, Citeseer): NeuPSL-LP and -LP+FP, the runner, the PSL model (``citation.psl``).

Run ``python -m experiments citation``; the data are :mod:`pslbridge.datasets.planetoid`.
"""
