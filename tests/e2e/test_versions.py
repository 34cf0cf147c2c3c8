"""Registry versions through a real daemon (docs/versions.md): a deploy never strands a parked run.

An approval is parked on the native tool ``charge`` of version 1; the app is then redeployed
(``New`` with other souls and tool schemas, one without ``charge``), the daemon is killed -9, and
the answer comes. The run finishes on version 1: the scripted model server receives version 1's
soul and tools, and the worker of version 1's build runs its ``charge``. ``upgrade`` moves a handle
to the latest version, refused naming what cannot be fed safely. Workers name the versions they
serve. Runs on LMDB, and on PostgreSQL with ``TOOLNEXUS_TEST_STORE=postgres``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from tests.e2e.test_cluster import running
from tests.e2e.test_crash_reattach import free_port
from tests.support.daemon import DaemonProcess
from tests.support.pg_fixtures import pg_dsn, pg_server
from toolnexus_client import (
    Context,
    Daemon,
    FailedPrecondition,
    Registry,
    Runtime,
    Tool,
    ToolResult,
    Unavailable,
    agent,
    aio,
    registry,
)
from toolnexus_devtools import ScriptedModelServer

__all__ = ["pg_dsn", "pg_server"]
T = TypeVar("T")

AGENT = "cashier"
SCHEMAS: dict[int, dict[str, Any]] = {
    1: {"type": "object", "properties": {"amount": {"type": "number"}}, "required": ["amount"]},
    2: {"type": "object", "properties": {"amount": {"type": "string"}}, "required": ["amount"]},
    3: {"type": "object", "properties": {"cents": {"type": "integer"}}, "required": ["cents"]},
}


def charge_of(n: int) -> Callable[[dict[str, Any], Context], ToolResult | str]:
    def charge(args: dict[str, Any], ctx: Context) -> ToolResult | str:
        if ctx.answer is None:
            return ToolResult.suspend(id=f"charge:{ctx.handle}:v{n}", kind="approval", prompt="charge?")
        return f"charged by v{n}"
    return charge


def build(n: int, *, schema: int | None = None, with_charge: bool = True) -> Registry:
    """The app's registry as deployed by build ``n``: its own soul; ``charge`` unless removed."""
    if with_charge:
        tools = [Tool("charge", input_schema=SCHEMAS[schema or n], execute=charge_of(n))]
    else:
        tools = [Tool("refund", input_schema={"type": "object", "properties": {}}, execute=lambda a, c: "ok")]
    return registry(agent(AGENT, does="charges cards", uses={"tools": tools}, soul=f"Soul v{n}"))


def chatty(n: int) -> Registry:
    """A build whose agent has no tools: a wake is one model call that answers."""
    return registry(agent(AGENT, does="talks", soul=f"Soul v{n}"))


@pytest.fixture(scope="module")
def model() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer() as server:
        yield server


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonProcess]:
    proc = DaemonProcess(tmp_path_factory.mktemp("versions") / "data").start()
    try:
        yield proc
    finally:
        proc.stop()


def llm_of(model: ScriptedModelServer) -> dict[str, Any]:
    return {"style": "openai", "base_url": model.url, "model": "scripted"}


def deploy(target: str, model: ScriptedModelServer, reg: Registry, runtime_id: str | None = None,
           **options: Any) -> Runtime:
    return Runtime.new(target=target, registry=reg, llm=llm_of(model), runtime_id=runtime_id,
                       options=options or None)


def park(target: str, model: ScriptedModelServer, reg: Registry, runtime_id: str | None = None,
         **options: Any) -> tuple[str, str, str, int]:
    """A handle parked on ``charge``; returns (runtime, handle, request, version). The client is gone."""
    with deploy(target, model, reg, runtime_id, **options) as rt:
        handle = rt.spawn(rt.root, AGENT)
        rt.wake(handle, "charge 10")
        pending = rt.wait(handle, timeout=30).pending
        assert pending is not None
        return rt.id, handle, pending.id, rt.version


def souls(bodies: list[dict[str, Any]]) -> list[str]:
    return [str(b["messages"][0]["content"]) for b in bodies]


