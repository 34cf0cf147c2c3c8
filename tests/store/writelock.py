"""Hold an LMDB store's write lock from a helper thread, so commits queue up behind it.

LMDB serialises write transactions with one lock; a transaction held open
elsewhere parks the store's writer thread in ``begin``, which is how tests
line batches up into one group (or keep a commit waiting) without reaching
into the writer.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from toolnexus_daemon.store import LmdbStore


@contextmanager
def write_lock_held(store: LmdbStore) -> Iterator[None]:
    """While inside, no write transaction of ``store`` can begin; on exit it is released."""
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with store._env.begin(write=True):  # test-only reach inside: the environment itself
            held.set()
            release.wait(30)

    thread = threading.Thread(target=hold, daemon=True)
    thread.start()
    if not held.wait(10):
        raise AssertionError("could not take the write lock")
    try:
        yield
    finally:
        release.set()
        thread.join(10)
