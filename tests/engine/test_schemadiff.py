"""The schema diff that names what changed in a suspended tool's input schema (docs/protocol.md §11)."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from toolnexus_daemon.engine.definitions.schemadiff import SchemaDiff, capped, diff, type_of

V1: dict[str, Any] = {"type": "object", "required": ["amount"],
                      "properties": {"amount": {"type": "number"}, "currency": {"type": "string"}}}


def test_added_removed_and_retyped_properties_are_named() -> None:
    v2 = {"type": "object", "properties": {"amount": {"type": "string"}, "memo": {"type": "string"}},
          "required": ["amount", "memo"]}
    found = diff(V1, v2)
    assert found == SchemaDiff(added=("memo (required)",), removed=("currency",),
                               retyped=("amount (number → string)",))
    assert found.describe() == "added memo (required); removed currency; retyped amount (number → string)"


def test_requiredness_changes_are_named_both_ways() -> None:
    v2 = {**V1, "required": ["currency"]}
    assert diff(V1, v2).retyped == ("amount (required → optional)", "currency (optional → required)")


def test_a_deeper_change_is_named_as_a_schema_change_of_the_property() -> None:
    def card(kind: str) -> dict[str, Any]:
        inner = {"type": "object", "properties": {"n": {"type": kind}}}
        return {"type": "object", "properties": {"card": inner}}

    assert diff(card("string"), card("integer")).retyped == ("card (schema changed)",)
    amount = {"type": "number", "description": "cents"}
    described = {**V1, "properties": {**V1["properties"], "amount": amount}}
    assert diff(V1, described).retyped == ("amount (schema changed)",)


def test_other_top_level_keywords_are_named() -> None:
    found = diff(V1, {**V1, "additionalProperties": False})
    assert found.other == ("additionalProperties",)
    assert found.describe() == "changed keyword additionalProperties"


def test_equal_schemas_and_a_reordered_required_list_are_no_change() -> None:
    assert not diff(V1, dict(V1))
    reordered = {**V1, "required": ["currency", "amount", "amount"]}
    assert not diff({**V1, "required": ["amount", "currency"]}, reordered)
    assert not diff(None, {}) and not diff({}, None)


def test_properties_that_are_not_an_object_are_compared_whole() -> None:
    assert diff({"properties": 1}, {"properties": 2}).other == ("properties",)


def test_type_names_as_people_write_them() -> None:
    written: tuple[Any, ...] = ({"type": "number"}, {"type": ["string", "null"]}, {}, True, {"type": 3})
    assert [type_of(s) for s in written] == ["number", "string|null", "any", "any", "any"]


def test_long_lists_and_names_are_capped_so_an_answer_stays_small() -> None:
    names = [f"p{i}" for i in range(30)] + ["x" * 500]
    shown = capped(names, limit=20, width=80)
    assert shown[:20] == names[:20] and shown[-1] == "… and 11 more" and len(shown) == 21
    assert len(capped(["y" * 500])[0]) == 80


# ------------------------------------------------------------------ properties of the diff

TYPES = st.sampled_from(["string", "number", "integer", "boolean", "object", "array"])
NAMES = st.text("abcdefgh", min_size=1, max_size=4)
PROPS = st.dictionaries(NAMES, TYPES.map(lambda t: {"type": t}), max_size=6)


@st.composite
def schemas(draw: Any) -> dict[str, Any]:
    props = draw(PROPS)
    required = draw(st.lists(st.sampled_from(sorted(props)), unique=True)) if props else []
    return {"type": "object", "properties": props, "required": required}


@given(schemas())
def test_a_schema_never_differs_from_itself(schema: dict[str, Any]) -> None:
    assert diff(schema, schema) == SchemaDiff()


@given(schemas(), schemas())
def test_any_difference_is_reported_and_names_exactly_the_changed_properties(a: dict[str, Any],
                                                                            b: dict[str, Any]) -> None:
    found = diff(a, b)
    same = a["properties"] == b["properties"] and set(a["required"]) == set(b["required"])
    assert bool(found) is not same
    added = {e.split(" ")[0] for e in found.added}
    assert added == set(b["properties"]) - set(a["properties"])
    assert set(found.removed) == set(a["properties"]) - set(b["properties"])
    retyped = {e.split(" ")[0] for e in found.retyped}
    kept = set(a["properties"]) & set(b["properties"])
    changed = {n for n in kept if a["properties"][n] != b["properties"][n]}
    changed |= (set(a["required"]) ^ set(b["required"])) & kept
    assert retyped == changed


@given(schemas(), schemas())
def test_the_diff_mirrors_when_reversed(a: dict[str, Any], b: dict[str, Any]) -> None:
    there, back = diff(a, b), diff(b, a)
    assert {e.split(" ")[0] for e in there.added} == set(back.removed)
    assert {e.split(" ")[0] for e in there.retyped} == {e.split(" ")[0] for e in back.retyped}