def tool_names(body: dict[str, Any]) -> list[str]:
    return [t["function"]["name"] for t in body.get("tools") or []]


def test_a_parked_approval_finishes_on_its_own_version_after_three_redeploys_and_a_kill(
        tmp_path: Path, model: ScriptedModelServer) -> None:
    proc = DaemonProcess(tmp_path / "data", listen=(f"127.0.0.1:{free_port()}",)).start()
    try:
        rid, handle, req, version = park(proc.target, model, build(1))
        assert version == 1
        redeploys = [build(2), build(3), build(4, with_charge=False)]
        for n, reg in enumerate(redeploys, 2):
            with deploy(proc.target, model, reg, rid) as again:
                assert (again.reattached, again.version) == (True, n)
        with deploy(proc.target, model, redeploys[-1], rid) as same:
            assert same.version == 4  # the same registry again is the same version
            assert [(v.number, v.handles, v.latest) for v in same.versions()] == [
                (1, 1, False), (2, 0, False), (3, 0, False), (4, 0, True)]
        proc.kill9()
        proc.start()
        seen = len(model.requests)
        with Runtime.serve(proc.target, build(1), runtime_id=rid, versions=[1]) as old:
            assert old.snapshot(handle).version == 1
            out = old.resume({"id": req, "ok": True})
            assert out.result is not None
            assert (out.result.status, out.result.text) == ("done", "charged by v1")
            assert old.snapshot(handle).version == 1
        bodies = model.requests[seen:]
        assert bodies and souls(bodies) == ["Soul v1"] * len(bodies)
        assert all(tool_names(b) == ["charge"] for b in bodies)
        assert bodies[0]["tools"][0]["function"]["parameters"] == SCHEMAS[1]
    finally:
        proc.stop()


def test_upgrade_is_refused_naming_the_removed_tool_and_accepted_when_compatible(
        shared: DaemonProcess, model: ScriptedModelServer) -> None:
    rid, handle, req, _ = park(shared.target, model, build(1))
    # version 2 keeps charge's schema (only the soul changed): the answer can move there
    with deploy(shared.target, model, build(2, schema=1), rid) as v2:
        out = v2.resume({"id": req, "ok": True}, upgrade=True)
        assert out.result is not None and out.result.text == "charged by v2"
        assert v2.snapshot(handle).version == 2
        parked = v2.spawn(v2.root, AGENT)
        v2.wake(parked, "charge 20")
        pending = v2.wait(parked, timeout=30).pending
        assert pending is not None and v2.snapshot(parked).version == 2
    with deploy(shared.target, model, build(3, with_charge=False), rid) as v3:
        assert v3.version == 3
        with pytest.raises(FailedPrecondition) as refused:
            v3.resume({"id": pending.id, "ok": True}, upgrade=True)
        assert refused.value.message.startswith(
            f'tool "charge" was removed since request "{pending.id}" suspended')
        assert v3.snapshot(parked).state == "suspended"  # nothing was consumed
        with Daemon(shared.target) as daemon:  # the inbox says which version the answer is fed to
            assert [(i.handle, i.version) for i in daemon.list_pending(runtime_id=rid).items] == [(parked, 2)]
        with Runtime.serve(shared.target, build(2, schema=1), runtime_id=rid, versions=[2]):
            out = v3.resume({"id": pending.id, "ok": True})  # on its own version: no refusal
        assert out.result is not None and out.result.text == "charged by v2"
        assert v3.snapshot(parked).version == 2


@pytest.mark.parametrize("policy", ["pinned", "latest"])
def test_an_idle_handle_wakes_on_its_own_version_or_the_latest_by_policy(
        shared: DaemonProcess, model: ScriptedModelServer, policy: str) -> None:
    with deploy(shared.target, model, chatty(1), version_policy=policy) as rt:
        handle = rt.spawn(rt.root, AGENT)
        assert rt.wake(handle, "hello", wait=30).result is not None
        rid = rt.id
    with deploy(shared.target, model, chatty(2), rid, version_policy=policy) as rt:
        seen = len(model.requests)
        rt.wake(handle, "again", wait=30)
        expected = 2 if policy == "latest" else 1
        assert rt.snapshot(handle).version == expected
        assert souls(model.requests[seen:]) == [f"Soul v{expected}"]
        if policy == "pinned":
            seen = len(model.requests)
            rt.wake(handle, "upgrade", wait=30, upgrade=True)
            assert rt.snapshot(handle).version == 2
            assert souls(model.requests[seen:]) == ["Soul v2"]


