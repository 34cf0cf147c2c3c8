"""``make demo-mcp``: an agent with the tools of a real MCP server, whose tool asks the user; the
question is answered from the command line.

It starts ``examples/mcp_server.py`` (built with the official MCP SDK) on 127.0.0.1 and a daemon on
a temporary data dir; the agent's model is a small script served by this process (a transport).
The agent calls ``example__paint``; the server's ``elicitation/create`` suspends the call durably
as a Request of kind ``input``. Then, as a person would:

    toolnexus-daemon pending
    toolnexus-daemon answer REQUEST_ID --approve --data '{"colour": "teal"}'     # refused: wrong field
    toolnexus-daemon answer REQUEST_ID --approve --data '{"color": "teal", "coats": 2}'

and the tool finishes with the answer. The exit status is non-zero if any check failed.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _scenario import Checks, completion
from run_demo import Daemon

from toolnexus_client import McpServer, Runtime, agent, registry

HERE = Path(__file__).resolve().parent


def model(request: dict[str, Any]) -> dict[str, Any]:
    """Calls ``example__paint`` for the north wall, then reports what the tool said."""
    messages = request["body"].get("messages") or []
    results = [m for m in messages if m.get("role") == "tool"]
    if results:
        body = completion({"role": "assistant", "content": str(results[-1].get("content") or "")}, (2, 1, 3))
    else:
        call = {"id": "call_1", "type": "function",
                "function": {"name": "example__paint", "arguments": json.dumps({"wall": "north"})}}
        body = completion({"role": "assistant", "content": None, "tool_calls": [call]}, (3, 2, 5))
    return {"status": 200, "headers": {"content-type": "application/json"}, "body": body}


def cli(target: str, *args: str) -> subprocess.CompletedProcess[str]:
    out = subprocess.run([sys.executable, "-m", "toolnexus_daemon", *args, "--target", target],
                         capture_output=True, text=True, timeout=60)
    shown = (out.stdout + out.stderr).strip()
    print(f"  $ toolnexus-daemon {' '.join(args)}\n    " + shown.replace("\n", "\n    "))
    return out


def start_mcp_server() -> tuple[subprocess.Popen[bytes], str]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = subprocess.Popen([sys.executable, str(HERE / "mcp_server.py"), "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(400):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proc, f"http://127.0.0.1:{port}/mcp"
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise SystemExit("the MCP server did not start")


def run(target: str, url: str) -> bool:
    checks = Checks("an MCP tool that asks the user, answered from the command line")
    painter = agent("painter", does="paints walls", soul="You paint walls.",
                    mcp_servers=[McpServer("example", url, tools=["paint"])])
    with Runtime.new(target=target, registry=registry(painter), transport=model) as rt:
        handle = rt.spawn(rt.root, "painter")
        rt.wake(handle, "paint the north wall")
        result = rt.wait(handle, timeout=30)
        pending = result.pending
        checks.check("the elicitation suspends the call", result.status == "pending" and pending is not None,
                     result.status)
        if pending is None:
            return False
        print(f"  request {pending.id}: kind {pending.kind}, prompt {pending.prompt!r}")
        print(f"    requested schema: {json.dumps((pending.data or {}).get('requested_schema'))}")
        cli(target, "pending")
        bad = cli(target, "answer", pending.id, "--approve", "--data", '{"colour": "teal"}')
        checks.check("an answer that does not fit the schema is refused", bad.returncode != 0)
        good = cli(target, "answer", pending.id, "--approve", "--data", '{"color": "teal", "coats": 2}')
        checks.check("the answer that fits is accepted", good.returncode == 0)
        done = rt.wait(handle, timeout=30)
        print(f"  the agent says: {done.text!r}")
        checks.check("the tool finished with the answer",
                     done.text == "painted the north wall teal (2 coat(s))", done.text)
    return checks.failed == 0


def main() -> int:
    server, url = start_mcp_server()
    try:
        with tempfile.TemporaryDirectory(prefix="toolnexus-mcp-demo-") as data_dir:
            daemon = Daemon(data_dir)
            target = daemon.wait_serving()
            print(f"MCP server at {url}; daemon serving on {target}\n")
            try:
                passed = run(target, url)
            finally:
                code = daemon.stop()
    finally:
        server.kill()
        server.wait(10)
    print(f"\ndaemon stopped with SIGTERM, exit code {code}")
    print("the MCP demo passed" if passed and code == 0 else "the MCP demo FAILED")
    return 0 if passed and code == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
