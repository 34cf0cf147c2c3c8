"""The pending inbox on PostgreSQL: ``Store.pending`` as one indexed query.

``tn_handles`` carries ``open_kind`` and ``since`` (kept with every handle
write since schema 1); schema 3 adds partial indexes on them that start with
exactly what a query pins (``rid``, ``open_kind``) and continue in page order
(``since, rid, hid``), so a page is an index range scan from the cursor on,
the same cost at any number of parked handles. The row comparison
``(since, rid, hid) > (…)`` is what the index orders by, so PostgreSQL seeks
to the cursor instead of filtering up to it.
"""

from __future__ import annotations

from typing import cast

from ..base import PendingQuery, PendingRow


def pending_sql(query: PendingQuery) -> tuple[str, list[object]]:
    """The statement and parameters of one page."""
    where: list[str] = ["open_kind IS NOT NULL"]
    params: list[object] = []
    if query.runtime_id is not None:
        where.append("rid = %s")
        params.append(query.runtime_id)
    if query.kind is not None:
        where.append("open_kind = %s")
        params.append(query.kind)
    if query.oldest is not None:
        where.append("since >= %s")
        params.append(query.oldest)
    if query.newest is not None:
        where.append("since <= %s")
        params.append(query.newest)
    if query.after is not None:
        a = query.after
        where.append("(since, rid, hid) > (%s, %s, %s)")
        params.extend([a.since, a.runtime_id, a.handle_id])
    params.append(max(query.limit, 0))
    return (f"SELECT since, rid, hid FROM tn_handles WHERE {' AND '.join(where)} "
            "ORDER BY since, rid, hid LIMIT %s"), params


def rows_of(found: list[tuple[object, ...]]) -> list[PendingRow]:
    return [PendingRow(float(cast(float, s)), str(r), str(h)) for s, r, h in found]
