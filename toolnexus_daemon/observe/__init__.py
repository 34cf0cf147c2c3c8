"""Observability: Prometheus metrics, the JSON log lines and the ``/metrics`` endpoint.

It watches the daemon from beside it: the engine hands it committed events
through an observer callback and never imports it; it reads the engine and the
worker hub at scrape time through the typed protocols of ``census``. It speaks
HTTP for Prometheus but no gRPC (the ``health`` probe, a gRPC client, lives in
``api``).
"""
