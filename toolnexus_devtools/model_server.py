"""A scripted OpenAI-compatible HTTP server on loopback, for tests and ``dev-model``.

docs/protocol.md §8 wants the model reached over real HTTP in tests, so this is a real
server (stdlib ``ThreadingHTTPServer`` on a background thread), not a fake
transport. ``POST /v1/chat/completions`` answers from a FIFO of pushed
replies, then from a script; ``POST /v1/messages`` does the same for the
Anthropic style (one FIFO for both, an Anthropic-shaped default script);
``POST /tools/approval`` serves the demo approval webhook; tests may add
routes of their own. A reply may be a ``Stream`` of server-sent events, and
a plain JSON answer to a request with ``"stream": true`` is sent as the
stream the provider would send for it. Every request is recorded so a test
can assert what the daemon actually sent.
"""

from __future__ import annotations

import argparse
import json
import signal
import socket
import socketserver
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from toolnexus_daemon.model import JSON

from .approval_tool import handle_approval
from .model_streams import Stream, chat_stream, encode_event, messages_stream, mock_anthropic_model

MODEL_PATH = "/v1/chat/completions"
MESSAGES_PATH = "/v1/messages"
APPROVAL_PATH = "/tools/approval"


@dataclass(frozen=True)
class Reply:
    """One scripted HTTP response; a dict/list body is sent as JSON, a str as text."""

    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    # seconds to wait before answering, to exercise client timeouts
    delay: float = 0.0


@dataclass(frozen=True)
class Received:
    """One request as the server saw it; header names are lower-cased."""

    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        """The body parsed as JSON, or None when it is empty or not JSON."""
        try:
            return json.loads(self.body) if self.body else None
        except ValueError:
            return None


Script = Callable[[JSON], "Reply | Stream | JSON"]
Route = Callable[[Received], "Reply | Stream | JSON"]


