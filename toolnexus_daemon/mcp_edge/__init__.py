"""The daemon's agents as an MCP server (``--mcp-listen``, ``--mcp-expose``).

An edge beside ``api/``: it turns MCP ``tools/list``, ``tools/call`` and the ``tasks/*`` requests
into the engine verbs the gRPC servicer uses (spawn-and-wake under ``root``, wait, resume,
snapshot, interrupt, close). It knows nothing of the MCP client side in ``tools/``.

* :mod:`.exposed` — which agents are offered, under which tool names;
* :mod:`.runs` — one agent run: start it, follow it (progress), settle it, ask through elicitation;
* :mod:`.tasks` — durable MCP tasks: ids derived from runtime and handle, status from the handle;
* :mod:`.status` — ``notifications/tasks/status`` to the session that created a task, as it changes;
* :mod:`.verbs` — the engine verbs, here or (``Moved``) on the owner through a ``Remote`` the
  composition root supplies (``api.mcp_remote``, over gRPC);
* :mod:`.bridge` — the SDK seam for what the pinned SDK lacks (``tasks/*``, task-augmented calls);
* :mod:`.server` — the SDK's streamable-HTTP server on the daemon's web stack, with token and TLS.
"""
