"""The answer page shows what a model or a tool wrote: everything escaped, only http(s) linked."""

from __future__ import annotations

from toolnexus_daemon.answers import page
from toolnexus_daemon.model import Request


def test_the_prompt_and_data_are_escaped_and_the_path_is_left_out() -> None:
    html = page.question(Request("r1", "approval", "<script>alert(1)</script> ship?",
                                 data={"amount": "<b>5</b>", "path": ["root", "root/a.1"]})).decode()
    assert "<script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt; ship?" in html
    assert "&lt;b&gt;5&lt;/b&gt;" in html and "root/a.1" not in html
    assert 'method="post"' in html and 'value="approve"' in html and 'value="decline"' in html


def test_only_http_urls_become_links() -> None:
    shown = page.question(Request("r1", "authorization", "sign in", url="https://id.example/auth?x=1&y=2"))
    assert b'<a href="https://id.example/auth?x=1&amp;y=2"' in shown
    script = page.question(Request("r1", "authorization", "sign in", url="javascript:alert(1)"))
    assert b"<a " not in script and b"javascript:alert(1)" in script
