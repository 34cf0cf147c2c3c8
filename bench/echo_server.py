"""The floor: a trivial ``grpc.aio`` echo server (unary and bidi stream), run as a subprocess.

Same stack as the daemon (grpcio's asyncio server in one Python process), no
protobuf work (bytes in, the same bytes out), so its latency is the least any
RPC over that transport can cost. Prints ``{"msg": "serving", "addresses": [...]}``
on stderr, like the daemon, and serves until SIGTERM.

    python -m bench.echo_server --listen 127.0.0.1:0 --listen unix:/tmp/echo.sock
    python -m bench.echo_server --listen 127.0.0.1:0 --event-loop uvloop   # libuv's loop

``--event-loop`` is the daemon's flag of the same name (the standard library's loop by default,
like the daemon), so the floor can run on the same event loop as the daemon it is the floor of.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys

import grpc
import uvloop
from grpc import aio

SERVICE = "bench.Echo"


async def unary(request: bytes, context: aio.ServicerContext) -> bytes:
    return request


async def stream(requests, context: aio.ServicerContext):
    async for message in requests:
        yield message


def handler() -> grpc.GenericRpcHandler:
    return grpc.method_handlers_generic_handler(SERVICE, {
        "Unary": grpc.unary_unary_rpc_method_handler(unary),
        "Stream": grpc.stream_stream_rpc_method_handler(stream),
    })


async def serve(listen: list[str]) -> None:
    server = aio.server()
    server.add_generic_rpc_handlers((handler(),))
    addresses = []
    for addr in listen:
        port = server.add_insecure_port(addr)
        addresses.append(addr if addr.startswith("unix:") else f"{addr.rsplit(':', 1)[0]}:{port}")
    await server.start()
    print(json.dumps({"msg": "serving", "addresses": addresses}), file=sys.stderr, flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await server.stop(1)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--listen", action="append", required=True)
    p.add_argument("--event-loop", choices=("asyncio", "uvloop"), default="asyncio")
    ns = p.parse_args()
    factory = uvloop.new_event_loop if ns.event_loop == "uvloop" else asyncio.new_event_loop
    with asyncio.Runner(loop_factory=factory) as runner:
        runner.run(serve(ns.listen))


if __name__ == "__main__":
    main()
