"""Observability: each request's outcome, recorded once.

metrics.py   Prometheus metrics, per-team stats for the admin API, the structured access log
memory.py    the memory budget: the footprint, each cache's share, what each holds
"""
