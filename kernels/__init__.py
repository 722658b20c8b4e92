"""Numba kernels: plain arrays in, plain arrays out (installed as ``colcep.kernels``)."""
from ..cache import install as _install_cache_locator

_install_cache_locator()  # before the kernel modules: cache them in a path-independent folder (colcep.cache)
