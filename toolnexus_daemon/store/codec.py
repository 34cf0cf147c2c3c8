"""What the store's bytes mean: table names, key layout and the value envelope.

Keys are built so LMDB's byte order is the order the store scans. Ids are UTF-8
of 1-250 bytes without NUL, because NUL separates the parts; indexes and seqs
are 8-byte big-endian so byte order is numeric order. The longest key is
250 + 1 + 250 + 1 + 8 = 510 bytes, inside LMDB's 511-byte limit.

  runtimes                        rid
  handles, checkpoints, requests  rid NUL id
  handle_index                    rid NUL tag ... (see ``handle_index``)
  messages                        rid NUL hid NUL index:u64be
  events                          rid NUL seq:u64be
  expiries                        rid NUL tag ... (see ``expiry_index``)
  versions                        rid NUL version key (zero-padded number: key order is number order)

Every value is an envelope: the magic ``b"TN"``, one byte of format version,
then the record as compact UTF-8 JSON. A record whose version byte is newer
than ``FORMAT_VERSION`` raises
``FormatTooNew``; anything else that does not decode raises ``StoreError``
naming the table and key, so one bad record never hides the rest of a table.
The ``meta`` table holds the store-wide format version as ASCII digits.

Versions: 1, the first layout; 2 adds ``handle_index`` (see ``handle_index``),
which a store of version 1 gets built when it is first opened by a daemon
that writes version 2; 3 adds the pending index rows (see ``pending_index``), built
the same way from a store of version 2. Record encodings did not change between them; the
envelope carries the store's version so that an older daemon refuses
records it would not keep the index of.
"""

from __future__ import annotations

import functools
import json
import struct
from enum import StrEnum

import orjson

from ..errors import FormatTooNew, StoreError
from ..model import JSON, Event

FORMAT_VERSION = 3
MAGIC = b"TN"
SEP = b"\x00"
MAX_ID_BYTES = 250
META_FORMAT_KEY = b"format"
_U64 = struct.Struct(">Q")
_HEADER = MAGIC + bytes([FORMAT_VERSION])


class Table(StrEnum):
    RUNTIMES = "runtimes"
    HANDLES = "handles"
    HANDLE_INDEX = "handle_index"
    MESSAGES = "messages"
    CHECKPOINTS = "checkpoints"
    REQUESTS = "requests"
    EVENTS = "events"
    EXPIRIES = "expiries"  # open suspensions by deadline (see ``expiry_index``)
    VERSIONS = "versions"  # registry versions of a runtime (``engine.versions``)


# ----------------------------------------------------------------------- keys

@functools.lru_cache(maxsize=8192)
def id_bytes(kind: str, value: str) -> bytes:
    """``value`` as a key part; raises ``StoreError`` for ids the key layout cannot hold.

    Remembered for the ids in use (a cycle builds dozens of keys from the same few ids); a refused
    id raises each time, as nothing is remembered of a call that raised."""
    try:
        raw = value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise StoreError(f"invalid {kind} {value[:80]!r}: not encodable as UTF-8") from exc
    if not raw or len(raw) > MAX_ID_BYTES or SEP in raw:
        raise StoreError(f"invalid {kind} {value[:80]!r}: must be 1-{MAX_ID_BYTES} bytes of UTF-8 "
                         "without NUL")
    return raw


def u64(kind: str, n: int) -> bytes:
    if not 0 <= n < 1 << 64:
        raise StoreError(f"invalid {kind} {n}: must be between 0 and 2**64-1")
    return _U64.pack(n)


def runtime_key(runtime_id: str) -> bytes:
    return id_bytes("runtime id", runtime_id)


@functools.lru_cache(maxsize=1024)
def runtime_prefix(runtime_id: str) -> bytes:
    """The prefix of every key of ``runtime_id`` in every table but ``runtimes``."""
    return runtime_key(runtime_id) + SEP


@functools.lru_cache(maxsize=8192)
def pair_key(runtime_id: str, sub_id: str) -> bytes:
    return runtime_prefix(runtime_id) + id_bytes("id", sub_id)


def message_prefix(runtime_id: str, handle_id: str) -> bytes:
    return pair_key(runtime_id, handle_id) + SEP


def message_key(runtime_id: str, handle_id: str, index: int) -> bytes:
    return message_prefix(runtime_id, handle_id) + u64("message index", index)


