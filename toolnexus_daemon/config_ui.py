"""The web inspector's flag (docs/inspector.md): ``--ui-listen HOST:PORT``.

* ``--ui-listen PORT`` or ``:PORT`` means ``127.0.0.1:PORT``;
* without a token (``--token-file``/``--auth-token-env``) the inspector is open to whoever reaches
  it, so it is served on loopback only: a non-loopback address without a token is refused;
* a non-loopback address also needs TLS (``--tls-cert``/``--tls-key``, which the inspector then
  serves too) or ``--insecure``: the session cookie would otherwise travel in clear.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping

from .config_listen import is_loopback, listen_address


def add_flags(g: argparse._ArgumentGroup, env: Mapping[str, str]) -> None:
    g.add_argument("--ui-listen", default=env.get("TOOLNEXUS_UI_LISTEN", ""), metavar="HOST:PORT",
                   help="serve the web inspector (runtimes, handle trees, live events, the pending "
                        "inbox) over HTTP(S); a bare PORT means 127.0.0.1:PORT (env TOOLNEXUS_UI_LISTEN; "
                        "default off)")


def ui_listen(parser: argparse.ArgumentParser, ns: argparse.Namespace, *, token: bool, tls: bool,
              insecure: bool) -> str:
    """The checked ``--ui-listen`` address ("" = off)."""
    listen = str(ns.ui_listen).strip()
    if not listen:
        return ""
    listen = listen_address(parser, "--ui-listen", listen, "127.0.0.1:8077")
    if is_loopback(listen.rpartition(":")[0].strip("[]")):
        return listen
    if not token:
        parser.error(f"--ui-listen {listen}: without a token (--token-file) the inspector is open to anyone "
                     "who reaches it, so it serves loopback only; give a token or a loopback address")
    if not tls and not insecure:
        parser.error(f"--ui-listen {listen}: a non-loopback address needs TLS (--tls-cert/--tls-key); "
                     "pass --insecure to serve the inspector in plaintext there anyway")
    return listen
