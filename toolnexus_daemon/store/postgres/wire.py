"""A commit's statements as the commit lanes send them through libpq: each prepared once per
connection, its parameters encoded here.

``write.prepare`` gives a batch as ``Step``s (an SQL text with ``%s``/``%b`` placeholders and
its parameter rows). Sending them through a psycopg cursor cost the daemon, per statement,
the cursor's adaptation of every value and a turn of the event loop (psycopg communicates
after every query of a pipeline); a commit lane instead sends the whole transaction with
libpq's own pipeline calls (``lanes``), so here each SQL text becomes a named prepared
statement (``$n`` placeholders) and each row its wire parameters:

* the array form (``%b::type[]``, ``write.UPSERT`` and ``write.FENCE``): each parameter a
  one-dimensional array in PostgreSQL's binary format, built from the column's values;
* any other statement (the deletes, a statement per row): each parameter as text (an
  ``int`` in decimal), the server parsing it as the column's type.
"""

from __future__ import annotations

import hashlib
import re
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache

from ...errors import StoreError

# element type of an array parameter: its OID and how one value becomes its binary form
_ELEMENTS: dict[str, tuple[int, Callable[[object], bytes]]] = {
    "text": (25, lambda v: str(v).encode()),
    "bytea": (17, lambda v: bytes(v)),  # type: ignore[call-overload]
    "bigint": (20, lambda v: struct.pack(">q", v)),
    "boolean": (16, lambda v: b"\x01" if v else b"\x00"),
    "float8": (701, lambda v: struct.pack(">d", v)),
}
_PLACEHOLDER = re.compile(r"%([sb])(?:::(\w+)\[\])?")
_NULL = struct.pack(">i", -1)
BINARY, TEXT = 1, 0


@dataclass(frozen=True)
class Statement:
    """One SQL text as a prepared statement: its ``name``, its ``query`` with ``$n`` placeholders
    and, for the array form, each parameter's element type."""

    name: bytes
    query: bytes
    arrays: tuple[str, ...] | None

    def params(self, row: Sequence[object]) -> tuple[list[bytes | None], list[int]]:
        """``row``'s wire parameters and their formats."""
        if self.arrays is None:
            return [None if v is None else _text(v) for v in row], [TEXT] * len(row)
        if len(row) != len(self.arrays):
            raise StoreError(f"statement {self.name.decode()} takes {len(self.arrays)} arrays, "
                             f"got {len(row)}")
        return [_array(kind, values) for kind, values in zip(self.arrays, row, strict=True)], \
            [BINARY] * len(row)


@lru_cache(maxsize=256)
def statement(sql: str) -> Statement:
    """``sql`` (``%s``, or ``%b::type[]`` for the array form) as a prepared statement; the name
    depends on the text only, so every connection names a statement alike."""
    kinds: list[tuple[str, str | None]] = []

    def number(match: re.Match[str]) -> str:
        kinds.append((match.group(1), match.group(2)))
        cast = f"::{match.group(2)}[]" if match.group(2) else ""
        return f"${len(kinds)}{cast}"

    query = _PLACEHOLDER.sub(number, sql)
    arrays = [str(element) for kind, element in kinds if kind == "b"]
    if arrays and (len(arrays) != len(kinds) or any(element not in _ELEMENTS for element in arrays)):
        raise ValueError(f"an array statement takes only %b::type[] parameters of {sorted(_ELEMENTS)}: {sql}")
    name = b"tnw_" + hashlib.blake2s(sql.encode(), digest_size=8).hexdigest().encode()
    return Statement(name, query.encode(), tuple(arrays) if arrays else None)


def _text(value: object) -> bytes:
    if isinstance(value, bool):
        return b"t" if value else b"f"
    return str(value).encode()


def _array(kind: str, values: object) -> bytes:
    """``values`` as a one-dimensional array of ``kind`` in PostgreSQL's binary format."""
    if not isinstance(values, (list, tuple)):
        raise StoreError(f"an array parameter must be a list, got {type(values).__name__}")
    oid, encode = _ELEMENTS[kind]
    if not values:
        return struct.pack(">iiI", 0, 0, oid)
    parts = [struct.pack(">iiIii", 1, any(v is None for v in values), oid, len(values), 1)]
    for value in values:
        if value is None:
            parts.append(_NULL)
        else:
            data = encode(value)
            parts += (struct.pack(">i", len(data)), data)
    return b"".join(parts)
