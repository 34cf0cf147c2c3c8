"""Runtime leases on the shared database: at most one daemon process of a cluster owns a runtime.

A lease row names the runtime, its owner node and that node's **incarnation** (a random id
drawn at every start: ownership belongs to one process, not to a node name), the address
other daemons dial to reach it, an **epoch** and an expiry. Taking a lease that another
process holds bumps the epoch; every commit of the owner carries a ``Fence`` (runtime, owner,
incarnation, epoch) that ``tn_fence`` checks in the commit's own transaction (``write``),
holding the lease row ``FOR SHARE`` until COMMIT. So once another process has taken a runtime
over, nothing the old owner still had in flight can land: its next commit fails with
``LeaseLost``.

Time is the database's (``now()`` in every statement), never a daemon's clock: nodes whose
clocks disagree still agree on who holds what. A lease lasts ``lease_ms`` from its last
renewal; the owner renews every third of that. Releasing a lease (a graceful stop) expires it
at once, so another node can take the runtime without waiting. The owner's own account of
when to stop acting is ``cluster.membership``'s.

``tn_nodes`` lists the nodes with the time each was last seen (every renewal), which is what
``Info`` shows as the live members of the cluster. A node id belongs to the process that
joined under it (``join``) until that process leaves or goes silent for a lease; the row also
names the OS process (``process_id``), so a holder that died on this very host is taken from
at once instead of after its lease.

This module is the store's half of the cluster: joining, taking, renewing, releasing and
listing. The engine decides when (on a call for a runtime nobody owns, from the sweeper, at
shutdown).
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import cast

from ...errors import NodeTaken
from .. import codec
from ..base import Fence
from . import process_id
from .link import Conn, Link, OneConnection

_ACQUIRE = """
INSERT INTO tn_leases AS l (rid, owner, incarnation, address, epoch, expires_at)
VALUES (%(rid)s, %(node)s, %(inc)s, %(address)s, 1, now() + %(ms)s * interval '1 millisecond')
ON CONFLICT (rid) DO UPDATE SET owner = EXCLUDED.owner, incarnation = EXCLUDED.incarnation,
    address = EXCLUDED.address,
    epoch = CASE WHEN l.owner = EXCLUDED.owner AND l.incarnation = EXCLUDED.incarnation
                      AND l.expires_at > now() AND NOT %(new)s
                 THEN l.epoch ELSE l.epoch + 1 END,
    expires_at = EXCLUDED.expires_at
WHERE (l.owner = EXCLUDED.owner AND l.incarnation = EXCLUDED.incarnation) OR l.expires_at <= now()
RETURNING epoch, extract(epoch FROM expires_at - now()) * 1000
"""
_HOLDER = """
SELECT l.owner, l.address, extract(epoch FROM l.expires_at - now()) * 1000, l.incarnation, n.process
FROM tn_leases l LEFT JOIN tn_nodes n ON n.node = l.owner AND n.incarnation = l.incarnation
WHERE l.rid = %s
"""
# the lease of a holder whose process is known to be gone (``process_id.gone_here``): taken at once,
# only from that very incarnation (another taker may have been quicker)
_TAKE_FROM_DEAD = """
UPDATE tn_leases SET owner = %(node)s, incarnation = %(inc)s, address = %(address)s, epoch = epoch + 1,
    expires_at = now() + %(ms)s * interval '1 millisecond'
WHERE rid = %(rid)s AND owner = %(owner)s AND incarnation = %(dead)s
RETURNING epoch, extract(epoch FROM expires_at - now()) * 1000
"""
# unexpired leases of processes on this host (scope: boot id and pid namespace), for the sweeper
_LOCAL_HOLDERS = """
SELECT l.rid, n.process FROM tn_leases l
JOIN tn_nodes n ON n.node = l.owner AND n.incarnation = l.incarnation
WHERE l.expires_at > now() AND n.process LIKE %s AND l.incarnation <> %s ORDER BY l.rid LIMIT %s
"""
_RENEW = """
UPDATE tn_leases AS l SET expires_at = now() + %s * interval '1 millisecond'
FROM unnest(%s::text[], %s::bigint[]) AS h(rid, epoch)
WHERE l.rid = h.rid AND l.epoch = h.epoch AND l.owner = %s AND l.incarnation = %s
RETURNING l.rid
"""
_RELEASE = """
UPDATE tn_leases SET expires_at = now() - interval '1 millisecond'
WHERE rid = %s AND owner = %s AND incarnation = %s AND epoch = %s AND expires_at > now()
"""
_ORPHANS = """
SELECT r.rid FROM tn_runtimes r LEFT JOIN tn_leases l ON l.rid = r.rid
WHERE l.rid IS NULL OR l.expires_at <= now() ORDER BY r.rid LIMIT %s
"""
# a node id is this process's when its row is free, silent for a lease, or already this process's
_JOIN = """
INSERT INTO tn_nodes AS n (node, address, incarnation, process, started_at, seen_at)
VALUES (%(node)s, %(address)s, %(inc)s, %(process)s, now(), now())
ON CONFLICT (node) DO UPDATE SET address = EXCLUDED.address, incarnation = EXCLUDED.incarnation,
    process = EXCLUDED.process, started_at = now(), seen_at = now()
