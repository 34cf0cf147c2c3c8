"""What changed between two input schemas of one tool, in words a person can act on
(docs/protocol.md §11 Definition drift).

An answer given hours after a tool suspended is fed to the tool the app registers *now*. Whether
that is still the same tool is a question about its input schema, so this module compares two
schemas at the level a person reasons about arguments: which properties appeared or went, which
changed type or became (no longer) required. Anything deeper (a nested object's own properties,
an enum, a description) is not spelled out: the property is named with ``(schema changed)``, and
other top-level keywords that differ are named as such. Any difference at all counts — a changed
description ("amount in cents" → "in dollars") can matter as much as a changed type.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...model import JSON

# keywords the diff reads itself; every other top-level keyword is compared as a whole
_READ = ("properties", "required")


@dataclass(frozen=True)
class SchemaDiff:
    """Each list sorted by property name; ``retyped`` entries read ``name (before → after)``."""

    added: tuple[str, ...] = ()  # new properties, ``name (required)`` when the new schema requires it
    removed: tuple[str, ...] = ()
    retyped: tuple[str, ...] = ()  # type or requiredness changed, or ``name (schema changed)``
    other: tuple[str, ...] = ()  # other top-level keywords whose value changed

    def __bool__(self) -> bool:
        return bool(self.added or self.removed or self.retyped or self.other)

    def describe(self, limit: int = 20) -> str:
        """``added memo (required); removed currency; retyped amount (number → string)``."""
        parts = [f"{verb} {', '.join(capped(items, limit))}"
                 for verb, items in (("added", self.added), ("removed", self.removed),
                                     ("retyped", self.retyped), ("changed keyword", self.other)) if items]
        return "; ".join(parts)


def diff(before: JSON | None, after: JSON | None) -> SchemaDiff:
    """The differences from ``before`` to ``after`` (empty when they are equal)."""
    old, new = _normal(before), _normal(after)
    if old == new:
        return SchemaDiff()
    old_props, new_props = _properties(old), _properties(new)
    old_req, new_req = _required(old), _required(new)
    added = tuple(f"{n} (required)" if n in new_req else n for n in sorted(set(new_props) - set(old_props)))
    removed = tuple(sorted(set(old_props) - set(new_props)))
    gone_or_new = set(old_props) ^ set(new_props)
    retyped: list[str] = []
    for name in sorted(set(old_props) & set(new_props)):
        was, now = type_of(old_props[name]), type_of(new_props[name])
        if was != now:
            retyped.append(f"{name} ({was} → {now})")
        elif old_props[name] != new_props[name]:
            retyped.append(f"{name} (schema changed)")
    for name in sorted((old_req ^ new_req) - gone_or_new):
        was, now = ("required", "optional") if name in old_req else ("optional", "required")
        retyped.append(f"{name} ({was} → {now})")
    keys = (set(old) | set(new)) - set(_READ)
    other = [k for k in sorted(keys) if old.get(k) != new.get(k)]
    odd = not isinstance(old.get("properties", {}), dict) or not isinstance(new.get("properties", {}), dict)
    if odd and old.get("properties") != new.get("properties"):
        other.append("properties")  # not an object of properties: compared as a whole
    return SchemaDiff(added, removed, tuple(sorted(retyped)), tuple(other))


def type_of(schema: Any) -> str:
    """A property's JSON type as people write it: ``number``, ``string|null``, or ``any``."""
    if not isinstance(schema, dict):
        return "any"
    kind = schema.get("type")
    if isinstance(kind, str) and kind:
        return kind
    if isinstance(kind, list) and kind:
        return "|".join(str(k) for k in kind)
    return "any"


def capped(items: tuple[str, ...] | list[str], limit: int = 20, width: int = 80) -> list[str]:
    """At most ``limit`` entries, each at most ``width`` characters, and how many were left out:
    a schema of thousands of properties still gives an answer that fits in a message."""
    shown = [i if len(i) <= width else i[: width - 1] + "…" for i in list(items)[:limit]]
    if len(items) > limit:
        shown.append(f"… and {len(items) - limit} more")
    return shown


def _normal(value: JSON | None) -> JSON:
    """The schema with ``required`` as a sorted set: its order and repeats mean nothing."""
    schema = dict(value) if isinstance(value, dict) else {}
    required = sorted(_required(schema))
    schema.pop("required", None)
    if required:
        schema["required"] = required
    return schema


def _properties(schema: JSON) -> dict[str, Any]:
    props = schema.get("properties")
    return props if isinstance(props, dict) else {}


def _required(schema: JSON) -> set[str]:
    req = schema.get("required")
    return {r for r in req if isinstance(r, str)} if isinstance(req, list) else set()
