"""docs/protocol.md is checked against the proto and the code, so the reference cannot rot.

The reference is what users read instead of the source: every RPC, pinned state, status, event
type, error code, trace-line format, flag and variable the daemon has must be named in it, its
sections keep the numbering code citations rely on, and an item it calls "Not built yet" must
not have shipped behind its back. Each check reads the names from the code, never from a list
written here, so a name added to the code without the doc fails this test.
"""

from __future__ import annotations

import ast
import re
from enum import StrEnum
from pathlib import Path

import pytest

from toolnexus_daemon import config, errors
from toolnexus_daemon.api.servicer import AgentRuntimeServicer
from toolnexus_daemon.engine.state import notes
from toolnexus_daemon.engine.turn import spawn_wake, step, task_tool
from toolnexus_daemon.model import EventType, HandleState, InboxItem, LlmStyle, Status, ToolSource

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "protocol.md"
PROTO = ROOT / "proto" / "toolnexus" / "agents" / "v1" / "runtime.proto"


@pytest.fixture(scope="module")
def doc() -> str:
    return DOC.read_text(encoding="utf-8")


def service_rpcs(proto_text: str) -> list[str]:
    """The rpc names of ``service AgentRuntime`` (the block up to its closing brace)."""
    block = re.search(r"service AgentRuntime \{(.*?)\n\}", proto_text, re.S)
    assert block is not None, "service AgentRuntime not found in the proto"
    return re.findall(r"^\s*rpc (\w+)\(", block.group(1), re.M)


def missing_code_names(doc_text: str, names: list[str]) -> list[str]:
    """Names that do not appear in the doc as `code` (inside backticks, alone or in a phrase)."""
    fences = r"^```[^\n]*\n(.*?)^```"
    spans = re.findall(fences, doc_text, re.M | re.S)
    spans += re.findall(r"`([^`\n]+)`", re.sub(fences, "", doc_text, flags=re.M | re.S))
    return [n for n in names if not any(re.search(rf"(?<![\w]){re.escape(n)}(?![\w])", s) for s in spans)]


def test_every_rpc_of_the_service_is_documented(doc: str) -> None:
    rpcs = service_rpcs(PROTO.read_text(encoding="utf-8"))
    assert len(rpcs) >= 14, rpcs  # the parse found the service, not an empty block
    assert missing_code_names(doc, rpcs) == []


@pytest.mark.parametrize("enum", [HandleState, Status, EventType, ToolSource, LlmStyle])
def test_every_pinned_value_is_documented(doc: str, enum: type[StrEnum]) -> None:
    assert missing_code_names(doc, [str(v) for v in enum]) == []


def test_every_error_code_is_documented(doc: str) -> None:
    codes = sorted({c.code for c in vars(errors).values() if isinstance(c, type)
                    and issubclass(c, errors.DaemonError)})
    assert "FAILED_PRECONDITION" in codes
    assert missing_code_names(doc, codes) == []


def trace_fragments() -> list[str]:
    """The literal text of every f-string in engine/state/notes.py: the fixed parts of each trace line."""
    tree = ast.parse(Path(notes.__file__).read_text(encoding="utf-8"))
    parts = [v.value for node in ast.walk(tree) if isinstance(node, ast.JoinedStr)
             for v in node.values if isinstance(v, ast.Constant) and isinstance(v.value, str)]
    return sorted({p for p in parts if len(p.strip()) >= 3})


def test_every_trace_line_format_is_documented(doc: str) -> None:
    fragments = trace_fragments()
    assert any("DURABLE" in f for f in fragments)
    assert [f for f in fragments if f not in doc] == []


def test_engine_strings_match_the_doc(doc: str) -> None:
    assert task_tool.DESCRIPTION_HEAD in doc
    assert f"At most {step.MAX_CHAINED} in a row" in doc
    one = spawn_wake.inbox_block([InboxItem("F", "C", "text")])
    assert one.replace("1 item(s)", "L item(s)").replace("\n", "\\n") in doc
    ticks = [InboxItem("a", "chat", "x"), InboxItem("b", "chat", "y")] + [InboxItem("clock", "timer", "")] * 3
    assert spawn_wake.inbox_block(ticks).split("\n")[-1] in doc


def serve_flags() -> tuple[list[str], list[str]]:
    """Every flag of ``serve`` and every TOOLNEXUS_* variable its help names."""
    parser = config.serve_parser({})
    no_variable = ("-h", "--help", "-V", "--version")
    flags = [o for a in parser._actions for o in a.option_strings if o not in no_variable]
    helps = " ".join(a.help or "" for a in parser._actions) + " " + config.ENV_ONLY_HELP
    return flags, sorted(set(re.findall(r"TOOLNEXUS_[A-Z_]+", helps)))


def test_every_flag_and_variable_is_documented(doc: str) -> None:
    flags, variables = serve_flags()
    assert "--allow-env" in flags and "TOOLNEXUS_ALLOW_ENV" in variables
    assert missing_code_names(doc, flags) == []
    assert missing_code_names(doc, variables) == []


def test_sections_keep_the_contract_numbering(doc: str) -> None:
    numbers = [int(n) for n in re.findall(r"^## (\d+)\. ", doc, re.M)]
    assert numbers == list(range(1, 12))


# RPCs the contract adds in §10; the doc marks them "Not built yet" until the daemon serves them.
PLANNED_RPCS = ["ListPending", "ListRuntimes", "WatchPending"]


def bullet_naming(doc_text: str, name: str) -> str:
    """The list item of the doc that introduces ``name`` in bold."""
    item = re.search(rf"^- \*\*`{name}`\*\*.*?(?=^- |^#|\Z)", doc_text, re.M | re.S)
    assert item is not None, f"docs/protocol.md has no bullet for {name}"
    return item.group(0)


@pytest.mark.parametrize("name", PLANNED_RPCS)
def test_not_built_marks_follow_the_proto(doc: str, name: str) -> None:
    built = name in vars(AgentRuntimeServicer)  # served by the daemon, not only declared in the proto
    says_not_built = "Not built yet" in bullet_naming(doc, name)
    assert says_not_built != built, (f"{name} is {'served' if built else 'not served'} by the daemon, but "
                                     f"docs/protocol.md {'still says' if says_not_built else 'does not say'} "
                                     "Not built yet")


def test_the_checks_can_fail(doc: str) -> None:
    """Removing a name from the doc is noticed by the helpers the checks above use."""
    rpc = service_rpcs(PROTO.read_text(encoding="utf-8"))[0]
    assert missing_code_names(doc, [rpc]) == []
    assert missing_code_names(re.sub(rf"\b{rpc}\b", "Gone", doc), [rpc]) == [rpc]
    fragment = next(f for f in trace_fragments() if "DURABLE" in f)
    assert fragment not in doc.replace(fragment, "")
    with pytest.raises(AssertionError):
        bullet_naming(doc.replace("**`ListPending`**", "ListPending"), "ListPending")