def tool_call(name: str, arguments: JSON, id: str = "call_1") -> JSON:
    """One OpenAI tool call; ``arguments`` is JSON-encoded as the API does."""
    return {"id": id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


def chat_response(content: str | None = None, tool_calls: list[JSON] | None = None,
                  usage: tuple[int, int, int] = (0, 0, 0), model: str = "scripted") -> JSON:
    """A chat-completions response body with one choice."""
    message: JSON = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    prompt, completion, total = usage
    return {"id": "chatcmpl-scripted", "object": "chat.completion", "created": int(time.time()),
            "model": model,
            "choices": [{"index": 0, "message": message,
                         "finish_reason": "tool_calls" if tool_calls else "stop"}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": total}}


def mock_model(body: JSON) -> JSON:
    """The reference mock model: call the first tool once, then answer with its output."""
    messages = body.get("messages") or []
    tool_messages = [m for m in messages if isinstance(m, dict) and m.get("role") == "tool"]
    if tool_messages:
        return chat_response(content=str(tool_messages[0].get("content") or ""), usage=(2, 1, 3))
    tools = body.get("tools") or []
    if tools:
        name = tools[0].get("function", {}).get("name", "")
        return chat_response(tool_calls=[tool_call(name, {})], usage=(3, 2, 5))
    return chat_response(content="ok", usage=(2, 1, 3))


class ScriptedModelServer:
    """The server; use as a context manager or ``start()``/``stop()``."""

    def __init__(self, script: Script | None = None, host: str = "127.0.0.1", port: int = 0, *,
                 anthropic_script: Script | None = None) -> None:
        self._script: Script = script or mock_model
        self._anthropic_script: Script = anthropic_script or mock_anthropic_model
        self._host, self._port = host, port
        self._lock = threading.Lock()
        self._queue: deque[Reply | Stream | JSON] = deque()
        self._received: list[Received] = []
        self._bodies: list[JSON] = []
        self._routes: dict[str, Route] = {MODEL_PATH: self._serve_model, MESSAGES_PATH: self._serve_messages,
                                          APPROVAL_PATH: lambda r: handle_approval(r.json() or {})}
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> ScriptedModelServer:
        """Bind and serve on a background thread; port 0 picks a free port."""
        server_class = _Server6 if ":" in self._host else _Server
        httpd = server_class((self._host, self._port), _Handler)
        httpd.owner = self
        self._port = httpd.server_address[1]
        self._httpd = httpd
        # a short poll interval keeps stop() (and so every test teardown) fast
        self._thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), name="scripted-model",
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and release the port; in-flight delayed replies are abandoned."""
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(5)
            self._thread = None

    def __enter__(self) -> ScriptedModelServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def origin(self) -> str:
        host = f"[{self._host}]" if ":" in self._host else self._host
        return f"http://{host}:{self._port}"

    @property
    def url(self) -> str:
        """The OpenAI ``base_url`` to configure (``.../v1``); the Anthropic style takes it too."""
        return self.origin + "/v1"

    @property
    def approval_url(self) -> str:
        return self.origin + APPROVAL_PATH

    @property
    def requests(self) -> list[JSON]:
        """The JSON bodies of every model call so far, oldest first."""
        with self._lock:
            return list(self._bodies)

    @property
    def received(self) -> list[Received]:
        """Every request to any route, oldest first."""
        with self._lock:
            return list(self._received)

    @property
    def calls(self) -> int:
        """How many model calls were received."""
        with self._lock:
            return len(self._bodies)

    @property
    def script(self) -> Script:
        """What answers ``/v1/chat/completions`` when no pushed reply is queued."""
        return self._script

    @script.setter
    def script(self, script: Script) -> None:
        with self._lock:
            self._script = script

    def push(self, *replies: Reply | Stream | JSON) -> None:
        """Queue replies for the next model calls (either style); they are served before the script."""
        with self._lock:
            self._queue.extend(replies)

    def route(self, path: str, handler: Route) -> None:
        """Serve ``path`` and everything below it (any method) with ``handler``."""
        self._routes[path.rstrip("/")] = handler

    def dispatch(self, req: Received) -> Reply | Stream:
        """Find the route for a request and run it; a crashing handler becomes a 500."""
        with self._lock:
            self._received.append(req)
        handler = self._find_route(req.path)
        if handler is None:
            return Reply(404, {"error": {"message": f"no route for {req.path}"}})
        try:
            return _as_reply(handler(req))
        except Exception as exc:  # a broken script must show up in the test, not hang it
            return Reply(500, {"error": {"message": f"script failed: {exc!r}"}})

    def _find_route(self, path: str) -> Route | None:
        for prefix in sorted(self._routes, key=len, reverse=True):
            if path == prefix or path.startswith(prefix + "/"):
                return self._routes[prefix]
        return None

    def _serve_model(self, req: Received) -> Reply | Stream | JSON:
        return self._serve_call(req, self._script, chat_stream)

    def _serve_messages(self, req: Received) -> Reply | Stream | JSON:
        return self._serve_call(req, self._anthropic_script, messages_stream)

    def _serve_call(self, req: Received, script: Script,
                    as_stream: Callable[[JSON], Stream]) -> Reply | Stream | JSON:
        """The next queued reply or the script's; plain JSON is streamed when the request asks."""
        body = req.json()
        if not isinstance(body, dict):
            return Reply(400, {"error": {"message": "request body is not a JSON object"}})
        with self._lock:
            self._bodies.append(body)
            queued = self._queue.popleft() if self._queue else None
        reply = queued if queued is not None else script(body)
        if body.get("stream") is True and isinstance(reply, dict):
            return as_stream(reply)
        return reply


def _as_reply(value: Reply | Stream | JSON) -> Reply | Stream:
    return value if isinstance(value, Reply | Stream) else Reply(200, value)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    owner: ScriptedModelServer

    def server_bind(self) -> None:
        # HTTPServer.server_bind resolves the host name (getfqdn), which can stall on DNS
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = str(self.server_address[0]), int(self.server_address[1])


class _Server6(_Server):
    address_family = socket.AF_INET6


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        parts = urlsplit(self.path)
        req = Received(method=self.command, path=parts.path, query=parse_qs(parts.query),
                       headers={k.lower(): v for k, v in self.headers.items()},
                       body=self.rfile.read(length) if length else b"")
        reply = self.server.owner.dispatch(req)
        if reply.delay > 0:
            time.sleep(reply.delay)
        try:
            if isinstance(reply, Stream):
                self._write_stream(reply)
            else:
                self._write(reply)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (e.g. its timeout fired), which the test wanted

    def _write(self, reply: Reply) -> None:
        payload, ctype = _encode(reply.body)
        self.send_response(reply.status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(payload)))
        for name, value in reply.headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(payload)

    def _write_stream(self, stream: Stream) -> None:
        """Events one at a time; the body ends when the connection closes (HTTP/1.0)."""
        chunks = [encode_event(event) for event in stream.events]
        # each event is its own small write; Nagle's algorithm would hold them back for ACKs
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.send_response(stream.status)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        if stream.cut:
            # promise more than is sent, so closing early is a broken transfer, not a normal end
            self.send_header("Content-Length", str(sum(map(len, chunks)) + 1_000_000))
        for name, value in stream.headers.items():
            self.send_header(name, value)
        self.end_headers()
        for i, chunk in enumerate(chunks):
            if i and stream.delay_between > 0:
                time.sleep(stream.delay_between)
            self.wfile.write(chunk)
            self.wfile.flush()
        self.close_connection = True

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep test output and the dev console quiet


def _encode(body: Any) -> tuple[bytes, str]:
    if body is None:
        return b"", "text/plain"
    if isinstance(body, bytes):
        return body, "application/octet-stream"
    if isinstance(body, str):
        return body.encode(), "text/plain; charset=utf-8"
    return json.dumps(body).encode(), "application/json"


def parse_listen(listen: str) -> tuple[str, int]:
    """``host:port``, ``[v6]:port``, ``:port`` or ``port``; the host defaults to loopback."""
    host, _, port = listen.rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    if not port.isdigit():
        raise ValueError(f"--listen wants host:port, got {listen!r}")
    return host, int(port)


def serve_forever(host: str = "127.0.0.1", port: int = 8099) -> None:
    """Run the mock model until SIGINT/SIGTERM, printing where it listens."""
    stop = threading.Event()
    previous = {s: signal.signal(s, lambda *_: stop.set()) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        with ScriptedModelServer(host=host, port=port) as server:
            print(f"dev model listening: base_url {server.url} ; approval webhook {server.approval_url}",
                  flush=True)
            while not stop.wait(0.5):
                pass
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def run_dev_model(listen: str) -> None:
    """The ``toolnexus-daemon dev-model --listen HOST:PORT`` command; blocks until a signal."""
    serve_forever(*parse_listen(listen))


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``--listen`` and serve; returns the exit code (2 for a bad address or busy port)."""
    parser = argparse.ArgumentParser(prog="toolnexus-daemon dev-model",
                                     description="Serve the scripted mock model and approval webhook.")
    parser.add_argument("--listen", default="127.0.0.1:8099", help="host:port (default %(default)s)")
    args = parser.parse_args(argv)
    try:
        run_dev_model(args.listen)
    except (ValueError, OSError) as exc:
        print(f"dev-model: {exc}", file=sys.stderr)
        return 2
    return 0
