"""The record encoder's fast paths write the bytes (and raise the errors) of the encoder they replaced.

``encode_value`` names a record (``table/key``) only when ``orjson`` refuses it, and asks
``orjson`` for ``OPT_NON_STR_KEYS`` only when a key needs it; both are held equal here to the
encoder as it was (copied below) on values with every kind of key and leaf the engine, a tool or
a hand-written record can put in a record: integer, float, enum and ``str``-subclass keys,
integers past 64 bits, NaN and Infinity, tuples, and values neither encoder can write.
"""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolnexus_daemon.errors import StoreError
from toolnexus_daemon.store import codec
from toolnexus_daemon.store.codec import Table


def _reference_dump_json(where: str, value: object) -> bytes:
    """``codec.dump_json`` as it was before the fast path (copied as it was)."""
    try:
        return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS)
    except TypeError:
        pass
    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    except (TypeError, ValueError) as exc:
        raise StoreError(f"cannot encode record {where}: {exc}") from exc


def _reference_encode_value(table: str, key: bytes, value: object) -> bytes:
    return codec.MAGIC + bytes([codec.FORMAT_VERSION]) + _reference_dump_json(
        f"{table}/{codec.describe_key(table, key)}", value)


class Kind(StrEnum):
    A = "a"
    B = "b"


class Name(str):
    """A ``str`` subclass (orjson wants ``OPT_NON_STR_KEYS`` for it as a key)."""


_keys = st.one_of(st.text(max_size=4), st.integers(-3, 2**70), st.sampled_from(list(Kind)),
                  st.text(max_size=3).map(Name), st.booleans(), st.none(), st.floats(allow_nan=False))
_leaves = st.one_of(st.none(), st.booleans(), st.text(max_size=5), st.integers(-(2**70), 2**70),
                    st.floats(allow_nan=True, allow_infinity=True), st.sampled_from(list(Kind)),
                    st.just(object()), st.binary(max_size=3))
_values = st.recursive(_leaves, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.lists(inner, max_size=3).map(tuple),
    st.dictionaries(_keys, inner, max_size=3)), max_leaves=12)


def _outcome(fn: Any, *args: object) -> tuple[str, object]:
    try:
        return "bytes", fn(*args)
    except StoreError as exc:
        return "error", str(exc)


@settings(max_examples=400, deadline=None)
@given(record=st.dictionaries(_keys, _values, max_size=4))
def test_records_encode_as_the_encoder_they_replaced(record: dict[Any, Any]) -> None:
    key = codec.event_key("rt-1", 7)
    assert _outcome(codec.encode_value, Table.EVENTS, key, record) == _outcome(
        _reference_encode_value, Table.EVENTS, key, record)
    assert _outcome(codec.dump_json, "runtimes/rt-1", record) == _outcome(
        _reference_dump_json, "runtimes/rt-1", record)


@pytest.mark.parametrize("record", [{1: "x"}, {Kind.A: 1}, {Name("n"): [1]}, {"big": 2**70},
                                    {"nan": float("nan")}, {1: float("nan")}, {"t": (1, 2)}, {"o": object()},
                                    {(1, 2): 3}])
def test_each_kind_of_refusal_takes_the_same_way(record: dict[Any, Any]) -> None:
    key = codec.pair_key("rt-1", "root/a")
    assert _outcome(codec.encode_value, Table.HANDLES, key, record) == _outcome(
        _reference_encode_value, Table.HANDLES, key, record)
