"""The PostgreSQL schema of the store, versioned, with forward migrations applied at start.

Plain SQL on purpose (tables, primary keys, partial indexes), so that wire-compatible
engines can follow. Every key column is ``text COLLATE "C"``, which orders by byte,
i.e. like LMDB's keys and Python's ``sorted``; every value column holds the same
envelope bytes LMDB stores (``codec.encode_value``), so a damaged row reads as the
same ``StoreError`` naming its table and key. Handles carry what the handle index
needs as columns (``recover``, ``state``, ``open_kind``, ``since``, from
``summary.contribution``, and ``expires``, from ``expiry.expiry_of``), kept in the same
statement as the record.

``tn_meta.schema`` holds the version. ``migrate`` takes a transaction-level advisory
lock, so daemons starting together migrate once; a database whose version is newer
than ``SCHEMA_VERSION`` is refused with a message naming both.
"""

from __future__ import annotations

import psycopg

from ...errors import FormatTooNew

SCHEMA_VERSION = 6
# the SQLSTATE tn_fence raises when a commit's lease no longer holds (a class of our own)
FENCE_SQLSTATE = "TN001"
_LOCK_KEY = 0x746E7363  # "tnsc": the advisory lock that serialises migrations
K = 'text COLLATE "C" NOT NULL'

# MIGRATIONS[n] takes a database from version n to n + 1
MIGRATIONS: list[list[str]] = [
    [
        "CREATE TABLE IF NOT EXISTS tn_meta (key text PRIMARY KEY, value text NOT NULL)",
        f"CREATE TABLE tn_runtimes (rid {K} PRIMARY KEY, value bytea NOT NULL)",
        f"""CREATE TABLE tn_handles (rid {K}, hid {K}, value bytea NOT NULL,
            recover boolean NOT NULL, state text, open_kind text, since double precision NOT NULL DEFAULT 0,
            PRIMARY KEY (rid, hid))""",
        "CREATE INDEX tn_handles_recover ON tn_handles (rid, hid) WHERE recover",
        "CREATE INDEX tn_handles_open ON tn_handles (rid, open_kind, since) WHERE open_kind IS NOT NULL",
        f"CREATE TABLE tn_messages (rid {K}, hid {K}, idx bigint NOT NULL, value bytea NOT NULL, "
        "PRIMARY KEY (rid, hid, idx))",
        f"CREATE TABLE tn_checkpoints (rid {K}, hid {K}, value bytea NOT NULL, PRIMARY KEY (rid, hid))",
        f"CREATE TABLE tn_requests (rid {K}, qid {K}, value bytea NOT NULL, PRIMARY KEY (rid, qid))",
        f"CREATE TABLE tn_events (rid {K}, seq bigint NOT NULL, value bytea NOT NULL, "
        "PRIMARY KEY (rid, seq))",
    ],
    [  # 2: the cluster's runtime leases and live nodes (lease), and the commit fence
        f"""CREATE TABLE tn_leases (rid {K} PRIMARY KEY, owner {K}, address text NOT NULL,
            epoch bigint NOT NULL, expires_at timestamptz NOT NULL)""",
        "CREATE INDEX tn_leases_owner ON tn_leases (owner)",
        f"""CREATE TABLE tn_nodes (node {K} PRIMARY KEY, address text NOT NULL,
            started_at timestamptz NOT NULL, seen_at timestamptz NOT NULL)""",
        f"""CREATE FUNCTION tn_fence(p_rid text, p_owner text, p_epoch bigint) RETURNS void
            LANGUAGE plpgsql AS $$
            BEGIN
              PERFORM 1 FROM tn_leases WHERE rid = p_rid AND owner = p_owner AND epoch = p_epoch FOR SHARE;
              IF NOT FOUND THEN
                RAISE EXCEPTION 'the lease of runtime % at epoch % is no longer held by %',
                  p_rid, p_epoch, p_owner USING ERRCODE = '{FENCE_SQLSTATE}';
              END IF;
            END $$""",
    ],
    # 3: the pending inbox (pending): open suspensions oldest first, across runtimes or in one,
    # of every kind or one; (since, rid, hid) is also the page cursor. The columns exist since 1.
    [
        "CREATE INDEX tn_handles_pending ON tn_handles (since, rid, hid) WHERE open_kind IS NOT NULL",
        "CREATE INDEX tn_handles_pending_kind ON tn_handles (open_kind, since, rid, hid) "
        "WHERE open_kind IS NOT NULL",
        "CREATE INDEX tn_handles_pending_rt ON tn_handles (rid, since, hid) WHERE open_kind IS NOT NULL",
        "CREATE INDEX tn_handles_pending_rt_kind ON tn_handles (rid, open_kind, since, hid) "
        "WHERE open_kind IS NOT NULL",
    ],
    [  # 4: when each open suspension expires (``expiry.expiry_of``), soonest first per runtime
        "ALTER TABLE tn_handles ADD COLUMN expires double precision",
        "CREATE INDEX tn_handles_expires ON tn_handles (rid, expires, hid) WHERE expires IS NOT NULL",
        # the open suspensions stored before: their expires_at read from the record's JSON (after the
        # 3-byte envelope header); a value that is not a timestamp never expires, as in the daemon
        r"""DO $$
            DECLARE r record;
            BEGIN
              FOR r IN SELECT rid, hid, value FROM tn_handles WHERE open_kind IS NOT NULL LOOP
                BEGIN
                  UPDATE tn_handles SET expires = extract(epoch FROM (convert_from(substring(r.value FROM 4),
                      'UTF8')::jsonb #>> '{pending,expires_at}')::timestamptz)
                  WHERE rid = r.rid AND hid = r.hid
                    AND NOT coalesce((convert_from(substring(r.value FROM 4), 'UTF8')::jsonb ->> 'escalating')
                                     ::boolean, false);
                EXCEPTION WHEN others THEN NULL;
                END;
              END LOOP;
            END $$""",
    ],
    [  # 5: a lease and a node row belong to one process of a node (its incarnation, new at every
        # start), and the fence checks it: a second process under the same node id owns nothing
        "ALTER TABLE tn_leases ADD COLUMN IF NOT EXISTS incarnation text NOT NULL DEFAULT ''",
        "ALTER TABLE tn_nodes ADD COLUMN IF NOT EXISTS incarnation text NOT NULL DEFAULT ''",
        # which OS process the incarnation is (``process_id``): a dead one on the same host is told
        "ALTER TABLE tn_nodes ADD COLUMN IF NOT EXISTS process text NOT NULL DEFAULT ''",
        f"""CREATE OR REPLACE FUNCTION tn_fence(p_rid text, p_owner text, p_incarnation text, p_epoch bigint)
            RETURNS void LANGUAGE plpgsql AS $$
            BEGIN
              PERFORM 1 FROM tn_leases WHERE rid = p_rid AND owner = p_owner AND incarnation = p_incarnation
                AND epoch = p_epoch FOR SHARE;
              IF NOT FOUND THEN
                RAISE EXCEPTION 'the lease of runtime % at epoch % is no longer held by % (process %)',
                  p_rid, p_epoch, p_owner, p_incarnation USING ERRCODE = '{FENCE_SQLSTATE}';
              END IF;
            END $$""",
    ],
    [  # 6: a runtime's registry versions (``engine.versions``), one row per distinct registry
        f"CREATE TABLE IF NOT EXISTS tn_versions (rid {K}, vid {K}, value bytea NOT NULL, "
        "PRIMARY KEY (rid, vid))",
    ],
]
assert len(MIGRATIONS) == SCHEMA_VERSION

