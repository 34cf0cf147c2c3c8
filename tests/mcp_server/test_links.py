"""An ``authorization`` suspension with an answer link is asked in URL mode: the user answers on
the link (here, the OAuth redirect landing on it) and the open call continues."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import mcp_types as types
import pytest

from tests.mcp_server.conftest import RUNTIME, connect, mcp_address, mcp_session
from tests.support.answer_links import ANSWERS_ARGS, sign_in_agent
from tests.support.daemon import DaemonProcess
from tests.support.grpc_client import openai_llm
from toolnexus_daemon.api._gen import runtime_pb2 as pb
from toolnexus_devtools import ScriptedModelServer


@pytest.fixture
def linked(tmp_path: Path, model: ScriptedModelServer) -> Iterator[str]:
    daemon = DaemonProcess(tmp_path / "data", *ANSWERS_ARGS, "--mcp-listen", "127.0.0.1:0",
                           "--mcp-expose", RUNTIME).start()
    try:
        channel, stub = connect(daemon)
        agent = sign_in_agent(model, [])
        stub.New(pb.NewRequest(runtime_id=RUNTIME, agents=[agent], llm=openai_llm(model.url)), timeout=10)
        channel.close()
        yield f"http://{mcp_address(daemon)}/mcp"
    finally:
        daemon.stop()


async def test_an_authorization_is_asked_with_its_answer_link_in_url_mode(linked: str) -> None:
    asked: list[types.ElicitRequestURLParams] = []

    async def elicit(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        assert isinstance(params, types.ElicitRequestURLParams), params
        asked.append(params)
        async with httpx.AsyncClient() as http:  # the provider redirects the browser to the link
            landed = await http.get(params.url, params={"code": "c0de", "state": "s"})
        assert landed.status_code == 200, landed.text
        return types.ElicitResult(action="accept")

    async with mcp_session(linked, token=None, elicitation_callback=elicit) as session:
        result = await session.call_tool("signer", {"prompt": "sign me in"})
    assert (result.is_error, result.structured_content["text"]) == (False, "signed in with c0de")
    assert len(asked) == 1 and asked[0].message == "sign in to the calendar"
    assert asked[0].elicitation_id == "sign-in" and "/a/" in asked[0].url
