"""An answer to an MCP form elicitation is checked against the schema the server asked with,
before it is consumed (docs/mcp.md): a mismatch is INVALID_ARGUMENT naming the fields, and the
suspension stays open for a good answer.

The specification restricts ``requested_schema`` to a flat object of primitive properties
(string with length, format or enum; number or integer with bounds; boolean; an array of enum
strings), which is all that is checked here.
"""

from __future__ import annotations

from ...errors import InvalidArgument
from ...model import JSON, Answer, Request

_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "number": (int, float),
    "integer": (int,),
    "boolean": (bool,),
    "array": (list,),
}


def check(request: Request, answer: Answer) -> None:
    """Raise InvalidArgument when ``answer`` accepts an MCP form elicitation with data its
    ``requested_schema`` refuses; any other request or answer passes."""
    data = request.data or {}
    schema = data.get("requested_schema")
    if not answer.ok or "mcp_server" not in data or not isinstance(schema, dict):
        return
    content = answer.data if answer.data is not None else {}
    if not isinstance(content, dict):
        raise InvalidArgument(
            f'answer.data for request "{request.id}" must be an object of the requested fields'
        )
    found = problems(schema, content)
    if found:
        raise InvalidArgument(
            f'answer.data does not match what MCP server "{data["mcp_server"]}" asked for in '
            f'request "{request.id}": {"; ".join(found)}; the request stays open for another answer'
        )


def problems(schema: JSON, content: JSON) -> list[str]:
    """Each field of ``content`` that ``schema`` refuses, by name."""
    found = schema.get("properties")
    props: JSON = found if isinstance(found, dict) else {}
    out = [f'field "{name}" is required' for name in schema.get("required") or () if name not in content]
    for name, value in content.items():
        prop = props.get(name)
        if not isinstance(prop, dict):
            out.append(
                f'field "{name}" is not in the requested schema (fields: {", ".join(props) or "none"})'
            )
            continue
        why = _field(prop, value)
        if why:
            out.append(f'field "{name}" {why}')
    return out


def _field(prop: JSON, value: object) -> str:
    kind = prop.get("type")
    allowed = _TYPES.get(kind) if isinstance(kind, str) else None
    if allowed is not None and (
        not isinstance(value, allowed) or (kind != "boolean" and isinstance(value, bool))
    ):
        return f"must be {'an' if kind in ('integer', 'array') else 'a'} {kind}"
    choices = prop.get("enum") or [c.get("const") for c in prop.get("oneOf") or () if isinstance(c, dict)]
    if choices and kind != "array" and value not in choices:
        return f"must be one of {', '.join(map(str, choices))}"
    if isinstance(value, str):
        return _length(prop, len(value))
    if isinstance(value, int | float) and not isinstance(value, bool):
        return _bounds(prop, value)
    if isinstance(value, list):
        return _items(prop, value)
    return ""


def _length(prop: JSON, n: int) -> str:
    low, high = prop.get("minLength"), prop.get("maxLength")
    if isinstance(low, int) and n < low:
        return f"must be at least {low} characters"
    if isinstance(high, int) and n > high:
        return f"must be at most {high} characters"
    return ""


def _bounds(prop: JSON, value: float) -> str:
    low, high = prop.get("minimum"), prop.get("maximum")
    if isinstance(low, int | float) and value < low:
        return f"must be at least {low}"
    if isinstance(high, int | float) and value > high:
        return f"must be at most {high}"
    return ""


def _items(prop: JSON, value: list[object]) -> str:
    found = prop.get("items")
    items: JSON = found if isinstance(found, dict) else {}
    choices = items.get("enum") or [c.get("const") for c in items.get("anyOf") or () if isinstance(c, dict)]
    bad = [str(v) for v in value if choices and v not in choices]
    return f"has values not offered: {', '.join(bad)}" if bad else ""
