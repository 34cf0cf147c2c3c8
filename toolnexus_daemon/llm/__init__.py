"""Model transports behind one protocol (``base.ModelTransport``)."""