# every table keyed by runtime, for purge
RUNTIME_TABLES = ("tn_runtimes", "tn_handles", "tn_messages", "tn_checkpoints", "tn_requests", "tn_events",
                  "tn_versions")


def stored_version(conn: psycopg.Connection[tuple[object, ...]]) -> int:
    """The schema version of the database, 0 when it has no store yet."""
    row = conn.execute("SELECT to_regclass('tn_meta') IS NOT NULL").fetchone()
    if not row or not row[0]:
        return 0
    found = conn.execute("SELECT value FROM tn_meta WHERE key = 'schema'").fetchone()
    return int(str(found[0])) if found else 0


def migrate(conn: psycopg.Connection[tuple[object, ...]], where: str) -> tuple[int, int]:
    """Bring the database to ``SCHEMA_VERSION`` in one transaction; returns (from, to).

    Raises ``FormatTooNew`` (nothing changed) when the database is newer than this daemon."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_KEY,))
        version = stored_version(conn)
        if version > SCHEMA_VERSION:
            raise FormatTooNew(f"the {where} has store schema version {version}, but this toolnexus-daemon "
                               f"knows up to version {SCHEMA_VERSION}; upgrade the daemon")
        for step in range(version, SCHEMA_VERSION):
            for statement in MIGRATIONS[step]:
                conn.execute(statement.encode())
        if version != SCHEMA_VERSION:
            conn.execute("INSERT INTO tn_meta (key, value) VALUES ('schema', %s) "
                         "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value", (str(SCHEMA_VERSION),))
    return version, SCHEMA_VERSION
