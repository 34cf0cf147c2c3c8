"""Durable state behind one protocol with ONE atomic commit (see ``base``)."""

from .base import Batch, Store, StoreInfo
from .lmdb.store import LmdbStore
from .memory import MemoryStore

__all__ = ["Batch", "LmdbStore", "MemoryStore", "Store", "StoreInfo"]
