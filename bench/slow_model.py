"""An OpenAI-compatible model on 127.0.0.1 that answers every request after a fixed delay.

For scenario 6 (slow model, many handles): asyncio streams, HTTP/1.1 with
keep-alive, no per-request thread, so a thousand waiting requests cost it
nothing and its own latency stays the configured delay. It runs the
reference mock model (call the first tool, then answer with its output; no
tools → "ok") and counts requests and the most it ever held at once (GET
/stats). Prints ``{"msg": "serving", "addresses": ["http://127.0.0.1:PORT"]}``.

    python -m bench.slow_model --delay-ms 50
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys

from bench.peers import mock_model

STATS = {"requests": 0, "in_flight": 0, "max_in_flight": 0}


def _chat(message: dict) -> bytes:
    done = not message.get("tool_calls")
    usage = (2, 1, 3) if done else (3, 2, 5)
    return json.dumps({"id": "chatcmpl-slow", "object": "chat.completion", "model": "slow",
                       "choices": [{"index": 0, "message": message,
                                    "finish_reason": "stop" if done else "tool_calls"}],
                       "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1],
                                 "total_tokens": usage[2]}}).encode()


async def _respond(writer: asyncio.StreamWriter, status: int, body: bytes) -> None:
    head = (f"HTTP/1.1 {status} {'OK' if status == 200 else 'Error'}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: keep-alive\r\n\r\n").encode()
    writer.write(head + body)
    await writer.drain()


async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay: float) -> None:
    try:
        while True:
            request_line = await reader.readline()
            if not request_line:
                return
            method, path, _ = request_line.decode("latin-1").split(" ", 2)
            length = 0
            while (line := await reader.readline()) not in (b"\r\n", b"\n", b""):
                name, _, value = line.decode("latin-1").partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value.strip())
            body = await reader.readexactly(length) if length else b""
            if method == "GET" and path.startswith("/stats"):
                await _respond(writer, 200, json.dumps(STATS).encode())
                continue
            STATS["requests"] += 1
            STATS["in_flight"] += 1
            STATS["max_in_flight"] = max(STATS["max_in_flight"], STATS["in_flight"])
            try:
                await asyncio.sleep(delay)
                payload = json.loads(body or b"{}")
                reply = _chat(mock_model(payload.get("messages") or [], bool(payload.get("tools"))))
            finally:
                STATS["in_flight"] -= 1
            await _respond(writer, 200, reply)
    except (ConnectionError, asyncio.IncompleteReadError, ValueError):
        return
    finally:
        writer.close()


async def serve(port: int, delay: float) -> None:
    server = await asyncio.start_server(lambda r, w: handle(r, w, delay), "127.0.0.1", port, backlog=2048)
    bound = server.sockets[0].getsockname()[1]
    print(json.dumps({"msg": "serving", "addresses": [f"http://127.0.0.1:{bound}"]}), file=sys.stderr,
          flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with server:
        await stop.wait()


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--delay-ms", type=float, default=50.0)
    ns = p.parse_args()
    asyncio.run(serve(ns.port, ns.delay_ms / 1000))


if __name__ == "__main__":
    main()
