"""The retry policy of the HTTP model transports, and the one attempt it repeats.

Every HTTP style (``openai``, ``anthropic``) retries by the same rules, so
the rules live here once: which failures are worth another attempt (the pure
functions at the top), how long to wait, the loop that turns the last failure
into a ``ModelError``, and the single HTTP exchange whose lower-layer errors
(httpx exceptions, statuses) are described as a ``Failure`` rather than
raised. Delays use exponential backoff with *full jitter* (AWS architecture
blog, "Exponential Backoff And Jitter"): many sidecars retrying one
overloaded provider in lock step would keep it overloaded, so each waits a
uniformly random slice of the backoff window.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

import httpx

from ..model import JSON
from .base import ModelError, ModelReply

log = logging.getLogger(__name__)

# 429 = rate limited; 5xx gateway/overload codes are usually transient (529 is
# Anthropic's "overloaded"). Other statuses (400 bad body, 401 bad key, 404 bad
# model) fail the same way again.
RETRYABLE_STATUSES: frozenset[int] = frozenset({429, 500, 502, 503, 504, 529})
# enough of a provider's error body to diagnose, not enough to flood a result
BODY_SNIPPET_CHARS = 500
# shorter values (e.g. "1", "json") are too common to mask without mangling the message
_MIN_SECRET_CHARS = 6


def total_attempts(retries: int) -> int:
    """The first attempt plus ``retries`` more; a negative setting means no retries."""
    return max(0, retries) + 1


def is_retryable_status(status: int) -> bool:
    """Whether an HTTP status is worth another attempt."""
    return status in RETRYABLE_STATUSES


def backoff_delay(attempt: int, base: float, cap: float, rand: Callable[[], float]) -> float:
    """Full-jitter backoff before retry number ``attempt + 1`` (``attempt`` counts from 0)."""
    # min() first so a large attempt cannot overflow the float before capping
    window = min(cap, base * 2.0 ** min(attempt, 62))
    return max(0.0, rand() * window)


def parse_retry_after(value: str | None) -> float | None:
    """Seconds from a ``Retry-After`` header, only when it is a whole number of seconds.

    An HTTP-date or a fractional value is ignored (None) on purpose: dates
    depend on clock agreement with the provider, and a malformed header must
    never make us wait an arbitrary time, so both fall back to backoff.
    """
    if value is None:
        return None
    text = value.strip()
    if not text or not text.isascii() or not text.isdigit():
        return None
    return float(int(text))


def retry_delay(attempt: int, retry_after: str | None, *, base: float, cap: float,
                rand: Callable[[], float]) -> float:
    """The wait before the next attempt: the server's ``Retry-After`` if usable, else backoff."""
    told = parse_retry_after(retry_after)
    if told is not None:
        return told
    return backoff_delay(attempt, base, cap, rand)


@dataclass(frozen=True)
class Failure:
    """One failed attempt: what to report and whether another attempt may help."""

    reason: str
    retryable: bool
    retry_after: str | None = None
    # the lower-layer exception, chained onto the ModelError for tracebacks
    cause: BaseException | None = None


