"""The blocking client's private event loop (``toolnexus_client._loop.LoopThread``) never strands a
caller: a call another thread submits while the loop is being closed either runs, is refused
(``ClientClosed``) or ends ``Cancelled`` — it never waits forever on a loop that stopped.

The race it guards against: a thread iterating ``rt.watch()`` asks for the next event at the moment
``detach()``/``shutdown()`` closes the loop, after the close cancelled what was running but before
it stopped the loop; that thread then hung in ``next()`` (seen as a watch thread still alive after
``shutdown()`` under load).
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from toolnexus_client import _loop
from toolnexus_client._loop import ClientClosed, LoopThread
from toolnexus_client.errors import Cancelled


def test_a_call_submitted_while_the_loop_closes_ends_cancelled(monkeypatch: pytest.MonkeyPatch) -> None:
    loop = LoopThread()
    submitted = threading.Event()
    outcome: list[BaseException | str] = []
    original = _loop._cancel_others

    async def cancel_then_let_a_call_in() -> None:
        await original()
        # another thread's call arrives now: after the cancelling, before the loop stops
        threading.Thread(target=caller, daemon=True).start()
        await asyncio.to_thread(submitted.wait, 5)
        await asyncio.sleep(0.05)  # its coroutine is on the loop, waiting

    def caller() -> None:
        async def forever() -> None:
            submitted.set()
            await asyncio.Event().wait()
        try:
            loop.run(forever())
            outcome.append("returned")
        except (Cancelled, ClientClosed) as exc:
            outcome.append(exc)

    monkeypatch.setattr(_loop, "_cancel_others", cancel_then_let_a_call_in)
    loop.close()
    for _ in range(100):  # the caller is answered within 5 s, or it hangs (the bug)
        if outcome:
            break
        time.sleep(0.05)
    assert submitted.is_set(), "the racing call never reached the loop: nothing was tested"
    assert outcome and isinstance(outcome[0], Cancelled), outcome


def test_a_call_after_close_is_refused() -> None:
    loop = LoopThread()
    loop.close()

    async def nothing() -> Any:
        return None

    with pytest.raises(ClientClosed, match="closed"):
        loop.run(nothing())
