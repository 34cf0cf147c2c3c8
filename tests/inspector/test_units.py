"""The inspector's parts on their own: the --ui-listen rules, the schema form, the sessions and
the escaping renderer."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolnexus_daemon.config import load
from toolnexus_daemon.model import Request
from toolnexus_daemon.web.inspector.render import Safe, render
from toolnexus_daemon.web.inspector.schema_form import BadForm, data_of, inputs
from toolnexus_daemon.web.inspector.sessions import IDLE_S, MAX_AGE_S, Sessions


def _load(tmp_path: Path, *args: str) -> object:
    return load(["--data-dir", str(tmp_path / "d"), *args], {})


def test_ui_listen_a_bare_port_means_loopback(tmp_path: Path) -> None:
    assert _load(tmp_path, "--ui-listen", "8077").ui_listen == "127.0.0.1:8077"  # type: ignore[attr-defined]
    assert _load(tmp_path, "--ui-listen", ":0").ui_listen == "127.0.0.1:0"  # type: ignore[attr-defined]
    assert _load(tmp_path).ui_listen == ""  # type: ignore[attr-defined]


def test_ui_listen_off_loopback_needs_a_token_and_tls(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        _load(tmp_path, "--ui-listen", "0.0.0.0:8077")
    assert exit_.value.code == 2 and "without a token" in capsys.readouterr().err
    token = tmp_path / "token"
    token.write_text("t0ken")
    with pytest.raises(SystemExit):
        _load(tmp_path, "--ui-listen", "0.0.0.0:8077", "--token-file", str(token))
    assert "needs TLS" in capsys.readouterr().err
    ok = _load(tmp_path, "--ui-listen", "0.0.0.0:8077", "--token-file", str(token), "--insecure")
    assert ok.ui_listen == "0.0.0.0:8077"  # type: ignore[attr-defined]
    with pytest.raises(SystemExit):
        _load(tmp_path, "--ui-listen", "nope")
    assert "want HOST:PORT" in capsys.readouterr().err


SCHEMA = {"type": "object", "required": ["amount"],
          "properties": {"amount": {"type": "number", "title": "Amount"},
                         "count": {"type": "integer"},
                         "note": {"type": "string", "description": 'say <b>why</b>'},
                         "urgent": {"type": "boolean"},
                         "tier": {"type": "string", "enum": ["gold", "<silver>"]}}}


def _ask(data: dict[str, object] | None) -> Request:
    return Request("r1", "input", "how much?", data=data)


def test_a_schema_becomes_inputs_with_everything_escaped() -> None:
    html = inputs(_ask({"schema": SCHEMA}), "a0")
    assert 'type="number" step="any" id="a0-f-amount" name="d.amount" value="" required' in html
    assert 'type="number" step="1" id="a0-f-count"' in html
    assert 'type="checkbox" id="a0-f-urgent" name="d.urgent" value="true"' in html
    assert '<option value="&lt;silver&gt;">&lt;silver&gt;</option>' in html
    assert "say &lt;b&gt;why&lt;/b&gt;" in html and "<b>" not in html
    assert 'name="data_json"' in inputs(_ask(None), "a1")
    nested = {"schema": {"type": "object", "properties": {"x": {"type": "object"}}}}
    assert 'name="data_json"' in inputs(_ask(nested), "a2")


def test_the_form_gives_typed_data_and_names_what_is_wrong() -> None:
    ask = _ask({"requestedSchema": SCHEMA})
    fields = {"d.amount": "12.5", "d.count": "3", "d.note": "ok", "d.urgent": "true", "d.tier": "gold"}
    want = {"amount": 12.5, "count": 3, "note": "ok", "urgent": True, "tier": "gold"}
    assert data_of(ask, fields, True) == want
    assert data_of(ask, {"d.amount": "1"}, True) == {"amount": 1.0, "urgent": False}
    assert data_of(ask, {}, False) is None  # a decline carries no data
    for bad, why in (({}, '"amount" is required'), ({"d.amount": "x"}, "must be a number"),
                     ({"d.amount": "inf"}, "must be a number"),
                     ({"d.amount": "1", "d.count": "1.5"}, "must be an integer"),
                     ({"d.amount": "1", "d.tier": "bronze"}, "must be one of")):
        with pytest.raises(BadForm, match=why):
            data_of(ask, bad, True)
    plain = _ask(None)
    assert data_of(plain, {"data_json": '{"a": [1]}'}, True) == {"a": [1]}
    assert data_of(plain, {"data_json": "  "}, True) is None
    with pytest.raises(BadForm, match="JSON object"):
        data_of(plain, {"data_json": "[1]"}, True)


def test_sessions_are_bounded_and_expire() -> None:
    now = [1000.0]
    sessions = Sessions(lambda: now[0], limit=3)
    sids = [sessions.create()[0] for _ in range(4)]
    assert len(sessions) == 3 and sessions.get(sids[0]) is None  # the least recently used went
    assert sessions.get(sids[1]) is not None
    now[0] += IDLE_S - 1
    assert sessions.get(sids[1]) is not None and sessions.get(sids[2]) is not None
    now[0] += 2
    assert sessions.get(sids[3]) is None  # unused for longer than IDLE_S
    for _ in range(int(MAX_AGE_S // (IDLE_S - 1)) + 1):
        now[0] += IDLE_S - 1
        sessions.get(sids[1])
    assert sessions.get(sids[1]) is None  # used all along, but older than MAX_AGE_S
    assert sessions.get("") is None and sessions.get("x" * 500) is None


def test_a_session_holds_runtime_keys_and_checks_its_csrf_token() -> None:
    _, session = Sessions(lambda: 0.0).create()
    session.add_key("k1")
    from toolnexus_daemon.web.inspector.sessions import key_digest

    assert session.holds(key_digest("k1")) and not session.holds(key_digest("k2"))
    assert session.key_for(key_digest("k1")) == "k1"
    assert session.csrf_ok(session.csrf) and not session.csrf_ok("")
    assert not session.csrf_ok(session.csrf + "x")


def test_the_renderer_escapes_all_but_its_own_markup() -> None:
    out = render('<p title="$t">$body</p>', t='"><script>', body=Safe("<b>mine</b>"))
    assert out == '<p title="&quot;&gt;&lt;script&gt;"><b>mine</b></p>'