def test_a_call_of_a_version_no_worker_serves_waits_is_announced_and_served_by_its_worker(
        shared: DaemonProcess, model: ScriptedModelServer) -> None:
    rid, handle, req, _ = park(shared.target, model, build(1))
    with deploy(shared.target, model, build(2), rid) as v2:  # this worker serves version 2 only
        v2.resume({"id": req, "ok": True}, no_wait=True)
        with Daemon(shared.target) as daemon:
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline:
                [summary] = [r for r in daemon.iter_runtimes() if r.runtime_id == rid]
                if summary.versions_without_worker == (1,):
                    break
                time.sleep(0.05)
            assert summary.version == 2 and summary.versions_without_worker == (1,)
        info = v2.info()
        assert (info.runtime_version, info.versions_without_worker) == (2, (1,))
        assert v2.snapshot(handle).state == "running"  # waiting for a worker of version 1
        with Runtime.serve(shared.target, build(1), runtime_id=rid, versions=[1]):
            result = v2.wait(handle, timeout=30)
        assert (result.status, result.text) == ("done", "charged by v1")


def _retried(call: Callable[[], T], deadline_s: float = 30.0) -> T:
    """A call a client retries on UNAVAILABLE (the owner died; another daemon takes its runtime)."""
    deadline = time.monotonic() + deadline_s
    while True:
        try:
            return call()
        except Unavailable:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def test_through_another_daemon_of_a_cluster_the_run_finishes_on_its_version(
        pg_dsn: str, tmp_path: Path, model: ScriptedModelServer) -> None:
    """Parked through daemon A, redeployed through B (forwarded to A), A killed -9: B takes the
    runtime over, reads version 1 from the shared database and finishes the run on it."""
    with running(("a", "b"), pg_dsn, tmp_path) as nodes:
        a, b = nodes["a"].proc, nodes["b"].proc
        rid, handle, req, _ = park(a.target, model, build(1))
        for n, reg in ((2, build(2)), (3, build(3, with_charge=False))):
            with deploy(b.target, model, reg, rid) as again:
                assert again.version == n
        a.kill9()
        seen = len(model.requests)
        with _retried(lambda: Runtime.serve(b.target, build(1), runtime_id=rid, versions=[1])) as old:
            out = _retried(lambda: old.resume({"id": req, "ok": True}))
            assert out.result is not None and out.result.text == "charged by v1"
            assert [(v.number, v.latest) for v in old.versions()] == [(1, False), (2, False), (3, True)]
        assert set(souls(model.requests[seen:])) == {"Soul v1"}


def test_the_asyncio_client_serves_an_old_version_and_lists_versions(
        shared: DaemonProcess, model: ScriptedModelServer) -> None:
    rid, handle, req, _ = park(shared.target, model, build(1))

    async def scenario() -> None:
        latest = await aio.Runtime.new(target=shared.target, registry=build(2, with_charge=False),
                                       llm=llm_of(model), runtime_id=rid)
        old = await aio.Runtime.serve(shared.target, build(1), runtime_id=rid, versions=[1])
        try:
            assert latest.version == 2
            with pytest.raises(FailedPrecondition, match='tool "charge" was removed'):
                await latest.resume({"id": req, "ok": True}, upgrade=True)
            out = await latest.resume({"id": req, "ok": True})
            assert out.result is not None and out.result.text == "charged by v1"
            assert [(v.number, v.handles) for v in await latest.versions()] == [(1, 1), (2, 0)]
            assert (await latest.snapshot(handle)).version == 1
        finally:
            await old.detach()
            await latest.detach()

    asyncio.run(scenario())