def event_key(runtime_id: str, seq: int) -> bytes:
    if seq < 1:
        raise StoreError(f"invalid event seq {seq} for runtime {runtime_id!r}: stored events start at 1")
    return runtime_prefix(runtime_id) + u64("event seq", seq)


def trailing_u64(key: bytes) -> int:
    """The index or seq at the end of a messages/events key."""
    return int(_U64.unpack(key[-8:])[0])


def describe_key(table: str, key: bytes) -> str:
    """A key as an operator reads it: ``rt-1/root/3``."""
    if table in (Table.MESSAGES, Table.EVENTS) and len(key) >= 9:
        return f"{_readable(key[:-9])}/{trailing_u64(key)}"
    return _readable(key)


def _readable(part: bytes) -> str:
    return part.decode("utf-8", errors="backslashreplace").replace("\x00", "/")


# ---------------------------------------------------------------------- values

def dump_json(where: str, value: object) -> bytes:
    """Compact UTF-8 JSON of a record; ``where`` (``table/key``) names it in errors.

    ``orjson`` writes every record of every commit at a tenth of ``json``'s cost; the few values
    it refuses (integers beyond 64 bits, say, from a tool's arguments) are written by ``json``,
    byte-compatible. Records are read back by ``json`` alone, which keeps such integers exact.
    """
    try:
        return _orjson(value)
    except TypeError:
        pass
    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    except (TypeError, ValueError) as exc:
        raise StoreError(f"cannot encode record {where}: {exc}") from exc


def _orjson(value: object) -> bytes:
    """``orjson``'s bytes of ``value`` with ``OPT_NON_STR_KEYS``, asked for only when a key is not
    a ``str``: the option costs a fifth more on every record, and without it ``orjson`` writes the
    same bytes or refuses (``TypeError``) the keys it needs it for."""
    try:
        return orjson.dumps(value)
    except TypeError:
        return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS)


def load_json(where: str, raw: bytes) -> JSON:
    try:
        value = json.loads(raw)
    except (UnicodeDecodeError, ValueError) as exc:
        raise StoreError(f"damaged record {where}: {exc}") from exc
    if not isinstance(value, dict):
        raise StoreError(f"damaged record {where}: expected a JSON object, got {type(value).__name__}")
    return value


def encode_value(table: str, key: bytes, value: object) -> bytes:
    # the record's name (``table/key``) is only for an error: built when ``orjson`` refuses the value,
    # not for each of the dozens of records a cycle writes; the bytes are ``dump_json``'s either way
    try:
        return _HEADER + _orjson(value)
    except TypeError:
        return _HEADER + dump_json(f"{table}/{describe_key(table, key)}", value)


def peek_value(table: str, key: bytes, raw: bytes) -> JSON:
    """A record read for a few plain fields only (strings, booleans, a list's length, a float),
    parsed with ``orjson`` at a fraction of ``json``'s cost: the handle index reads the record
    every handle write replaces, on the writer thread that shares the GIL with the event loop.
    Anything ``orjson`` refuses (a NaN literal, damage) goes through the exact reader."""
    if len(raw) > 3 and raw[:2] == MAGIC and 0 < raw[2] <= FORMAT_VERSION:
        try:
            value = orjson.loads(raw[3:])
        except orjson.JSONDecodeError:
            value = None
        if isinstance(value, dict):
            return value
    return decode_value(table, key, raw)


def decode_value(table: str, key: bytes, raw: bytes) -> JSON:
    where = f"{table}/{describe_key(table, key)}"
    if len(raw) < 3 or raw[:2] != MAGIC or raw[2] == 0:
        raise StoreError(f"damaged record {where}: missing or invalid envelope header")
    if raw[2] > FORMAT_VERSION:
        raise FormatTooNew(f"record {where} has format version {raw[2]}, but this toolnexus-daemon "
                           f"reads up to {FORMAT_VERSION}; upgrade the daemon")
    return load_json(where, raw[3:])


def encode_event(event: Event) -> tuple[bytes, bytes]:
    key = event_key(event.runtime_id, event.seq)
    return key, encode_value(Table.EVENTS, key, event.to_json())


def decode_event(key: bytes, raw: bytes) -> Event:
    return event_from_json(f"{Table.EVENTS}/{describe_key(Table.EVENTS, key)}",
                           decode_value(Table.EVENTS, key, raw))


def event_from_json(where: str, record: JSON) -> Event:
    try:
        return Event.from_json(record)
    except (KeyError, TypeError, ValueError) as exc:
        raise StoreError(f"damaged record {where}: not an event: {exc!r}") from exc
