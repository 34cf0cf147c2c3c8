"""toolnexus_client.aio: the asyncio-native client (no threads).

The same verbs as the blocking ``toolnexus_client.Runtime``, as coroutines;
``watch`` is an async iterator; native tools, the model ``transport`` and the
``wait_for`` resolver may be ``async def`` (a plain function runs in
``asyncio.to_thread``). A runnable example is in clients/python/README.md ("asyncio")::

    from toolnexus_client import Tool, ToolResult, agent, registry
    from toolnexus_client.aio import Runtime

    async def secret_action(args, ctx):
        if ctx.answer is None:  # ctx.action_id: the same for every invocation of this call
            return ToolResult.suspend(id=f"secret-action:{ctx.action_id}", kind="authorization",
                                      prompt="approve?")
        return "action performed"

    tool = Tool("secret_action", execute=secret_action)
    reg = registry(agent("operator", does="acts after approval", uses={"tools": [tool]}))
    llm = {"style": "openai", "base_url": "http://127.0.0.1:8099/v1", "model": "dev"}  # make dev-model
    async with await Runtime.new("127.0.0.1:50051", registry=reg, llm=llm) as rt:
        woken = await rt.spawn(rt.root, "operator", prompt="please perform the secret action", wait=60)
        result = woken.result                     # spawned, woken and settled in one call: "pending"
        await rt.resume({"id": result.pending.id, "ok": True})

``Daemon`` lists and watches the open suspensions across runtimes (docs/protocol.md §10).
Values, declarations and errors are those of ``toolnexus_client``.
"""

from ._daemon import Daemon
from ._dispatch import AsyncResolver, AsyncTransport
from ._pending import PendingStream
from ._runtime import Runtime
from ._watch import EventStream

__all__ = ["AsyncResolver", "AsyncTransport", "Daemon", "EventStream", "PendingStream", "Runtime"]
