"""The answer form built from a Request's data schema, and the answer's ``data`` read back from it.

A request may say what data its answer should carry: a JSON Schema object under ``data.schema``
(or ``data.requestedSchema``, MCP's elicitation name) with flat ``properties``. Each property of a
simple type becomes an input — ``string`` (a text field, or a select for an ``enum``), ``number``,
``integer``, ``boolean`` (a checkbox) — and ``required`` ones are required. A schema with anything
else (nested objects, arrays) gets one JSON textarea instead, as does a request without a schema.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping

from ...model import JSON, Request
from .render import Safe, join, render

SCHEMA_KEYS = ("schema", "requestedSchema")
SIMPLE = ("string", "number", "integer", "boolean")
FIELD_PREFIX = "d."
JSON_FIELD = "data_json"
MAX_PROPERTIES = 50


class BadForm(ValueError):
    """The form's data does not fit the schema (the message says which field and why)."""


def schema_of(request: Request) -> JSON | None:
    """The request's flat object schema when every property is simple, else None."""
    data = request.data or {}
    schema = next((data[k] for k in SCHEMA_KEYS if isinstance(data.get(k), dict)), None)
    if schema is None or schema.get("type", "object") != "object":
        return None
    props = schema.get("properties")
    if not isinstance(props, dict) or not props or len(props) > MAX_PROPERTIES:
        return None
    if not all(isinstance(p, dict) and _simple(p) for p in props.values()):
        return None
    return dict(schema)


def _simple(prop: JSON) -> bool:
    enum = prop.get("enum")
    if enum is not None:
        return isinstance(enum, list) and 0 < len(enum) <= 200 and all(isinstance(v, str) for v in enum)
    return prop.get("type") in SIMPLE


def inputs(request: Request, form_id: str) -> Safe:
    """The form's data inputs (ids unique per form: ``form_id`` prefixes them)."""
    schema = schema_of(request)
    if schema is None:
        return render('<label for="${id}-json">Data (JSON object, optional)</label>'
                      '<textarea id="${id}-json" name="${name}" class="json" rows="3"></textarea>',
                      id=form_id, name=JSON_FIELD)
    required = set(schema.get("required") or [])
    return join(_input(form_id, name, prop, name in required)
                for name, prop in schema["properties"].items())


def _input(form_id: str, name: str, prop: JSON, required: bool) -> Safe:
    ident = f"{form_id}-f-{name}"
    label = render('<label for="$id">$title</label>', id=ident, title=str(prop.get("title") or name))
    hint = render('<span class="muted">$d</span>', d=prop["description"]) if prop.get("description") else ""
    req = Safe(" required") if required else Safe("")
    field_name = FIELD_PREFIX + name
    default = prop.get("default")
    if isinstance(prop.get("enum"), list):
        opts = join(render('<option value="$v"$sel>$v</option>', v=v,
                           sel=Safe(" selected") if v == default else Safe("")) for v in prop["enum"])
        widget = render('<select id="$id" name="$n"$req>$opts</select>', id=ident, n=field_name, req=req,
                        opts=opts)
    elif prop.get("type") == "boolean":
        checked = Safe(" checked") if default is True else Safe("")
        widget = render('<input type="checkbox" id="$id" name="$n" value="true"$c>', id=ident, n=field_name,
                        c=checked)
    else:
        kinds = {"number": 'number" step="any', "integer": 'number" step="1'}
        kind = kinds.get(str(prop.get("type")), "text")
        value = "" if default is None else str(default)
        widget = render('<input type="$k" id="$id" name="$n" value="$v"$req>', k=Safe(kind), id=ident,
                        n=field_name, v=value, req=req)
    return render('<div class="field">$label $widget $hint</div>', label=label, widget=widget, hint=hint)


def data_of(request: Request, fields: Mapping[str, str], approve: bool) -> JSON | None:
    """The answer's data from the posted ``fields``; ``BadForm`` naming what is wrong. A decline
    carries no data (the schema describes what an approval provides)."""
    if not approve:
        return None
    schema = schema_of(request)
    if schema is None:
        return _json_data(fields.get(JSON_FIELD, ""))
    out: JSON = {}
    required = set(schema.get("required") or [])
    for name, prop in schema["properties"].items():
        raw = fields.get(FIELD_PREFIX + name)
        if prop.get("type") == "boolean" and not isinstance(prop.get("enum"), list):
            out[name] = raw == "true"
            continue
        if raw is None or raw == "":
            if name in required:
                raise BadForm(f'"{name}" is required')
            continue
        out[name] = _value(name, prop, raw)
    return out or None


def _value(name: str, prop: JSON, raw: str) -> object:
    enum = prop.get("enum")
    if isinstance(enum, list):
        if raw not in enum:
            raise BadForm(f'"{name}" must be one of {", ".join(map(str, enum))}')
        return raw
    kind = prop.get("type")
    try:
        if kind == "integer":
            return int(raw)
        if kind == "number":
            number = float(raw)
            if not math.isfinite(number):
                raise ValueError(raw)
            return number
    except ValueError:
        raise BadForm(f'"{name}" must be {"an integer" if kind == "integer" else "a number"}') from None
    return raw


def _json_data(text: str) -> JSON | None:
    if not text.strip():
        return None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise BadForm(f"the data is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise BadForm("the data must be a JSON object")
    return data

