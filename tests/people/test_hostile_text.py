"""The terminal is hostile ground: text from models, tools and callers reaches every people command,
and none prints a raw control character (docs/cli.md "Output").

A webhook tool suspends on a request whose id, kind and prompt carry ESC/CSI sequences, an
OSC 52 clipboard write, C1 characters, BEL, DEL, a carriage return and a line separator; answered,
it outputs such text, which the scripted model repeats as its final reply. Every command is run
as a person would (the agent is even created with ``new``); stdout and stderr hold no raw control
character, and ``--json`` parses back to the exact original strings.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from toolnexus_devtools import Received, ScriptedModelServer

from .conftest import Daemon, authed, run_cli

# CSI clear screen, OSC 52 (writes the clipboard) ended by BEL, a C1 CSI, NEL, CR, BEL, DEL, LS, RLO
EVIL = "a\x1b[2J\x1b]52;c;ZXZpbA==\x07b\x9b31mc\x85d\re\x07f\x7fg\u2028h\u202ei"
REQUEST_ID = "req-\x1b[31m-" + EVIL
KIND = "kind\x1b]0;title\x07"
PROMPT = "approve \x1b[1A\x1b[2K" + EVIL
OUTPUT = "done \x1b]52;c;cm0gLXJmIH4=\x1b\\" + EVIL
HOOK = "/tools/evil"
# what may not reach a terminal: C0 but the newline, DEL, C1, line/paragraph separators, bidi overrides
RAW = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")



def _hook(req: Received) -> dict[str, Any]:
    if (req.json() or {}).get("answer"):
        return {"output": OUTPUT}
    return {"output": "", "pending": {"id": REQUEST_ID, "kind": KIND, "prompt": PROMPT}}


def _registry(tmp_path: Path, model: ScriptedModelServer) -> Path:
    tool = {"name": "ask", "description": "asks", "source": "webhook", "http": {"url": model.origin + HOOK},
            "inputSchema": {"type": "object", "properties": {}}}
    registry = {"agents": [{"name": "asker", "does": "asks", "soul": "You ask.", "tools": [tool]}],
                "llm": {"style": "openai", "baseUrl": model.url, "model": "scripted", "timeoutMs": 5000}}
    path = tmp_path / "registry.json"
    path.write_text(json.dumps(registry))
    return path


def _clean(out: subprocess.CompletedProcess[str], code: int = 0) -> subprocess.CompletedProcess[str]:
    assert out.returncode == code, (out.returncode, out.stdout, out.stderr)
    for name, text in (("stdout", out.stdout), ("stderr", out.stderr)):
        found = RAW.search(text)
        assert found is None, f"raw {found.group()!r} in {name} of {out.args[3:5]}: {text!r}"
    return out


def _cli(d: Daemon, *args: str, code: int = 0) -> subprocess.CompletedProcess[str]:
    return _clean(run_cli(*authed(d, *args)), code)


def test_no_command_prints_a_raw_control_character(daemon: Daemon, model: ScriptedModelServer,
                                                    tmp_path: Path) -> None:
    model.route(HOOK, _hook)
    created = json.loads(_cli(daemon, "new", str(_registry(tmp_path, model)), "--json").stdout)
    rid = created["runtime_id"]
    spawned = _cli(daemon, "spawn", rid, "asker", "--prompt", "go " + EVIL, "--wait", "20")
    assert "\\e[31m" in spawned.stdout and "pending" in spawned.stdout
    handle = json.loads(_cli(daemon, "inspect", rid, "--json").stdout)[0]["id"]

    table = _cli(daemon, "pending", "--runtime", rid).stdout
    assert "req-\\e[31m-a\\e[2J\\e]52;c;ZXZpbA==^Gb\\x9b31mc\\x85d\\re^Gf^?g\\u2028h\\u202ei" in table
    [item] = json.loads(_cli(daemon, "pending", "--runtime", rid, "--json").stdout)
    assert (item["request"]["id"], item["request"]["kind"], item["request"]["prompt"]) == (
        REQUEST_ID, KIND, PROMPT)
    _cli(daemon, "runtimes")
    assert "kind\\e]0;title^G" in _cli(daemon, "inspect", rid).stdout
    [snap] = json.loads(_cli(daemon, "inspect", rid, handle, "--json").stdout)
    assert snap["pending"]["prompt"] == PROMPT

    answered = _cli(daemon, "answer", REQUEST_ID, "--approve").stdout
    assert "\\e]52;c;cm0gLXJmIH4=\\e\\" in answered
    [result] = json.loads(_cli(daemon, "inspect", rid, handle, "--json").stdout)
    assert result["last_result"]["text"] == OUTPUT
    _cli(daemon, "events", rid, "--idle", "0.5")
    lines = [json.loads(line) for line in _cli(daemon, "events", rid, "--json", "--idle", "0.5")
             .stdout.splitlines()]
    assert PROMPT in [e["pending"]["prompt"] for e in lines if e["pending"]]
    assert OUTPUT in [e["result"]["text"] for e in lines if e["result"]]

    _cli(daemon, "wake", rid, handle, EVIL, "--wait", "20")
    second = json.loads(_cli(daemon, "spawn", rid, "asker", "--prompt", "go", "--wait", "20", "--json")
                        .stdout)
    assert second["result"]["pending"]["id"].startswith(REQUEST_ID)  # made unique in the runtime
    interrupted = _cli(daemon, "interrupt", rid, second["handle"]).stdout
    assert "cancelled its request req-\\e[31m" in interrupted
    _cli(daemon, "post", rid, handle, EVIL, "--from", EVIL, "--channel", EVIL)
    _cli(daemon, "resume", rid, REQUEST_ID, "--approve", code=3)  # stderr quotes the id
    _cli(daemon, "inspect", rid, "root/" + EVIL, code=3)
    _cli(daemon, "versions", rid)
    _cli(daemon, "versions", rid, "--json")
    _cli(daemon, "versions", EVIL, code=3)  # stderr quotes the runtime id
    _cli(daemon, "pending", "--older-than", EVIL, code=2)
    _cli(daemon, "wake", rid, handle, "x", "--wait", EVIL, code=2)  # argparse's own message
    _cli(daemon, "close", rid, handle)
    _cli(daemon, "shutdown", rid, "--json")


@pytest.mark.parametrize("text", [EVIL, REQUEST_ID, OUTPUT, "\u0080\u009f\u2029\x00\x1f"])
def test_json_escapes_every_control_character_and_parses_back(text: str) -> None:
    from toolnexus_daemon.people import render

    for dumped in (render.dumps({"t": text}), render.dumps_line([text])):
        assert RAW.sub("", dumped.replace("\n", "")) == dumped.replace("\n", "")
        assert json.loads(dumped) in ({"t": text}, [text])
