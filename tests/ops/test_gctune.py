"""The collector's settings: a raised young threshold, and start-up objects frozen out of every
later full collection (what ``app.run`` does at start and once the daemon serves)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from toolnexus_daemon import gctune


@pytest.fixture
def collector() -> Iterator[None]:
    before = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*before)


def test_tune_raises_only_the_young_threshold(collector: None) -> None:
    _, middle, old = gc.get_threshold()
    gctune.tune()
    assert gc.get_threshold() == (gctune.YOUNG_THRESHOLD, middle, old)


def test_freeze_takes_what_is_alive_out_of_later_collections(collector: None) -> None:
    held = [{"n": i} for i in range(1000)]
    gctune.freeze()
    assert gc.get_freeze_count() >= len(held)
    walked = {id(o) for o in gc.get_objects(generation=2)}
    assert not any(id(h) in walked for h in held), "a frozen object is still walked by full collections"
