"""A live ``Watch`` follower that survives daemon kills, resuming from the last seq it saw.

Across every reconnect the seqs it receives must go up by exactly one. Every
event it saw live was published after its commit, so each one must still be
in the store at the end, unchanged: a Watch must never have shown an event
whose state a kill then lost. It also tells the killer when tool results are
streaming in (a burst of commits) and when the runtime goes quiet.
"""

from __future__ import annotations

import threading
import time

from toolnexus_client import Event, EventStream, Runtime

from .lanes import RETRY_S, TRANSIENT


class Watcher(threading.Thread):
    def __init__(self, rt: Runtime) -> None:
        super().__init__(name=f"watch-{rt.id}", daemon=True)
        self.rt = rt
        self.seen: dict[int, Event] = {}
        self.last = 0
        self.problems: list[str] = []
        self.burst = threading.Event()
        self.changed = threading.Condition()
        self._halt = threading.Event()
        self._stream: EventStream | None = None

    def run(self) -> None:
        while not self._halt.is_set():
            try:
                self._stream = self.rt.watch(after_seq=self.last)
                for event in self._stream:
                    self._see(event)
            except TRANSIENT:
                pass
            except Exception as exc:  # anything else is a finding, not a reason to stop watching
                self.problems.append(f"watch {self.rt.id} failed: {type(exc).__name__}: {exc}")
            self._halt.wait(RETRY_S)

    def _see(self, event: Event) -> None:
        if event.seq == 0:
            return  # live-only text deltas carry no seq
        if event.seq != self.last + 1:
            self.problems.append(f"watch {self.rt.id}: seq {event.seq} followed {self.last}")
        if event.seq <= self.last:
            return
        with self.changed:
            self.seen[event.seq] = event
            self.last = event.seq
            self.changed.notify_all()
        if event.type == "tool_result":
            self.burst.set()

    def wait_past(self, seq: int, timeout: float) -> bool:
        """Block until an event after ``seq`` was seen live (or ``timeout``)."""
        deadline = time.monotonic() + timeout
        with self.changed:
            while self.last <= seq:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.changed.wait(left)
        return True

    def stop(self) -> None:
        self._halt.set()
        stream = self._stream
        if stream is not None:
            stream.cancel()
        self.join(10)


def replay(rt: Runtime, upto: int, timeout: float = 30.0) -> list[Event]:
    """Watch from seq 0 until event ``upto`` arrived: what a new watcher is shown."""
    events: list[Event] = []
    deadline = time.monotonic() + timeout
    with rt.watch(after_seq=0) as stream:
        timer = threading.Timer(timeout, stream.cancel)
        timer.start()
        try:
            for event in stream:
                if event.seq == 0:
                    continue
                events.append(event)
                if event.seq >= upto or time.monotonic() > deadline:
                    break
        finally:
            timer.cancel()
    return events
