"""What ``Info`` reports: version, listeners, every limit in force, the store, the effective configuration.

``DaemonFacts`` is filled in by the composition root once the listeners are
bound (ports resolved) and the metrics endpoint is up; the configuration it
carries was redacted by ``Settings.redacted``, so no secret can reach a
client through ``Info``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from .. import __version__
from ..config import Limits
from ..engine.verbs.engine import Engine
from ..model import RuntimeOptions
from ..store.base import StoreInfo
from ._gen import runtime_pb2 as pb

# docs/protocol.md §2 defaults the engine applies that RuntimeOptions does not carry
ENGINE_DEFAULTS = {"max_depth": 3, "max_children": 8, "llm_retries": 3, "llm_timeout_ms": 60_000}


@dataclass
class DaemonFacts:
    limits: Limits = field(default_factory=Limits)
    # Settings.redacted(): flag name -> value, secrets already replaced
    config: dict[str, str] = field(default_factory=dict)
    listen: list[str] = field(default_factory=list)
    metrics_address: str = ""
    # in a cluster: this node, its advertised address, and a (blocking) read of the live nodes
    node: str = ""
    advertise: str = ""
    live_nodes: Callable[[], list[tuple[str, str, tuple[str, ...]]]] | None = None


def cluster_nodes(nodes: list[tuple[str, str, tuple[str, ...]]]) -> list[pb.ClusterNode]:
    return [pb.ClusterNode(node=n, address=a, runtimes=list(rs)) for n, a, rs in nodes]


def info_response(engine: Engine, facts: DaemonFacts, options: RuntimeOptions | None,
                  cluster: list[pb.ClusterNode] | None = None,
                  store: StoreInfo | None = None) -> pb.InfoResponse:
    """The daemon's Info; with a runtime's ``options``, its own option limits replace the defaults.
    ``store``: the store's info, read beforehand (through ``Store.read``); read here when not given."""
    if options is None:
        options = RuntimeOptions(event_retention=facts.limits.event_retention)
    if store is None:
        store = engine.store.info()
    limits = {**ENGINE_DEFAULTS, **facts.limits.as_dict(), **_option_limits(options),
              "store_map_size_bytes": store.map_size_bytes}
    return pb.InfoResponse(version=__version__, store_path=store.path, store_size_bytes=store.size_bytes,
                           limits=limits, runtimes=len(engine.runtimes()),
                           format_version=str(store.format_version), listen=facts.listen,
                           config=facts.config, metrics_address=facts.metrics_address, node=facts.node,
                           advertise=facts.advertise, cluster=cluster or [])


def _option_limits(options: RuntimeOptions) -> dict[str, int]:
    return {"max_concurrent_turns": options.max_concurrent_turns, "inbox_cap": options.inbox_cap,
            "close_grace_ms": options.close_grace_ms, "tool_timeout_ms": options.tool_timeout_ms,
            "max_turns": options.max_turns, "event_retention": options.event_retention,
            "version_grace_ms": options.version_grace_ms}
