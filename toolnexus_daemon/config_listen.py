"""The HTTP listeners' address flags (``--answers-listen``, ``--mcp-listen``, ``--ui-listen``):
one reading of ``HOST:PORT`` for all of them.

``PORT`` or ``:PORT`` means ``127.0.0.1:PORT`` (a listener is on loopback unless the operator
names another address); ``0`` asks for a free port.
"""

from __future__ import annotations

import argparse
import ipaddress

LOOPBACK = "127.0.0.1"


def listen_address(parser: argparse.ArgumentParser, flag: str, listen: str, example: str) -> str:
    """``listen`` as ``HOST:PORT``, or a parser error naming ``flag`` with ``example``."""
    if listen.isdigit():
        listen = f"{LOOPBACK}:{listen}"
    elif listen.startswith(":"):
        listen = LOOPBACK + listen
    host, colon, port = listen.rpartition(":")
    if not colon or not host.strip("[]") or not port.isdigit() or int(port) > 65535:
        parser.error(f"{flag} {listen!r}: want HOST:PORT or PORT (e.g. {example}, or 0 for a free port)")
    return listen


def is_loopback(host: str) -> bool:
    """Whether ``host`` (brackets stripped) is a loopback name or address."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
