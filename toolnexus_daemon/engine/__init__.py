"""The agent runtime: handles, the turn loop, suspension, resume.

Knows nothing of gRPC, protobuf, httpx or LMDB: it reaches the outside only
through the protocols in ``llm``, ``tools``, ``store`` and ``workers``.
"""
