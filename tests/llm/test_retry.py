"""The retry policy's pure functions."""

from __future__ import annotations

import pytest

from toolnexus_daemon.llm.retry import (
    backoff_delay,
    is_retryable_status,
    parse_retry_after,
    retry_delay,
    total_attempts,
)


@pytest.mark.parametrize(("retries", "attempts"), [(0, 1), (3, 4), (-2, 1)])
def test_total_attempts_counts_the_first_and_clamps_negative(retries: int, attempts: int) -> None:
    """Retries add to the first attempt and a negative setting means none."""
    assert total_attempts(retries) == attempts


@pytest.mark.parametrize("status", [429, 500, 502, 503, 504, 529])
def test_transient_statuses_retry(status: int) -> None:
    """Rate limiting and gateway/overload statuses (529 = Anthropic overloaded) are retried."""
    assert is_retryable_status(status)


@pytest.mark.parametrize("status", [200, 400, 401, 403, 404, 422, 501])
def test_other_statuses_do_not_retry(status: int) -> None:
    """Statuses that would fail the same way again are not retried."""
    assert not is_retryable_status(status)


def test_backoff_doubles_per_attempt_under_the_cap() -> None:
    """With rand()=1 the window doubles per attempt until the cap."""
    delays = [backoff_delay(a, 0.5, 3.0, lambda: 1.0) for a in range(5)]
    assert delays == [0.5, 1.0, 2.0, 3.0, 3.0]


def test_backoff_is_full_jitter() -> None:
    """The delay is rand() times the window, so it can be anywhere down to zero."""
    assert backoff_delay(2, 1.0, 100.0, lambda: 0.25) == 1.0
    assert backoff_delay(2, 1.0, 100.0, lambda: 0.0) == 0.0


def test_backoff_survives_huge_attempt_numbers() -> None:
    """A very late attempt is capped rather than overflowing."""
    assert backoff_delay(10_000, 0.5, 8.0, lambda: 1.0) == 8.0


@pytest.mark.parametrize(("header", "seconds"), [("0", 0.0), ("7", 7.0), (" 12 ", 12.0)])
def test_whole_second_retry_after_is_read(header: str, seconds: float) -> None:
    """A Retry-After of whole seconds, zero included, is taken as given."""
    assert parse_retry_after(header) == seconds


@pytest.mark.parametrize("header", [None, "", "1.5", "-1", "soon", "Wed, 21 Oct 2015 07:28:00 GMT", "١"])
def test_other_retry_after_forms_are_ignored(header: str | None) -> None:
    """Dates, fractions, negatives, non-ASCII digits and garbage are not honoured."""
    assert parse_retry_after(header) is None


def test_retry_delay_prefers_retry_after_over_backoff() -> None:
    """A usable Retry-After wins even over a large backoff window."""
    assert retry_delay(3, "0", base=30.0, cap=60.0, rand=lambda: 1.0) == 0.0


def test_retry_delay_falls_back_to_backoff() -> None:
    """An unusable Retry-After leaves the jittered backoff in charge."""
    assert retry_delay(1, "1.5", base=1.0, cap=60.0, rand=lambda: 0.5) == 1.0
