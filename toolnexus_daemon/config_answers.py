"""The answer-link flags (docs/protocol.md §10): ``--answers-listen`` and ``--answers-base-url``.

Kept beside ``config`` (which calls it) so the listener's rules read in one place:

* ``--answers-listen PORT`` or ``:PORT`` means ``127.0.0.1:PORT`` — loopback unless said otherwise;
* a non-loopback host is refused unless the daemon serves TLS (``--tls-cert``/``--tls-key``, which
  the answers listener then uses too) or ``--insecure`` says plaintext there is meant (behind a
  TLS-terminating proxy, say). A link is a bearer capability: sent in clear, anyone on the path
  can answer with it;
* a wildcard host (``0.0.0.0``, ``::``) names no address a phone can reach, so it needs
  ``--answers-base-url``; otherwise the links start with ``http(s)://HOST:PORT`` as bound.
"""

from __future__ import annotations

import argparse
import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from .config_listen import is_loopback, listen_address

MAX_BASE_URL = 200


@dataclass(frozen=True)
class Answers:
    """Where the answers listener binds and what links start with ("" = derived once bound)."""

    listen: str
    base_url: str = ""


def add_flags(g: argparse._ArgumentGroup, env: Mapping[str, str]) -> None:
    g.add_argument("--answers-listen", default=env.get("TOOLNEXUS_ANSWERS_LISTEN", ""), metavar="HOST:PORT",
                   help="serve answer links over HTTP(S) (docs/protocol.md §10); a bare PORT means "
                        "127.0.0.1:PORT (env TOOLNEXUS_ANSWERS_LISTEN; default off)")
    g.add_argument("--answers-base-url", default=env.get("TOOLNEXUS_ANSWERS_BASE_URL", ""), metavar="URL",
                   help="what answer links start with, e.g. https://approve.example.com (env "
                        "TOOLNEXUS_ANSWERS_BASE_URL; default http(s)://HOST:PORT of --answers-listen)")


def answers(parser: argparse.ArgumentParser, ns: argparse.Namespace, tls: bool,
            insecure: bool) -> Answers | None:
    """The checked answer-link settings, or None when no listener is asked for."""
    listen, base = ns.answers_listen.strip(), ns.answers_base_url.strip()
    if not listen:
        if base:
            parser.error("--answers-base-url needs --answers-listen HOST:PORT (the listener the links reach)")
        return None
    listen = listen_address(parser, "--answers-listen", listen, "127.0.0.1:8443")
    host = listen.rpartition(":")[0].strip("[]")
    if not is_loopback(host) and not tls and not insecure:
        parser.error(f"--answers-listen {listen}: a non-loopback address needs TLS (--tls-cert/--tls-key); "
                     "pass --insecure to serve answer links in plaintext there anyway")
    if base:
        return Answers(listen, _checked_base(parser, base))
    if _wildcard(host):
        parser.error(f"--answers-listen {listen}: links need an address people can reach; "
                     "give --answers-base-url (e.g. https://approve.example.com)")
    return Answers(listen)


def base_url(settings: Answers, bound: str, tls: bool) -> str:
    """The links' base: the operator's, or the bound address with its resolved port."""
    return settings.base_url or f"{'https' if tls else 'http'}://{bound}"



def _checked_base(parser: argparse.ArgumentParser, base: str) -> str:
    parts = urlsplit(base)
    if (parts.scheme not in ("http", "https") or not parts.netloc or parts.query or parts.fragment
            or len(base) > MAX_BASE_URL or any(c.isspace() for c in base)):
        parser.error(f"--answers-base-url {base[:80]!r}: want an http:// or https:// URL without query "
                     f"or fragment, at most {MAX_BASE_URL} characters (e.g. https://approve.example.com)")
    return base.rstrip("/")



def _wildcard(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_unspecified
    except ValueError:
        return False
