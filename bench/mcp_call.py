"""An MCP tool call's cost beside the same tool as a webhook (docs/mcp.md; goal: at most 1.5x).

Both executors are the daemon's own (``McpExecutor``, ``WebhookExecutor``), driven in this process
with the same ``ToolInvocation`` shape; both servers are subprocesses on 127.0.0.1 on the same
stack (uvicorn + Starlette): ``examples/mcp_server.py``'s ``add`` over streamable HTTP (or, with
``--style low``, the same tool on the SDK's lowlevel ``Server``: ``bench/mcp_servers.py``), and a
webhook app that adds the same way. ``--json-response`` and ``--stateless`` choose the SDK session
manager's modes, ``--protocol auto`` has the daemon speak the 2026-07-28 protocol (as an
``--mcp-config`` entry's ``"protocol": "auto"`` does), ``--no-otel`` drops the SDK server's
OpenTelemetry middleware, ``--sdk-transport`` has the daemon's sessions run over the SDK's own
streamable-HTTP client transport instead of the daemon's (``toolnexus_daemon/tools/mcp_http.py``),
for comparison. The MCP session is reused across calls, as the daemon does.
Calls alternate MCP, webhook, MCP, ... so load from other sessions falls on both; each repetition
is the median latency of its calls, the ratio is taken per repetition, then the median. The CPU
each call costs is reported too (this process's, during the call, and each server's over the
repetition, from /proc): on a loaded machine it varies far less than the latency does.

Run in the project's .venv (it needs mcp 2; bench/.venv holds the reference library's mcp 1):

    .venv/bin/python -m bench.mcp_call [--calls 300] [--reps 5] [--style high|low] [--json-response]
        [--stateless] [--protocol auto] [--no-otel] [--sdk-transport]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

from toolnexus_daemon.config_mcp import McpConfig, McpConfigServer
from toolnexus_daemon.model import HttpConfig, McpServer, McpTarget, ToolDef, ToolSource
from toolnexus_daemon.tools import mcp_session
from toolnexus_daemon.tools.base import ToolInvocation
from toolnexus_daemon.tools.mcp import McpExecutor
from toolnexus_daemon.tools.webhook import WebhookExecutor

ROOT = Path(__file__).resolve().parent.parent
WEBHOOK_APP = """
import sys, uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

async def add(request: Request) -> JSONResponse:
    body = await request.json()
    args = body["arguments"]
    return JSONResponse({"output": str(args["a"] + args["b"])})

uvicorn.run(Starlette(routes=[Route("/add", add, methods=["POST"])]), host="127.0.0.1",
            port=int(sys.argv[1]), log_level="warning")
"""


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _serve(args: list[str], port: int) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen([sys.executable, *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            cwd=ROOT)
    for _ in range(400):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proc
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise SystemExit(f"{args[0]} did not start")


def _server_cpu(pid: int) -> float:
    """CPU seconds (user + system) a server process has used so far; 0 where /proc is missing."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _time(executor: McpExecutor | WebhookExecutor, tool: ToolDef, i: int, cpu: list[float] | None = None
                ) -> float:
    inv = ToolInvocation(runtime_id="bench", handle="root/a.1", call_id=f"bench/root/a.1/s{i}c0", tool=tool,
                         arguments={"a": i, "b": 1})
    start, start_cpu = time.perf_counter(), time.process_time()
    result = await executor.invoke(inv)
    elapsed = time.perf_counter() - start
    if cpu is not None:
        cpu.append(time.process_time() - start_cpu)
    if result.is_error or result.output != str(i + 1):
        raise SystemExit(f"{tool.name}: unexpected result {result.output!r}")
    return elapsed


