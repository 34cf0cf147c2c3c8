"""A tiny escaping renderer: every value is HTML-escaped unless it is already :class:`Safe` markup.

Pages are built from small Python string templates (``$name`` placeholders, :class:`string.Template`)
so nothing from a model, a tool or a caller can reach the page unescaped by accident: escaping is
the default and only markup this module built itself is marked :class:`Safe`.
"""

from __future__ import annotations

import html
from collections.abc import Iterable
from string import Template


class Safe(str):
    """Markup that is already escaped (built by :func:`render` or :func:`join`)."""


def esc(value: object) -> Safe:
    """``value`` as HTML text (quotes escaped too, so it is safe inside an attribute)."""
    if isinstance(value, Safe):
        return value
    return Safe(html.escape("" if value is None else str(value), quote=True))


def render(template: str, **values: object) -> Safe:
    """``template`` with each ``$name`` replaced by its value, escaped unless :class:`Safe`."""
    return Safe(Template(template).substitute({k: esc(v) for k, v in values.items()}))


def join(parts: Iterable[object], sep: str = "") -> Safe:
    return Safe(sep.join(esc(p) for p in parts))
