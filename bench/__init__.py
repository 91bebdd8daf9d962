"""Benchmarks: ``python -m bench`` (``--quick`` for the tiny sizes the smoke test uses)."""