Attempt = Callable[[], Awaitable[ModelReply | Failure]]
Reader = Callable[[httpx.Response], Awaitable[ModelReply | Failure]]


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently a transport retries; the seams are for tests."""

    retries: int
    backoff_base: float = 0.5
    backoff_cap: float = 8.0
    sleep: Callable[[float], Awaitable[object]] = field(default=asyncio.sleep)
    rand: Callable[[], float] = field(default=random.random)

    async def run(self, attempt: Attempt, secrets: Sequence[str], *, budget_ms: int | None = None,
                  sleep: Callable[[float], Awaitable[object]] | None = None) -> ModelReply:
        """Repeat ``attempt`` while it fails retryably; raise ModelError once the attempts are spent.

        No wait between attempts is longer than ``budget_ms`` (``llm.timeout_ms``): a backoff is
        shortened to it, and a server asking with ``Retry-After`` for longer (an hour, say) ends the
        call now, with the reason, instead of holding the turn that long. ``sleep`` (the engine's)
        waits without holding the turn's concurrency slot."""
        attempts = total_attempts(self.retries)
        for number in range(attempts):
            outcome = await attempt()
            if isinstance(outcome, ModelReply):
                return outcome
            if not outcome.retryable or number + 1 == attempts:
                raise ModelError(redact(failure_message(outcome.reason, number + 1), secrets)) \
                    from outcome.cause
            delay = retry_delay(number, outcome.retry_after, base=self.backoff_base, cap=self.backoff_cap,
                                rand=self.rand)
            if budget_ms is not None:
                if parse_retry_after(outcome.retry_after) is not None and delay > budget_ms / 1000:
                    reason = (f"{outcome.reason}; the server asks to wait {delay:.0f}s, longer than "
                              f"llm.timeout_ms ({budget_ms} ms)")
                    raise ModelError(redact(failure_message(reason, number + 1), secrets)) from outcome.cause
                delay = min(delay, budget_ms / 1000)  # a backoff is ours to shorten; Retry-After is not
            log.info("model call attempt %d/%d failed (%s); retrying in %.2fs", number + 1, attempts,
                     redact(outcome.reason, secrets), delay)
            await (sleep or self.sleep)(delay)
        raise AssertionError("unreachable: the last attempt always returns or raises")


async def exchange(client: httpx.AsyncClient, url: str, body: JSON, headers: httpx.Headers,
                   timeout_ms: int, read: Reader, *, stream: bool = False) -> ModelReply | Failure:
    """One POST, its failure described rather than raised.

    ``timeout_ms`` bounds the whole exchange; for a stream it bounds the wait
    for the response head and each silence between reads instead, because a
    long streamed answer is the point of streaming.
    """
    seconds = timeout_ms / 1000
    try:
        # httpx times each read separately; the outer deadline bounds a slow trickle too
        async with asyncio.timeout(seconds) as deadline:
            request = client.build_request("POST", url, json=body, headers=headers, timeout=seconds)
            response = await client.send(request, stream=True)
            try:
                if stream:
                    deadline.reschedule(None)
                return await read(response)
            finally:
                await response.aclose()
    except (httpx.TimeoutException, TimeoutError) as exc:
        return Failure(f"timeout after {timeout_ms} ms ({type(exc).__name__})", retryable=True, cause=exc)
    except (httpx.UnsupportedProtocol, httpx.InvalidURL) as exc:
        return Failure(f"invalid llm.base_url: {exc}", retryable=False, cause=exc)
    except httpx.TransportError as exc:
        return Failure(f"connection error: {describe(exc)}", retryable=True, cause=exc)
    except httpx.RequestError as exc:
        # e.g. a body that fails to decode: the same bytes would come back again
        return Failure(f"bad response: {describe(exc)}", retryable=False, cause=exc)


def status_failure(response: httpx.Response) -> Failure:
    """A non-2xx response (its body already read) as a failure, retryable by status."""
    return Failure(f"HTTP {response.status_code}: {snippet(response.text)}",
                   retryable=is_retryable_status(response.status_code),
                   retry_after=response.headers.get("retry-after"))


def parse_json_reply(response: httpx.Response, parse: Callable[[JSON], ModelReply]) -> ModelReply | Failure:
    """A read 2xx response decoded as JSON and handed to the style's ``parse``."""
    try:
        data = response.json()
    except RecursionError:
        return Failure(f"HTTP {response.status_code} response is JSON nested too deeply to read",
                       retryable=False)
    except ValueError as exc:
        return Failure(f"HTTP {response.status_code} response is not JSON: {snippet(response.text)}",
                       retryable=False, cause=exc)
    return parse_reply(data, parse)


def parse_reply(data: JSON, parse: Callable[[JSON], ModelReply]) -> ModelReply | Failure:
    """``parse(data)``, a ModelError becoming a final failure (the same body would come again)."""
    try:
        return parse(data)
    except ModelError as exc:
        return Failure(str(exc), retryable=False, cause=exc)


def json_reader(parse: Callable[[JSON], ModelReply]) -> Reader:
    """The reader of a non-streamed reply: status check, JSON, then the style's ``parse``."""
    async def read(response: httpx.Response) -> ModelReply | Failure:
        await response.aread()
        if not response.is_success:
            return status_failure(response)
        return parse_json_reply(response, parse)
    return read


def secret_values(headers: httpx.Headers) -> list[str]:
    """Header values long enough to mask in messages (any of them may hold a key).

    The token of a ``Bearer <token>`` value counts on its own: an echoed key
    comes back without its scheme.
    """
    values = [v for v in headers.values()] + [v.partition(" ")[2] for v in headers.values()]
    return [v for v in values if len(v) >= _MIN_SECRET_CHARS]


def failure_message(reason: str, attempts_made: int) -> str:
    if attempts_made == 1:
        return f"model call failed: {reason}"
    return f"model call failed after {attempts_made} attempts: {reason}"


def describe(exc: BaseException) -> str:
    """The exception class and message; httpx messages name neither headers nor keys."""
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def snippet(text: str) -> str:
    text = text.strip()
    if len(text) <= BODY_SNIPPET_CHARS:
        return text
    return text[:BODY_SNIPPET_CHARS] + f"… ({len(text)} chars)"


def redact(text: str, secrets: Sequence[str]) -> str:
    """Mask known secrets: provider error bodies sometimes echo the key back."""
    for secret in secrets:
        text = text.replace(secret, "***")
    return text
