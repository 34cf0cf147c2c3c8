"""Answer links (docs/protocol.md §10): what people answer suspensions through, over HTTP(S).

``routes`` maps a request to its status and body, ``links`` finds what a token opens and answers
through the engine, ``page`` is the HTML. The HTTP itself — the listener, its limits, reading the
body — is the web edge's (``toolnexus_daemon.web``).
"""
