"""Durable state behind one protocol with ONE atomic commit (see ``base``)."""

from .base import Batch, Store, StoreInfo

__all__ = ["Batch", "Store", "StoreInfo"]
