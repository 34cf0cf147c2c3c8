"""toolnexus-daemon: a gRPC sidecar that runs toolnexus agents which suspend and resume durably."""

__version__ = "0.1.0"
