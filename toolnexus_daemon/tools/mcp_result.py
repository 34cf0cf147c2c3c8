"""An MCP ``tools/call`` result as the text the model reads (docs/mcp.md).

Text blocks are joined with blank lines; ``structuredContent`` follows as JSON text (unless a text
block already says it); every other
block is named, not inlined (``[image image/png, 12 KB]``): a model gains nothing from base64.
``isError`` is the result's ``is_error``. The text is cut to the executor's bound (the engine
bounds it again like every peer reply).
"""

from __future__ import annotations

import base64
import binascii
import json

from mcp_types import (
    AudioContent,
    BlobResourceContents,
    CallToolResult,
    ContentBlock,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
)

from ..model import ToolResult
from .http_tool import truncate


def tool_result(result: CallToolResult, max_chars: int) -> ToolResult:
    """The ToolResult of one completed call."""
    parts = [_block(b) for b in result.content]
    structured = result.structured_content
    if structured is not None and not _said(structured, result.content):
        parts.append(json.dumps(structured, ensure_ascii=False, separators=(",", ":")))
    return ToolResult(
        output=truncate("\n\n".join(p for p in parts if p), max_chars), is_error=result.is_error
    )


def _said(structured: object, content: list[ContentBlock]) -> bool:
    """Whether the text blocks already carry ``structured``: as its JSON (the specification asks
    servers to add that text block), or as the SDK's ``{"result": <text>}`` wrapping of a tool that
    returned a plain value. Saying it twice would only cost the model tokens."""
    texts = [b.text for b in content if isinstance(b, TextContent)]
    if structured == {"result": "\n\n".join(texts)} and texts:
        return True
    for text in texts:
        try:
            if json.loads(text) == structured:
                return True
        except ValueError:
            continue
    return False


def _block(block: ContentBlock) -> str:
    if isinstance(block, TextContent):
        return block.text
    if isinstance(block, ImageContent | AudioContent):
        return f"[{block.type} {block.mime_type}, {_size(block.data)}]"
    if isinstance(block, ResourceLink):
        return f"[resource link {block.uri}]"
    if isinstance(block, EmbeddedResource):
        return _resource(block.resource)
    return f"[{getattr(block, 'type', 'unknown')} content]"


def _resource(res: TextResourceContents | BlobResourceContents) -> str:
    if isinstance(res, TextResourceContents):
        return f"[resource {res.uri}]\n{res.text}"
    return f"[resource {res.uri} {res.mime_type or 'application/octet-stream'}, {_size(res.blob)}]"


def _size(b64: str) -> str:
    """The decoded size of base64 data, for people: ``512 B``, ``12 KB``, ``3.4 MB``."""
    try:
        n = len(base64.b64decode(b64, validate=False))
    except (binascii.Error, ValueError):
        n = len(b64) * 3 // 4
    if n < 1024:
        return f"{n} B"
    if n < 1024 * 1024:
        return f"{round(n / 1024)} KB"
    return f"{n / (1024 * 1024):.1f} MB"
