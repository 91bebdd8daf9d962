"""Observability: each request's outcome, recorded once.

metrics.py   Prometheus metrics, per-team stats for the admin API, the structured access log
"""
