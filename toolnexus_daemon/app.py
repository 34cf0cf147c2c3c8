"""The composition root: builds the store, hub, executors, engine and server, runs, shuts down.

Order matters on the way up (the store lock is taken before anything listens;
health stays NOT_SERVING until recovery has relaunched the running handles)
and on the way
down (SIGTERM/SIGINT or a daemon-wide ``Shutdown``: NOT_SERVING, stop
accepting RPCs, stop the engine's turns — each is checkpointed at its last
committed step and continues on the next start — end the Watch and Connect
streams with UNAVAILABLE, give in-flight RPCs the grace period, close the
HTTP clients and the metrics endpoint, close the store). Exit codes: 0 after
a clean shutdown, 2 when the data directory is held by another daemon or an
address cannot be bound, 1 for anything else.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from grpc import aio
from grpc_health.v1 import health_pb2
from grpc_health.v1._async import HealthServicer

from . import __version__, gctune, web
from .api.forward import Forwarder
from .api.resume_forward import LinkForwarder, UiForwarder
from .api.server import ListenError, create_server, set_health
from .api.servicer import AgentRuntimeServicer
from .api.store_state import follow_store
from .clock import SystemClock
from .config import Settings
from .engine.turn.tracing import NOOP, Tracer
from .engine.verbs.engine import Engine
from .engine.verbs.runtime import Runtime
from .envexpand import EnvAllowList
from .errors import NodeTaken, StoreError, StoreLocked
from .llm.factory import model_factory
from .llm.http_base import shared_ssl_context
from .malloc import return_large_blocks
from .model import Event, ToolSource
from .observe.logs import configure, log_events
from .observe.metrics import Metrics
from .relay import WorkerHub
from .store.base import Store
from .store.opening import open_store, store_location
from .tools.base import ToolExecutor
from .tools.http_tool import HttpToolExecutor
from .tools.mcp_lazy import LazyMcpExecutor, sdk_installed
from .tools.native import NativeExecutor
from .tools.resolver import HubResolver
from .tools.webhook import WebhookExecutor

if TYPE_CHECKING:  # the cluster and its driver load only in a daemon that joins one
    from .cluster.membership import Membership
    from .mcp_edge.server import McpListener  # the MCP SDK loads only with --mcp-listen

log = logging.getLogger("toolnexus_daemon")
# Info's config["advertise"] of a daemon other daemons cannot forward calls to
NOT_FORWARDABLE = "none: not reachable by other daemons; add --advertise HOST:PORT"


@dataclass
class _Daemon:
    engine: Engine
    hub: WorkerHub
    server: aio.Server
    servicer: AgentRuntimeServicer
    health: HealthServicer
    addresses: list[str]
    executors: tuple[NativeExecutor | WebhookExecutor | HttpToolExecutor | LazyMcpExecutor, ...]
    metrics: Metrics
    metrics_server: web.WebServer
    # a member of a cluster: this daemon's runtime leases
    membership: Membership | None = None
    # the answer-link listener (--answers-listen), once bound
    answers: web.WebServer | None = None
    # the MCP server (--mcp-listen), once bound
    mcp: McpListener | None = None
    # the engine's tracer (--otlp-endpoint): flushed at shutdown
    tracer: Tracer = NOOP
    # the web inspector (--ui-listen), once bound
    ui: web.WebServer | None = None


def loop_factory(name: str) -> Callable[[], asyncio.AbstractEventLoop]:
    """The event loop ``--event-loop`` names: the standard library's by default, or uvloop, whose
    cheaper wake-ups (grpc.aio wakes the loop once per completion-queue event) measured less daemon
    CPU per cycle at 1 lane but mixed at 16 (docs/decisions.md)."""
    if name == "uvloop":
        import uvloop  # only when chosen: "asyncio" must run where uvloop is not installed

        return uvloop.new_event_loop
    return asyncio.new_event_loop


def run(settings: Settings) -> int:
    """Serve until SIGTERM/SIGINT; returns the process exit code."""
    configure(settings.log_level)
    return_large_blocks()  # memory a burst of large messages held goes back once they are sent
    gctune.tune()
    try:
        store = open_store(settings)
    except StoreLocked as exc:
        print(f"toolnexus-daemon: {exc}", file=sys.stderr, flush=True)
        return 2
    except StoreError as exc:
        print(f"toolnexus-daemon: {exc}", file=sys.stderr, flush=True)
        return 1
    try:
        with asyncio.Runner(loop_factory=loop_factory(settings.event_loop)) as runner:
            code = runner.run(_serve(settings, store))
    except (ListenError, web.WebListenError, NodeTaken) as exc:
        print(f"toolnexus-daemon: {exc}", file=sys.stderr, flush=True)
        return 2
    except Exception:
        log.exception("daemon failed")
        return 1
    finally:
        store.close()
    log.info("stopped", extra={"data_dir": store_location(settings)})
    return code


def _tracer(settings: Settings) -> Tracer:
    """The OpenTelemetry tracer when an OTLP endpoint is configured; the SDK is not even imported
    otherwise."""
    if not settings.tracing.on(os.environ):
        return NOOP
    from .observe.tracing import build

    return build(settings.tracing, os.environ, __version__) or NOOP


def _build(settings: Settings, store: Store) -> _Daemon:
    hub = WorkerHub()
    allow = EnvAllowList(settings.allow_env)
    env = allow.view(os.environ)  # all that outgoing requests may ever read
    mcp = _mcp_executor(settings, env)
    executors = (NativeExecutor(hub), WebhookExecutor(env=env), HttpToolExecutor(env=env),
                 *((mcp,) if mcp is not None else ()))
    by_source: dict[ToolSource, ToolExecutor] = {
        ToolSource.NATIVE: executors[0], ToolSource.WEBHOOK: executors[1], ToolSource.HTTP: executors[2]}
    if mcp is not None:
        by_source[ToolSource.MCP] = mcp
    metrics = Metrics()

    watchers: list[Callable[[str, list[Event]], None]] = []  # the pending hub, once the server exists

    def observe(rt: Runtime, events: list[Event]) -> None:
        metrics.observe(rt, events)  # never raises
        for told in watchers:
            told(rt.id, events)  # only marks the runtime to be re-read: never raises
        try:
            log_events(rt.id, events)
        except Exception:  # the observer runs under the commit lock: a log failure must not fail a commit
            log.exception("event log failed")

    membership = _membership(settings, store)
    tracer = _tracer(settings)
    engine = Engine(metrics.instrument(store), clock=SystemClock(), model_for=model_factory(hub, env),
                    executors=by_source, resolver=HubResolver(hub), observer=observe,
                    limits=settings.peer_limits(), env_allow=allow, ownership=membership, tracer=tracer,
                    tool_lister=mcp, held_bytes=settings.held_memory)
    if mcp is not None:
        mcp.on_tools_changed = engine.refresh_listed  # list_changed: list again for later turns
    metrics.bind(engine, hub)
    health = HealthServicer()
    server, addresses, servicer = create_server(settings, engine, hub, health,
                                                on_resume=metrics.resume_outcome)
    watchers.append(servicer.pending.observe)
    if membership is not None:
        servicer.forwarder = Forwarder(membership.node, settings.tls, settings.max_message_bytes)
        engine.lost_listeners.append(hub.detach_runtime)
        servicer.forwarder.on_unreachable = membership.forget
        _observe_cluster(metrics, membership, servicer.forwarder, engine)
    return _Daemon(engine, hub, server, servicer, health, addresses, executors, metrics,
                   web.metrics_server(metrics.registry, lambda: _serving(health)), membership, tracer=tracer)


async def _serving(health: HealthServicer) -> bool:
    """What gRPC health says of the daemon as a whole (``GET /healthz`` on the metrics port)."""
    # Check reads its context only to abort for an unknown service; "" always has a status
    reply = await health.Check(health_pb2.HealthCheckRequest(service=""), None)  # type: ignore[arg-type]
    return bool(reply.status == health_pb2.HealthCheckResponse.SERVING)


def _mcp_executor(settings: Settings, env: dict[str, str]) -> LazyMcpExecutor | None:
    """The executor of MCP tools, or None where the mcp SDK is not installed (an environment that
    pins another major version of it, such as the benchmarks' peers): New then refuses
    mcp_servers, and --mcp-config cannot be served. The SDK itself is imported on first use
    (``tools.mcp_lazy``), or at start with --mcp-config."""
    if not sdk_installed():
        log.warning("MCP servers are unavailable: the mcp SDK is not installed",
                    extra={"mcp_config": settings.mcp_config is not None})
        return None
    return LazyMcpExecutor(settings.mcp_config, env)


def _membership(settings: Settings, store: Store) -> Membership | None:
    """In a cluster, this daemon's leases on the shared database (``cluster.membership``)."""
    if not settings.clustered:
        return None
    from .cluster.membership import Membership
    from .store.postgres.lease import Leases
    from .store.postgres.store import PgStore

    if not isinstance(store, PgStore):
        raise StoreError("a cluster needs a PostgreSQL store (--store postgresql://...)")
    # a new incarnation at every start (Leases draws it): ownership belongs to this process
    return Membership(Leases(store.link, settings.node_id, settings.advertise, settings.lease_ms))


def _observe_cluster(metrics: Metrics, membership: Membership, forwarder: Forwarder, engine: Engine) -> None:
    from .cluster.observe import ClusterCollector

    metrics.registry.register(ClusterCollector(membership, lambda: forwarder.forwarded,
                                               lambda: engine.fenced_commits))


WILDCARDS = ("0.0.0.0", "::", "[::]", "")


def _advertised(settings: Settings, addresses: list[str]) -> str:
    """Where other daemons reach this one: ``--advertise`` (port 0 resolved to the port the first TCP
    listener got: tests, ad hoc use), else the first TCP listen address when it names a host rather
    than a wildcard; "" when no address is known (the daemon owns runtimes but is not forwarded to)."""
    tcp = [a for a in addresses if not a.startswith("unix:")]
    if not settings.advertise:
        fixed = [a for a in tcp if a.rpartition(":")[0] not in WILDCARDS]
        return fixed[0] if fixed else ""
    host, _, port = settings.advertise.rpartition(":")
    if port != "0":
        return settings.advertise
    if not tcp:
        raise ListenError("--advertise HOST:0 takes the port of a TCP --listen address; there is none")
    return f"{host}:{tcp[0].rpartition(':')[2]}"


async def _serve(settings: Settings, store: Store) -> int:
    stop = _stop_on_signals()
    daemon = _build(settings, store)
    daemon.servicer.stop_daemon = stop.set
    daemon.servicer.remote_shutdown = settings.allow_remote_shutdown
    if settings.metrics_listen:
        daemon.servicer.facts.metrics_address = await daemon.metrics_server.start(settings.metrics_listen)
    if settings.answers is not None:
        await _serve_answers(daemon, settings)
    if settings.mcp is not None:
        await _serve_mcp(daemon, settings)
    if settings.ui_listen:
        await _serve_ui(daemon, settings)
    await set_health(daemon.health, serving=False)
    follow_store(store, daemon.health, daemon.servicer)
    await daemon.server.start()
    try:
        recovered = await daemon.engine.start()
        if daemon.membership is not None:
            recovered += await _join(daemon, settings)
        daemon.servicer.open()
        shared_ssl_context()  # built now, not by the first New on the event loop
        gctune.freeze()  # what start-up built is never walked by a collection again
        await set_health(daemon.health, serving=True)
        log.info("serving", extra={"addresses": daemon.addresses, "recovered": recovered,
                                   "data_dir": store_location(settings),
                                   "metrics_address": daemon.servicer.facts.metrics_address,
                                   "config": settings.redacted()})
        await stop.wait()
        log.info("shutting down", extra={"grace_s": settings.grace})
    finally:
        await _shutdown(daemon, settings.grace)
    return 0


async def _serve_answers(daemon: _Daemon, settings: Settings) -> None:
    """Bind the answer-link listener before any runtime loads, so every link minted has its base;
    ``Info.config`` shows the bound address and the base the links start with."""
    forwarder = daemon.servicer.forwarder
    forward = LinkForwarder(forwarder, settings.auth_token) if forwarder is not None else None
    daemon.answers, bound = await web.serve_answers(settings, daemon.engine, daemon.engine.clock,
                                                    settings.peer_limits(), forward)
    config = daemon.servicer.facts.config
    config["answers-listen"], config["answers-base-url"] = bound, daemon.engine.answer_base
    log.info("serving answer links",
             extra={"answers_address": bound, "answers_base_url": daemon.engine.answer_base})


async def _serve_mcp(daemon: _Daemon, settings: Settings) -> None:
    """Bind the MCP listener; it answers once recovery is done (``servicer.is_open``)."""
    from .api.mcp_remote import RemoteVerbs
    from .mcp_edge.server import McpListener

    assert settings.mcp is not None
    forwarder = daemon.servicer.forwarder  # in a cluster: runtimes another daemon owns are served there
    remote = RemoteVerbs(forwarder, daemon.engine.store, settings.auth_token) if forwarder else None
    daemon.mcp = McpListener(daemon.engine, settings.mcp.expose, ready=daemon.servicer.is_open,
                             token=settings.auth_token, tls=settings.tls, host=settings.mcp.host,
                             remote=remote)
    bound = await daemon.mcp.start(settings.mcp.listen)
    daemon.servicer.facts.config["mcp-listen"] = bound
    log.info("serving MCP", extra={"mcp_address": bound, "mcp_expose": list(settings.mcp.expose)})
async def _serve_ui(daemon: _Daemon, settings: Settings) -> None:
    """Bind the web inspector; ``Info.config`` and the log show where it listens."""
    forwarder = daemon.servicer.forwarder
    forward = UiForwarder(forwarder, settings.auth_token) if forwarder is not None else None
    daemon.ui, bound = await web.serve_ui(settings, daemon.engine, daemon.engine.clock, forward)
    daemon.servicer.facts.config["ui-listen"] = bound
    scheme = "https" if settings.tls is not None else "http"
    log.info("serving the inspector", extra={"ui_address": bound, "ui_url": f"{scheme}://{bound}/"})


def _stop_on_signals() -> asyncio.Event:
    """The first SIGTERM/SIGINT asks for a graceful stop; a second one exits at once."""
    stop = asyncio.Event()

    def on_signal() -> None:
        if stop.is_set():
            # safe: every acknowledged change is already committed (docs/protocol.md §5)
            log.warning("second signal during shutdown: exiting now")
            os._exit(1)
        stop.set()

    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal)
    return stop


