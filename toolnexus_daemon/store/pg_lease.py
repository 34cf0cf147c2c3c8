"""Runtime leases on the shared database: at most one daemon of a cluster owns a runtime.

A lease row names the runtime, its owner node, the address other daemons dial to reach it,
an **epoch** and an expiry. Taking a lease that another node holds bumps the epoch; every
commit of the owner carries a ``Fence`` (runtime, owner, epoch) that ``tn_fence`` checks in
the commit's own transaction (``pg_write``), holding the lease row ``FOR SHARE`` until
COMMIT. So once another node has taken a runtime over, nothing the old owner still had in
flight can land: its next commit fails with ``LeaseLost``.

Time is the database's (``now()`` in every statement), never a daemon's clock: nodes whose
clocks disagree still agree on who holds what. A lease lasts ``lease_ms`` from its last
renewal; the owner renews every third of that. Releasing a lease (a graceful stop) expires it
at once, so another node can take the runtime without waiting.

``tn_nodes`` lists the nodes with the time each was last seen (every renewal), which is what
``Info`` shows as the live members of the cluster.

This module is the store's half of the cluster: taking, renewing, releasing and listing. The
engine decides when (on a call for a runtime nobody owns, from the sweeper, at shutdown).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import cast

from . import codec
from .base import Fence
from .pg_link import Conn, Link, OneConnection

_ACQUIRE = """
INSERT INTO tn_leases AS l (rid, owner, address, epoch, expires_at)
VALUES (%(rid)s, %(node)s, %(address)s, 1, now() + %(ms)s * interval '1 millisecond')
ON CONFLICT (rid) DO UPDATE SET owner = EXCLUDED.owner, address = EXCLUDED.address,
    epoch = CASE WHEN l.owner = EXCLUDED.owner THEN l.epoch ELSE l.epoch + 1 END,
    expires_at = EXCLUDED.expires_at
WHERE l.owner = EXCLUDED.owner OR l.expires_at <= now()
RETURNING epoch, extract(epoch FROM expires_at - now()) * 1000
"""
_HOLDER = """
SELECT owner, address, extract(epoch FROM expires_at - now()) * 1000 FROM tn_leases WHERE rid = %s
"""
_RENEW = """
UPDATE tn_leases AS l SET expires_at = now() + %s * interval '1 millisecond'
FROM unnest(%s::text[], %s::bigint[]) AS h(rid, epoch)
WHERE l.rid = h.rid AND l.epoch = h.epoch AND l.owner = %s
RETURNING l.rid
"""
_RELEASE = """
UPDATE tn_leases SET expires_at = now() - interval '1 millisecond'
WHERE rid = %s AND owner = %s AND epoch = %s AND expires_at > now()
"""
_ORPHANS = """
SELECT r.rid FROM tn_runtimes r LEFT JOIN tn_leases l ON l.rid = r.rid
WHERE l.rid IS NULL OR l.expires_at <= now() ORDER BY r.rid LIMIT %s
"""
_SEEN = """
INSERT INTO tn_nodes (node, address, started_at, seen_at) VALUES (%s, %s, now(), now())
ON CONFLICT (node) DO UPDATE SET address = EXCLUDED.address, seen_at = now()
"""
_LIVE = """
SELECT n.node, n.address, coalesce(array_agg(l.rid ORDER BY l.rid) FILTER (WHERE l.rid IS NOT NULL), '{}')
FROM tn_nodes n LEFT JOIN tn_leases l ON l.owner = n.node AND l.expires_at > now()
WHERE n.seen_at > now() - %s * interval '1 millisecond'
GROUP BY n.node, n.address ORDER BY n.node
"""


@dataclass(frozen=True)
class Lease:
    """This node owns ``runtime_id`` at ``epoch`` for about ``remaining_ms`` more."""

    runtime_id: str
    owner: str
    epoch: int
    remaining_ms: float

    @property
    def fence(self) -> Fence:
        return Fence(self.runtime_id, self.owner, self.epoch)


@dataclass(frozen=True)
class Held:
    """Another live node owns the runtime: where to forward its calls."""

    runtime_id: str
    owner: str
    address: str
    remaining_ms: float


@dataclass(frozen=True)
class Node:
    """A live member of the cluster and the runtimes it owns now."""

    node: str
    address: str
    runtimes: tuple[str, ...]


class Leases:
    """The lease operations of one node (``node``, reachable at ``address``) on one database."""

    def __init__(self, link: Link, node: str, address: str, lease_ms: int) -> None:
        if lease_ms < 100:
            raise ValueError(f"lease_ms {lease_ms}: at least 100")
        codec.runtime_key(node)  # the same id rules as any stored key
        self.link, self.node, self.address, self.lease_ms = link, node, address, lease_ms
        self._conn = OneConnection(link)

    def _run(self, sql: str, *params: object) -> list[tuple[object, ...]]:
        def work(conn: Conn) -> list[tuple[object, ...]]:
            cur = conn.execute(sql.encode(), params)
            return cur.fetchall() if cur.description else []
        return self._conn.run(work)

    def acquire(self, runtime_id: str) -> Lease | Held:
        """Own ``runtime_id`` (a renewal when this node owns it already), or learn who does."""
        args = {"rid": runtime_id, "node": self.node, "address": self.address, "ms": self.lease_ms}
        rows = self._conn.run(lambda conn: conn.execute(_ACQUIRE.encode(), args).fetchall())
        if rows:
            return Lease(runtime_id, self.node, int(str(rows[0][0])), float(str(rows[0][1])))
        held = self._run(_HOLDER, runtime_id)
        if not held:  # released and deleted between the two statements: try once more
            return self.acquire(runtime_id)
        owner, address, remaining = held[0]
        return Held(runtime_id, str(owner), str(address), float(str(remaining)))

    def renew(self, held: Mapping[str, int]) -> set[str]:
        """Extend every lease of ``held`` (runtime id → epoch) and mark this node seen; returns the
        runtimes whose lease is lost (another node took them): drop them, write nothing more."""
        self._run(_SEEN, self.node, self.address)
        if not held:
            return set()
        ids = list(held)
        kept = self._run(_RENEW, self.lease_ms, ids, [held[r] for r in ids], self.node)
        return set(ids) - {str(r[0]) for r in kept}

    def release(self, lease: Lease) -> bool:
        """Expire ``lease`` now so another node may take the runtime at once; False if already lost."""
        def work(conn: Conn) -> int:
            return conn.execute(_RELEASE.encode(), (lease.runtime_id, self.node, lease.epoch)).rowcount
        return self._conn.run(work) > 0

    def orphans(self, limit: int = 100) -> list[str]:
        """Runtimes no live node owns: never leased, or their lease expired (the sweeper's work)."""
        return [str(r[0]) for r in self._run(_ORPHANS, limit)]

    def live_nodes(self) -> list[Node]:
        """Nodes seen within one lease, each with the runtimes it owns."""
        rows = self._run(_LIVE, self.lease_ms)
        return [Node(str(n), str(a), tuple(str(r) for r in cast(list[object], rs))) for n, a, rs in rows]

    def close(self) -> None:
        self._conn.close()