WHERE n.incarnation = EXCLUDED.incarnation OR n.seen_at <= now() - %(ms)s * interval '1 millisecond'
RETURNING node
"""
_NODE = """
SELECT address, incarnation, seen_at::text, extract(epoch FROM now() - seen_at) * 1000, process
FROM tn_nodes WHERE node = %s
"""
# the node row of a process known to be gone (``process_id.gone_here``): silent for good, free now
_FREE_DEAD_NODE = """
UPDATE tn_nodes SET seen_at = to_timestamp(0) WHERE node = %s AND incarnation = %s
"""
_SEEN = """
INSERT INTO tn_nodes AS n (node, address, incarnation, process, started_at, seen_at)
VALUES (%s, %s, %s, %s, now(), now())
ON CONFLICT (node) DO UPDATE SET address = EXCLUDED.address, seen_at = now()
WHERE n.incarnation = EXCLUDED.incarnation
"""
_LEAVE = """
UPDATE tn_nodes SET seen_at = to_timestamp(0) WHERE node = %s AND incarnation = %s
"""
_LIVE = """
SELECT n.node, n.address, coalesce(array_agg(l.rid ORDER BY l.rid) FILTER (WHERE l.rid IS NOT NULL), '{}')
FROM tn_nodes n
LEFT JOIN tn_leases l ON l.owner = n.node AND l.incarnation = n.incarnation AND l.expires_at > now()
WHERE n.seen_at > now() - %s * interval '1 millisecond'
GROUP BY n.node, n.address ORDER BY n.node
"""
# what a lease statement may take on the server before it is cancelled there (the client gives up
# sooner, ``cluster.membership``); a hung database must never hold a renewal past the lease
LEASE_STATEMENT_SHARE = 0.5


@dataclass(frozen=True)
class Lease:
    """This node owns ``runtime_id`` at ``epoch`` for about ``remaining_ms`` more."""

    runtime_id: str
    owner: str
    epoch: int
    remaining_ms: float
    incarnation: str = ""

    @property
    def fence(self) -> Fence:
        return Fence(self.runtime_id, self.owner, self.epoch, self.incarnation)


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
    """The lease operations of one process (``incarnation``) of node ``node``, reachable at
    ``address`` ("" when it cannot be forwarded to), on one database."""

    def __init__(self, link: Link, node: str, address: str, lease_ms: int, incarnation: str = "") -> None:
        if lease_ms < 100:
            raise ValueError(f"lease_ms {lease_ms}: at least 100")
        codec.runtime_key(node)  # the same id rules as any stored key
        self.link, self.node, self.address, self.lease_ms = link, node, address, lease_ms
        self.incarnation = incarnation or secrets.token_hex(8)
        self.process = process_id.this_process()
        # a hung database: the server cancels a lease statement, the kernel drops a connection whose
        # bytes go unacknowledged, both well within a lease
        timeout_ms = max(50, int(lease_ms * LEASE_STATEMENT_SHARE))
        self._conn = OneConnection(link, {"options": f"-c statement_timeout={timeout_ms}",
                                          "tcp_user_timeout": timeout_ms,
                                          "connect_timeout": max(2, lease_ms // 2000)})

    def _run(self, sql: str, *params: object) -> list[tuple[object, ...]]:
        def work(conn: Conn) -> list[tuple[object, ...]]:
            cur = conn.execute(sql.encode(), params)
            return cur.fetchall() if cur.description else []
        return self._conn.run(work)

    def join(self, wait: bool = True) -> None:
        """Claim this node id for this process. A row of a process of this host that is gone is taken
        at once; one of another process that renewed within a lease is waited out once (a killed
        predecessor under the same id stops renewing); if it renews meanwhile, ``NodeTaken`` names
        where that process is."""
        for attempt in (0, 1):
            if self._join_once():
                return
            found = self._run(_NODE, self.node)
            if not found:
                continue  # left between the two statements
            address, holder, seen_at, age_ms, process = found[0]
            if attempt == 0 and process_id.gone_here(str(process or "")):  # killed on this host
                self._run(_FREE_DEAD_NODE, self.node, holder)
                continue
            if attempt == 0 and wait:
                time.sleep(max(0.0, (self.lease_ms - float(str(age_ms))) / 1000) + 0.05)
                again = self._run(_NODE, self.node)
                if again and again[0][2] == seen_at:  # silent for a whole lease: a dead process's row
                    continue
            where = f"at {address}" if address else "(not reachable by other daemons: no --advertise)"
            raise NodeTaken(f'node id "{self.node}" is in use by another live toolnexus-daemon {where} on '
                            f"the {self.link.name}; give this daemon an id of its own with --node-id "
                            "(env TOOLNEXUS_NODE_ID), or leave it unset for a unique default")
        raise NodeTaken(f'node id "{self.node}" could not be claimed; retry')

    def _join_once(self) -> bool:
        args = {"node": self.node, "address": self.address, "inc": self.incarnation, "ms": self.lease_ms,
                "process": self.process}
        return bool(self._conn.run(lambda conn: conn.execute(_JOIN.encode(), args).fetchall()))

    def leave(self) -> None:
        """This process stops (gracefully): its node id is free for the next start at once."""
        self._run(_LEAVE, self.node, self.incarnation)

    def acquire(self, runtime_id: str, new: bool = False) -> Lease | Held:
        """Own ``runtime_id`` (a renewal when this process owns it already, unless ``new``: a new
        tenure, at a new epoch, whatever this process held before), or learn who does."""
        args = {"rid": runtime_id, "node": self.node, "inc": self.incarnation, "address": self.address,
                "ms": self.lease_ms, "new": new}
        rows = self._conn.run(lambda conn: conn.execute(_ACQUIRE.encode(), args).fetchall())
        if rows:
            epoch, remaining = int(str(rows[0][0])), float(str(rows[0][1]))
            return Lease(runtime_id, self.node, epoch, remaining, self.incarnation)
        held = self._run(_HOLDER, runtime_id)
        if not held:  # released and deleted between the two statements: try once more
            return self.acquire(runtime_id, new)
        owner, address, left, incarnation, process = held[0]
        if process_id.gone_here(str(process or "")):
            taken = self._take_from_dead(runtime_id, str(owner), str(incarnation))
            if taken is not None:
                return taken
        return Held(runtime_id, str(owner), str(address), float(str(left)))

    def _take_from_dead(self, runtime_id: str, owner: str, dead: str) -> Lease | None:
        args = {"rid": runtime_id, "node": self.node, "inc": self.incarnation, "address": self.address,
                "ms": self.lease_ms, "owner": owner, "dead": dead}
        rows = self._conn.run(lambda conn: conn.execute(_TAKE_FROM_DEAD.encode(), args).fetchall())
        if not rows:
            return None
        return Lease(runtime_id, self.node, int(str(rows[0][0])), float(str(rows[0][1])), self.incarnation)

    def dead_holders(self, limit: int = 100) -> list[str]:
        """Runtimes whose unexpired lease belongs to a process of this host that is gone (a daemon
        killed here): the sweeper takes them at once instead of waiting for the lease to run out."""
        scope = process_id.scope_of(self.process)
        if not scope:
            return []
        like = scope.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "|%"
        rows = self._run(_LOCAL_HOLDERS, like, self.incarnation, limit)
        return [str(rid) for rid, process in rows if process_id.gone_here(str(process))]

    def renew(self, held: Mapping[str, int]) -> set[str]:
        """Extend every lease of ``held`` (runtime id → epoch) and mark this node seen; returns the
        runtimes whose lease is lost (another process took them): drop them, write nothing more."""
        self._run(_SEEN, self.node, self.address, self.incarnation, self.process)
        if not held:
            return set()
        ids = list(held)
        kept = self._run(_RENEW, self.lease_ms, ids, [held[r] for r in ids], self.node, self.incarnation)
        return set(ids) - {str(r[0]) for r in kept}

    def release(self, lease: Lease) -> bool:
        """Expire ``lease`` now so another node may take the runtime at once; False if already lost."""
        def work(conn: Conn) -> int:
            return conn.execute(_RELEASE.encode(), (lease.runtime_id, self.node, self.incarnation,
                                                    lease.epoch)).rowcount
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
