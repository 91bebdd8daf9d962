"""Observability: each request's outcome, recorded once.

outcome.py   what one request did (``Outcome``), as metrics and the access log take it
metrics.py   Prometheus metrics, per-team stats for the admin API, the structured access log
shadow.py    what shadow mode's plans would have done, counted apart (contextwarden_shadow_*)
memory.py    the memory budget: the footprint, each cache's share, what each holds
otel.py      whether OpenTelemetry is on, and how: the OTEL_* variables, read at start-up
otel_numbers.py  the numeric OTEL_* variables (batching, intervals, timeouts), checked
tracing.py   OpenTelemetry's spans and metrics (GenAI conventions), when on (the otel extra)
genai.py     what an answer says of itself (model, usage) in the GenAI conventions' names
"""
