"""The inspector over HTTP against the real daemon (docs/inspector.md): logging in, the CSRF token
and Origin check on every state change, escaping of what models and tools say, runtime keys, the
Content-Security-Policy, the live timeline's server-sent events, and answering."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import grpc
import httpx
import pytest

from tests.inspector.support import (
    TOKEN,
    Parked,
    answer_form,
    ask_agent,
    csrf_of,
    inspector_daemon,
    login,
    park,
    ui_base,
    wait_result,
)
from tests.support.daemon import DaemonProcess
from tests.support.grpc_client import open_stub
from toolnexus_daemon.api._gen import runtime_pb2_grpc as pb_grpc
from toolnexus_devtools import ScriptedModelServer

XSS_PROMPT = 'check <img src=x onerror="alert(1)"> please'
XSS_REPLY = "done <script>alert(2)</script>"


class Env:
    def __init__(self, proc: DaemonProcess, stub: pb_grpc.AgentRuntimeStub,
                 model: ScriptedModelServer) -> None:
        self.proc, self.stub, self.model = proc, stub, model
        self.base = ui_base(proc.target)

    def park(self, *, prompt: str = "may I?", output: str = "did it", key: str = "") -> Parked:
        return park(self.stub, self.model, ask_agent(self.model, prompt=prompt, output=output), key=key)


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    tmp: Path = tmp_path_factory.mktemp("inspector")
    with ScriptedModelServer() as model:
        proc = inspector_daemon(tmp).start()
        channel, stub = open_stub(proc.target)
        try:
            yield Env(proc, stub, model)
        finally:
            channel.close()
            proc.stop()


def _still_pending(env: Env, parked: Parked) -> None:
    md = [("authorization", f"Bearer {TOKEN}")]
    from toolnexus_daemon.api._gen import runtime_pb2 as pb

    snap = env.stub.Snapshot(pb.SnapshotRequest(runtime_id=parked.runtime, handle=parked.handle),
                             metadata=md, timeout=5)
    assert snap.state == "suspended" and snap.pending.id == parked.request


def test_every_page_wants_a_login_first(env: Env) -> None:
    with httpx.Client(base_url=env.base, headers={"Origin": env.base}) as anon:
        for path in ("/", "/pending", "/runtime?id=x"):
            reply = anon.get(path)
            assert reply.status_code == 303 and reply.headers["location"] == "/login", path
        assert anon.get("/events?id=x").status_code == 401
        # a POST without a session changes nothing: it is sent to log in
        assert anon.post("/answer", data={"decision": "approve"}).status_code == 303
        page = anon.get("/login")
        assert page.status_code == 200 and 'id="token"' in page.text


def test_a_wrong_token_is_refused_and_a_right_one_gives_an_httponly_strict_cookie(env: Env) -> None:
    with httpx.Client(base_url=env.base, headers={"Origin": env.base}) as client:
        wrong = client.post("/login", data={"token": "not-it"})
        assert wrong.status_code == 401 and "not the daemon" in wrong.text
        assert "set-cookie" not in wrong.headers and client.get("/").status_code == 303
        right = client.post("/login", data={"token": TOKEN})
        assert right.status_code == 303
        cookie = right.headers["set-cookie"].lower()
        assert "httponly" in cookie and "samesite=strict" in cookie and "path=/" in cookie
        assert client.get("/").status_code == 200


def test_login_from_another_origin_is_refused(env: Env) -> None:
    with httpx.Client(base_url=env.base, headers={"Origin": "http://evil.example"}) as client:
        assert client.post("/login", data={"token": TOKEN}).status_code == 403


def test_an_answer_without_the_csrf_token_or_with_a_wrong_one_is_refused(env: Env) -> None:
    parked = env.park()
    with login(env.base) as client:
        form = answer_form(client.get("/pending").text, parked.request)
        for csrf in (None, "forged", csrf_of(client.get("/").text) + "x"):
            fields = {**form, "decision": "approve"}
            fields.pop("csrf")
            if csrf is not None:
                fields["csrf"] = csrf
            reply = client.post("/answer", data=fields)
            assert reply.status_code == 403 and "CSRF" in reply.text, csrf
    _still_pending(env, parked)


def test_an_answer_without_origin_or_from_a_foreign_one_is_refused(env: Env) -> None:
    parked = env.park()
    with login(env.base) as client:
        fields = {**answer_form(client.get("/pending").text, parked.request), "decision": "approve"}
        for origin in (None, "http://evil.example", "null", env.base.replace("127.0.0.1", "localhost")):
            headers = {"Origin": origin} if origin else {}
            request = client.build_request("POST", "/answer", data=fields, headers=headers)
            if origin is None:
                del request.headers["origin"]
            reply = client.send(request)
            assert reply.status_code == 403 and "Origin" in reply.text, origin
    _still_pending(env, parked)


def test_approving_with_the_form_resumes_the_agent(env: Env) -> None:
    parked = env.park(output="the thing is done")
    with login(env.base) as client:
        page = client.get("/runtime", params={"id": parked.runtime}).text
        fields = {**answer_form(page, parked.request), "decision": "approve", "reason": "fine"}
        reply = client.post("/answer", data=fields)
        assert reply.status_code == 303 and reply.headers["location"] == f"/runtime?id={parked.runtime}"
        done = wait_result(env.stub, parked)
        assert (done.status, done.text) == ("done", "the thing is done")
        # the same answer again is a harmless duplicate; the page shows the agent done
        assert client.post("/answer", data=fields).status_code == 303
        page = client.get("/runtime", params={"id": parked.runtime}).text
        assert "done: the thing is done" in page and parked.request not in answer_ids(page)


def answer_ids(page: str) -> list[str]:
    import re

    return re.findall(r'<section class="ask" data-request="([^"]+)"', page)


def test_what_models_and_tools_say_is_escaped(env: Env) -> None:
    parked = env.park(prompt=XSS_PROMPT, output=XSS_REPLY)
    with login(env.base) as client:
        for path in ("/pending", f"/runtime?id={parked.runtime}"):
            page = client.get(path).text
            assert "<img src=x" not in page and 'onerror="alert' not in page
            assert "check &lt;img src=x onerror=&quot;alert(1)&quot;&gt; please" in page
        fields = {**answer_form(client.get("/pending").text, parked.request), "decision": "approve"}
        assert client.post("/answer", data=fields).status_code == 303
        assert wait_result(env.stub, parked).text == XSS_REPLY
        page = client.get("/runtime", params={"id": parked.runtime}).text
        assert "<script>alert" not in page
        assert "done &lt;script&gt;alert(2)&lt;/script&gt;" in page
        assert page.count("<script") == 1  # the inspector's own, from /static


def test_a_keyed_runtime_is_invisible_until_its_key_is_added(env: Env) -> None:
    parked = env.park(key="rt-secret-1")
    with login(env.base) as client:
        assert parked.runtime not in client.get("/").text
        assert parked.request not in client.get("/pending").text
        assert client.get("/runtime", params={"id": parked.runtime}).status_code == 404
        assert client.get("/events", params={"id": parked.runtime}).status_code == 404
        for odd in ("", "x" * 5000, "../etc", "nope"):  # not a runtime id, or no such runtime
            assert client.get("/runtime", params={"id": odd}).status_code == 404, odd
            assert client.get("/pending", params={"runtime": odd}).status_code in (200, 404), odd
        csrf = csrf_of(client.get("/").text)
        assert client.post("/keys", data={"csrf": csrf, "key": "wrong", "back": "/"}).status_code == 303
        assert parked.runtime not in client.get("/").text
        assert client.post("/keys", data={"csrf": csrf, "key": "rt-secret-1", "back": "/"}).status_code == 303
        assert parked.runtime in client.get("/").text
        page = client.get("/runtime", params={"id": parked.runtime})
        assert page.status_code == 200 and parked.request in answer_ids(page.text)
        fields = {**answer_form(page.text, parked.request), "decision": "decline", "reason": "no"}
        assert client.post("/answer", data=fields).status_code == 303
    assert wait_result(env.stub, parked, key="rt-secret-1").text.startswith("declined")
    with login(env.base) as other:  # another session does not hold it
        assert parked.runtime not in other.get("/").text


def test_pages_and_assets_carry_a_strict_content_security_policy(env: Env) -> None:
    with login(env.base) as client:
        for path in ("/", "/pending", "/static/inspector.js", "/static/inspector.css", "/login"):
            reply = client.get(path)
            assert reply.status_code == 200, path
            csp = reply.headers["content-security-policy"]
            for rule in ("default-src 'none'", "script-src 'self'", "style-src 'self'", "connect-src 'self'",
                         "form-action 'self'", "frame-ancestors 'none'", "base-uri 'none'"):
                assert rule in csp, (path, rule)
            assert reply.headers["x-content-type-options"] == "nosniff"
        assert client.get("/static/../routes.py").status_code == 404


def test_a_foreign_host_header_is_refused(env: Env) -> None:
    with httpx.Client(base_url=env.base) as client:
        reply = client.get("/login", headers={"Host": "rebound.example:80"})
        assert reply.status_code == 421


def test_the_event_stream_replays_after_a_seq_and_resumes_from_last_event_id(env: Env) -> None:
    parked = env.park()
    with login(env.base) as client:
        ids = _stream_ids(client, parked.runtime, {}, want=3)
        assert ids[:3] == [1, 2, 3]
        assert _stream_ids(client, parked.runtime, {"after": "2"}, want=1)[0] == 3
        assert _stream_ids(client, parked.runtime, {"after": "1"}, want=1, last="4")[0] == 5


def _stream_ids(client: httpx.Client, rid: str, params: dict[str, str], *, want: int,
                last: str | None = None) -> list[int]:
    headers = {"Last-Event-ID": last} if last else {}
    ids: list[int] = []
    with client.stream("GET", "/events", params={"id": rid, **params}, headers=headers, timeout=10) as reply:
        assert reply.status_code == 200 and reply.headers["content-type"].startswith("text/event-stream")
        for line in reply.iter_lines():
            if line.startswith("id: "):
                ids.append(int(line[4:]))
                if len(ids) >= want:
                    break
    return ids


def test_logging_out_ends_the_session(env: Env) -> None:
    with login(env.base) as client:
        csrf = csrf_of(client.get("/").text)
        assert client.post("/logout", data={"csrf": csrf}).status_code == 303
        assert client.get("/").status_code == 303


def test_the_grpc_api_still_wants_the_token(env: Env) -> None:
    from toolnexus_daemon.api._gen import runtime_pb2 as pb

    with pytest.raises(grpc.RpcError) as err:
        env.stub.ListRuntimes(pb.ListRuntimesRequest(), timeout=5)
    assert err.value.code() is grpc.StatusCode.UNAUTHENTICATED


def test_the_event_stream_carries_the_model_text_live_and_then_the_result(env: Env) -> None:
    from toolnexus_daemon.api._gen import runtime_pb2 as pb

    parked = env.park(output="streamed <b>reply</b>")
    md = [("authorization", f"Bearer {TOKEN}")]
    seen: list[tuple[str, str]] = []
    with login(env.base) as client, client.stream("GET", "/events", params={"id": parked.runtime},
                                                  timeout=15) as reply:
        kind = ""
        answered = False
        for line in reply.iter_lines():
            if line.startswith("event: "):
                kind = line[7:]
            elif line.startswith("data: "):
                seen.append((kind, line[6:]))
                if kind == "ev" and '"type": "pending"' in line and not answered:
                    answered = True  # every stored event is in: now the turn that streams text
                    answer = pb.Answer(id=parked.request, ok=True)
                    env.stub.Resume(pb.ResumeRequest(runtime_id=parked.runtime, answer=answer, no_wait=True),
                                    metadata=md, timeout=5)
                if kind == "ev" and '"type": "result"' in line and '"what": "done:' in line:
                    break
    texts = "".join(json.loads(data)["text"] for kind, data in seen if kind == "text")
    assert "streamed <b>reply</b>" in texts  # JSON in the stream; the page's script sets it as text
    assert [k for k, _ in seen].index("text") < len(seen) - 1


def test_a_request_with_a_data_schema_is_answered_with_typed_data(env: Env) -> None:
    schema = {"type": "object", "required": ["amount"],
              "properties": {"amount": {"type": "integer"},
                             "currency": {"type": "string", "enum": ["EUR", "USD"]},
                             "rush": {"type": "boolean"}}}
    seen: list[dict[str, object]] = []
    agent = ask_agent(env.model, prompt="how much?", output="paid", data={"schema": schema}, seen=seen)
    parked = park(env.stub, env.model, agent)
    with login(env.base) as client:
        page = client.get("/pending").text
        start = page.index(f'data-request="{parked.request}"')
        card = page[start:page.index("</form>", start)]
        assert 'name="d.amount"' in card and '<option value="USD">' in card and 'name="data_json"' not in card
        fields = {**answer_form(page, parked.request), "decision": "approve"}
        refused = client.post("/answer", data={**fields, "d.amount": "lots"})
        assert refused.status_code == 400 and "must be an integer" in refused.text
        typed = {"d.amount": "12", "d.currency": "USD", "d.rush": "true"}
        sent = client.post("/answer", data={**fields, **typed})
        assert sent.status_code == 303, sent.text
    assert wait_result(env.stub, parked).text == "paid"
    assert seen[-1]["data"] == {"amount": 12, "currency": "USD", "rush": True}


def test_a_session_holds_a_bounded_number_of_live_timelines(env: Env) -> None:
    import contextlib
    import time

    from toolnexus_daemon.web.inspector.sessions import MAX_STREAMS

    parked = env.park()
    with login(env.base) as client, contextlib.ExitStack() as streams:
        opened = [streams.enter_context(client.stream("GET", "/events", params={"id": parked.runtime}))
                  for _ in range(MAX_STREAMS)]
        readers = [reply.iter_lines() for reply in opened]  # kept: a dropped reader closes its stream
        for reply, lines in zip(opened, readers, strict=True):
            assert reply.status_code == 200
            assert next(lines) == "retry: 2000"  # the stream is running
        refused = client.get("/events", params={"id": parked.runtime})
        assert refused.status_code == 429 and f"{MAX_STREAMS} live timelines" in refused.text
        opened[0].close()  # the browser goes: its place is free again
        deadline = time.monotonic() + 10
        while _try_stream(client, parked.runtime) != 200:
            assert time.monotonic() < deadline, "a closed timeline's place was not freed"
            time.sleep(0.1)


def _try_stream(client: httpx.Client, rid: str) -> int:
    with client.stream("GET", "/events", params={"id": rid}) as reply:
        return reply.status_code


def test_an_https_origin_for_the_same_host_is_taken_as_behind_a_tls_proxy(env: Env) -> None:
    parked = env.park()
    with login(env.base) as client:
        fields = {**answer_form(client.get("/pending").text, parked.request), "decision": "approve"}
        proxied = env.base.replace("http://", "https://")
        assert client.post("/answer", data=fields, headers={"Origin": proxied}).status_code == 303
    assert wait_result(env.stub, parked).status == "done"


def test_the_timeline_is_paged_newest_first_with_older_and_newer_pages(env: Env) -> None:
    import re

    from toolnexus_daemon.api._gen import runtime_pb2 as pb

    parked = env.park()
    md = [("authorization", f"Bearer {TOKEN}")]
    for _ in range(120):  # a spawned event each
        env.stub.Spawn(pb.SpawnRequest(runtime_id=parked.runtime, agent="asker"), metadata=md, timeout=5)
    with login(env.base) as client:
        newest = client.get("/runtime", params={"id": parked.runtime}).text
        seqs = [int(s) for s in re.findall(r'<tr class="ev" data-seq="(\d+)"', newest)]
        last = seqs[-1]
        assert len(seqs) == 100 and seqs == list(range(last - 99, last + 1))
        assert f'data-stream="/events?id={parked.runtime}&amp;after={last}"' in newest  # follows live
        older = re.search(r'<a id="older" href="([^"]+)"', newest)
        assert older is not None and 'id="newer"' not in newest
        page = client.get(older.group(1).replace("&amp;", "&")).text
        older_seqs = [int(s) for s in re.findall(r'<tr class="ev" data-seq="(\d+)"', page)]
        assert older_seqs == list(range(max(1, last - 199), last - 99))  # just before the newest page
        assert 'id="newer"' in page and 'data-stream=""' in page  # an older page does not follow
