"""colcep's asv benchmarks (see docs/benchmarks.md); shared helpers live in common.py."""
