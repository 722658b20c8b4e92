"""Numba kernels: plain arrays in, plain arrays out (installed as ``colcep.kernels``)."""