async def _join(daemon: _Daemon, settings: Settings) -> int:
    """Take the runtimes nobody owns (all of them when this daemon is the first up), then keep the
    leases renewed and sweep for orphans in the background; returns how many were taken."""
    membership = daemon.membership
    assert membership is not None
    membership.set_address(_advertised(settings, daemon.addresses))
    await membership.join()  # NodeTaken: another live process runs under this node id
    facts = daemon.servicer.facts
    facts.node, facts.advertise, facts.live_nodes = membership.node, membership.address, membership.live_nodes
    facts.config["advertise"] = membership.address or NOT_FORWARDABLE
    if not membership.address:
        log.warning("not reachable by other daemons: calls for the runtimes this daemon owns that reach "
                    "another daemon answer UNAVAILABLE until it stops; add --advertise HOST:PORT (or "
                    "--listen on a fixed host) so they are forwarded here", extra={"node": membership.node})
    before = len(membership.held())
    await membership.tick(daemon.engine.lost, daemon.engine.adopt)
    membership.start(daemon.engine.lost, daemon.engine.adopt, daemon.engine.lapsed)
    log.info("joined the cluster", extra={"node": membership.node, "advertise": membership.address,
                                          "incarnation": membership.incarnation,
                                          "lease_ms": membership.lease_ms, "margin_ms": membership.margin_ms,
                                          "runtimes": len(membership.held())})
    return len(membership.held()) - before


async def _shutdown(daemon: _Daemon, grace: float) -> None:
    await daemon.health.enter_graceful_shutdown()
    daemon.servicer.begin_shutdown()
    if daemon.mcp is not None:
        await daemon.mcp.close()  # calls in flight end; the runs they started are durable
    if daemon.membership is not None:
        await daemon.membership.stop()  # no takeover while stopping; engine.stop releases the leases
    # stop() rejects new RPCs at once; in-flight ones get the grace period
    stopping = asyncio.create_task(daemon.server.stop(grace))
    await daemon.engine.stop()
    for rt in daemon.engine.runtimes():
        daemon.hub.detach_runtime(rt.id)
    await stopping
    for executor in daemon.executors:
        await executor.aclose()
    await daemon.metrics_server.close()
    if daemon.answers is not None:
        await daemon.answers.close()
    if daemon.ui is not None:
        await daemon.ui.close()
    if daemon.servicer.forwarder is not None:
        await daemon.servicer.forwarder.close()
    if daemon.membership is not None:
        await daemon.membership.leave()
    await asyncio.to_thread(daemon.tracer.shutdown)  # exports the spans still batched
