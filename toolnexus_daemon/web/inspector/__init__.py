"""The web inspector (``--ui-listen``): runtimes, handle trees, live event timelines and the
pending inbox with Approve / Decline, for people, in a browser (docs/inspector.md)."""

from .routes import ForwardResume, Inspector

__all__ = ["ForwardResume", "Inspector"]
