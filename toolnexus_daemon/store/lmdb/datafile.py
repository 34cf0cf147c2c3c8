"""Check an LMDB data file against its own metadata before mapping it.

LMDB maps ``data.mdb`` into memory and trusts it: a file truncated by a bad copy or a full disk
makes the first read of a missing page a SIGBUS — the daemon dies with an empty log, and a
supervisor restarts it into the same crash. A zero-length file opens as an empty store, silently
forgetting everything. Both are caught here from the two meta pages LMDB keeps at the start of
the file (magic, page size, last used page, transaction id), and refused with a message naming
the file and what to do.
"""

from __future__ import annotations

import shutil
import struct
from pathlib import Path

from ...errors import StoreError

DATA_FILE = "data.mdb"
MAGIC = 0xBEEFC0DE
# the page header, then MDB_meta: magic u32, version u32, address, mapsize, two MDB_db of 48 bytes
_META_OFFSET = 16
_PAGE_SIZE_AT = _META_OFFSET + 24  # mm_dbs[0].md_pad holds the page size
_LAST_PAGE_AT = _META_OFFSET + 24 + 96  # mm_last_pg, then mm_txnid
_MIN_PAGE = 512
# a disk with less free space than this explains a failed write (EIO from the commit's sync)
FULL_BELOW = 16 << 20


def check_data_file(directory: Path) -> None:
    """Raise StoreError when ``directory``'s data file is empty or shorter than its metadata says."""
    path = directory / DATA_FILE
    if not path.is_file():
        return  # a new store: LMDB creates the file
    size = path.stat().st_size
    if size == 0:
        raise StoreError(f"the store file {path} is empty (0 bytes): it was truncated or never written. "
                         "Restore it from a backup; to start with an empty store instead, move the data "
                         "directory aside")
    with path.open("rb") as f:
        head = f.read(_LAST_PAGE_AT + 16)
        page_size = _page_size(path, head, size)
        f.seek(page_size)
        second = f.read(_LAST_PAGE_AT + 16)
    metas = [m for m in (_meta(head), _meta(second)) if m is not None]
    if not metas:
        raise _damaged(path, size, "neither meta page is valid")
    last_page, _ = max(metas, key=lambda m: m[1])
    needed = (last_page + 1) * page_size
    if size < needed:
        raise _damaged(path, size, f"its metadata needs {needed} bytes (pages 0..{last_page} of "
                                   f"{page_size} bytes): the file was truncated")


def _page_size(path: Path, head: bytes, size: int) -> int:
    if len(head) < _LAST_PAGE_AT + 16 or struct.unpack_from("<I", head, _META_OFFSET)[0] != MAGIC:
        raise _damaged(path, size, "it does not start with an LMDB meta page")
    page_size = int(struct.unpack_from("<I", head, _PAGE_SIZE_AT)[0])
    if page_size < _MIN_PAGE or page_size & (page_size - 1) or size < 2 * page_size:
        raise _damaged(path, size, "its meta pages are cut short")
    return page_size


def _meta(page: bytes) -> tuple[int, int] | None:
    """(last page, txnid) of a meta page, or None when it is not one."""
    if len(page) < _LAST_PAGE_AT + 16 or struct.unpack_from("<I", page, _META_OFFSET)[0] != MAGIC:
        return None
    last_page, txnid = struct.unpack_from("<QQ", page, _LAST_PAGE_AT)
    return int(last_page), int(txnid)


def free_bytes(directory: Path) -> int:
    """Bytes free on the file system holding ``directory`` (-1 when it cannot be asked)."""
    try:
        return shutil.disk_usage(directory).free
    except OSError:
        return -1


def disk_is_full(directory: Path) -> bool:
    """Whether a failed write is explained by the disk: less free than a commit may need."""
    return 0 <= free_bytes(directory) < FULL_BELOW


def _damaged(path: Path, size: int, why: str) -> StoreError:
    return StoreError(f"the store file {path} is damaged ({size} bytes; {why}). The daemon will not map "
                      "it, since reading a missing page would crash it. Restore the data directory from a "
                      "backup; to start with an empty store instead, move the data directory aside")
