"""``${ENV}`` expansion of header values."""

from __future__ import annotations

import pytest

from toolnexus_daemon.envexpand import expand, expand_headers, expanded_secrets, mask


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


def test_expanded_secrets_are_the_referenced_values_only() -> None:
    """Only values reached through ${NAME} count, longest first; short or unset ones are skipped."""
    headers = {"A": "Bearer ${TOKEN}", "B": "${LONGER_ONE}-${TOKEN}", "C": "literal-text",
               "D": "${ID}${NOPE}"}
    env = {"TOKEN": "tok-123456", "LONGER_ONE": "longer-secret-1", "ID": "7", "UNUSED": "unused-value"}
    assert expanded_secrets(headers, env) == ["longer-secret-1", "tok-123456"]


def test_mask_replaces_every_occurrence() -> None:
    """Each secret is masked wherever it appears."""
    assert mask("a tok-123456 b tok-123456", ["tok-123456"]) == "a *** b ***"