async def measure(mcp_url: str, hook_url: str, calls: int, reps: int, pids: tuple[int, int] = (0, 0),
                  protocol: str = "") -> dict[str, object]:
    if protocol:  # a protocol other than the handshake's is the operator's choice: an --mcp-config entry
        server = McpServer("bench")
        config = McpConfig({"bench": McpConfigServer(url=mcp_url, protocol=protocol)})
    else:
        server, config = McpServer("bench", mcp_url), None
    mcp_tool = ToolDef("bench__add", source=ToolSource.MCP, mcp=McpTarget(server, "add"))
    hook_tool = ToolDef("add", source=ToolSource.WEBHOOK, http=HttpConfig(url=hook_url))
    mcp, hook = McpExecutor(config), WebhookExecutor()
    try:
        for i in range(20):  # warm-up: the session, the connection pools, the servers' first requests
            await _time(mcp, mcp_tool, i)
            await _time(hook, hook_tool, i)
        rows, cpu_rows = [], []
        for rep in range(reps):
            m, w, m_cpu, w_cpu = [], [], [], []
            servers_before = [_server_cpu(pid) for pid in pids]
            for i in range(calls):
                m.append(await _time(mcp, mcp_tool, rep * calls + i, m_cpu))
                w.append(await _time(hook, hook_tool, rep * calls + i, w_cpu))
            servers = [(_server_cpu(pid) - before) / calls
                       for pid, before in zip(pids, servers_before, strict=True)]
            rows.append((statistics.median(m) * 1000, statistics.median(w) * 1000))
            # per call, ms: the daemon's side (mean), the server's side (mean over the repetition)
            cpu_rows.append((sum(m_cpu) / calls * 1000, servers[0] * 1000, sum(w_cpu) / calls * 1000,
                             servers[1] * 1000))
    finally:
        await mcp.aclose()
        await hook.aclose()
    ratios = [a / b for a, b in rows]
    cpu = [statistics.median(r[k] for r in cpu_rows) for k in range(4)]
    return {"mcp_ms": statistics.median(r[0] for r in rows),
            "webhook_ms": statistics.median(r[1] for r in rows), "ratio": statistics.median(ratios),
            "ratio_min": min(ratios), "ratio_max": max(ratios), "calls": calls, "reps": reps,
            "cpu_ms": {"mcp_daemon": cpu[0], "mcp_server": cpu[1], "webhook_daemon": cpu[2],
                       "webhook_server": cpu[3]}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--style", choices=("high", "low"), default="high",
                        help="the MCP server: examples/mcp_server.py (the SDK's MCPServer, default) or the "
                             "same tool on the SDK's lowlevel Server (bench/mcp_servers.py)")
    parser.add_argument("--json-response", action="store_true",
                        help="the MCP server answers with JSON instead of an SSE stream")
    parser.add_argument("--stateless", action="store_true",
                        help="the MCP server's session manager in stateless mode (a transport per request)")
    parser.add_argument("--no-otel", action="store_true",
                        help="the MCP server without the SDK's OpenTelemetry middleware")
    parser.add_argument("--protocol", choices=("", "auto"), default="",
                        help='the daemon\'s side: "" = the initialize handshake (2025-11-25, the default), '
                             '"auto" = the 2026-07-28 protocol (an --mcp-config entry\'s "protocol": "auto")')
    parser.add_argument("--sdk-transport", action="store_true",
                        help="the daemon's sessions over the SDK's streamable-HTTP client transport "
                             "instead of the daemon's own")
    ns = parser.parse_args()
    mcp_session.SDK_HTTP_TRANSPORT = ns.sdk_transport
    mcp_port, hook_port = _port(), _port()
    mcp_args = ["-m", "bench.mcp_servers", "--style", ns.style, "--port", str(mcp_port)]
    mcp_args += [flag for flag, on in (("--json-response", ns.json_response), ("--stateless", ns.stateless),
                                       ("--no-otel", ns.no_otel)) if on]
    servers = [_serve(mcp_args, mcp_port), _serve(["-c", WEBHOOK_APP, str(hook_port)], hook_port)]
    try:
        out = asyncio.run(measure(f"http://127.0.0.1:{mcp_port}/mcp", f"http://127.0.0.1:{hook_port}/add",
                                  ns.calls, ns.reps, (servers[0].pid, servers[1].pid), ns.protocol))
    finally:
        for proc in servers:
            proc.kill()
            proc.wait(10)
    verdict = "met" if out["ratio"] <= 1.5 else "NOT met"  # type: ignore[operator]
    print(f"MCP tool call {out['mcp_ms']:.2f} ms, webhook {out['webhook_ms']:.2f} ms (medians); "
          f"ratio {out['ratio']:.2f} (per repetition {out['ratio_min']:.2f}-{out['ratio_max']:.2f}; "
          f"{ns.reps} x {ns.calls} calls each); goal <= 1.5x {verdict}")
    cpu: dict[str, float] = out["cpu_ms"]  # type: ignore[assignment]
    mcp_cpu, hook_cpu = cpu["mcp_daemon"] + cpu["mcp_server"], cpu["webhook_daemon"] + cpu["webhook_server"]
    print(f"CPU per call (ms, daemon + server): MCP {cpu['mcp_daemon']:.2f} + {cpu['mcp_server']:.2f}, "
          f"webhook {cpu['webhook_daemon']:.2f} + {cpu['webhook_server']:.2f}; "
          f"ratio {mcp_cpu / hook_cpu:.2f} "
          f"(the daemon's side alone {cpu['mcp_daemon'] / cpu['webhook_daemon']:.2f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
