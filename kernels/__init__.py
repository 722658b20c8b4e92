"""Numba kernels: plain arrays in, plain arrays out (installed as ``colcep.kernels``). They import
nothing from colcep; where they are cached is :mod:`colcep.engine.kernel_cache`, whose locator
``colcep/__init__.py`` installs before any kernel module is imported."""
