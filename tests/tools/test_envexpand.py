"""``${ENV}`` expansion of header values."""

from __future__ import annotations

import pytest

from toolnexus_daemon.tools.envexpand import expand, expand_headers


def test_variables_are_replaced() -> None:
    """Each ${NAME} is replaced by its value, text around it kept."""
    assert expand("Bearer ${TOKEN}-${ID}", {"TOKEN": "t0k", "ID": "7"}) == "Bearer t0k-7"


def test_missing_variables_become_empty() -> None:
    """An unset variable expands to the empty string."""
    assert expand("x${NOPE}y", {}) == "xy"


def test_text_that_is_not_a_reference_is_left_alone() -> None:
    """A bare $NAME, an unclosed brace or an invalid name is not expanded."""
    assert expand("$A ${A ${1X} {A}", {"A": "v", "1X": "w"}) == "$A ${A ${1X} {A}"


def test_os_environ_is_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without an explicit mapping the process environment is used."""
    monkeypatch.setenv("TOOLNEXUS_TEST_VAR", "from-env")
    assert expand("${TOOLNEXUS_TEST_VAR}") == "from-env"


def test_header_names_are_not_expanded() -> None:
    """Only values are expanded; names are taken literally."""
    assert expand_headers({"X-${A}": "${A}"}, {"A": "1"}) == {"X-${A}": "1"}
