"""Give freed large blocks back to the operating system (glibc only; elsewhere nothing is done).

glibc's malloc serves blocks of 128 KiB and more with their own ``mmap`` at
first, but once such a block is freed it raises that threshold to the block's
size (up to 32 MiB), so later large blocks come from the heap, where memory a
burst used is kept after it is freed. A daemon's bursts are large messages —
results of hundreds of KB written to many Watch streams at once — and the
memory they held stayed with the process after the streams ended. Fixing the
threshold (``mallopt(M_MMAP_THRESHOLD, …)``, which also turns the dynamic
raise off) keeps every large block its own mapping, unmapped when freed. An
operator's ``MALLOC_MMAP_THRESHOLD_`` in the environment is left as it is.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys

M_MMAP_THRESHOLD = -3
THRESHOLD = 128 << 10


def return_large_blocks() -> bool:
    """Fix glibc's mmap threshold at 128 KiB; True when it was set."""
    if not sys.platform.startswith("linux") or "MALLOC_MMAP_THRESHOLD_" in os.environ:
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc (musl has no mallopt)
        return False
    return bool(mallopt(M_MMAP_THRESHOLD, THRESHOLD))
