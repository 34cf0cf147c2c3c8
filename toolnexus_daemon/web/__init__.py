"""The daemon's HTTP edge: metrics, health, answer links and the inspector, on Starlette served by uvicorn.

Beside ``api`` (the gRPC edge) and at the same layer: it calls the same engine verbs and knows no
gRPC. ``app`` composes the listeners from one small route module per concern (``metrics``,
``health``, ``answers``, ``inspector``); ``server`` runs uvicorn's HTTP/1.1 protocol on the daemon's own loop;
``limits`` keeps idle, slow and greedy connections from locking anyone out.
"""

from __future__ import annotations

from .app import metrics_server, serve_answers, serve_ui
from .server import WebListenError, WebServer

__all__ = ["WebListenError", "WebServer", "metrics_server", "serve_answers", "serve_ui"]
