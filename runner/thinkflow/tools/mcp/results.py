"""An MCP ``CallToolResult`` -> a :class:`~thinkflow.tools.base.ToolResult`.

Text blocks become the observation (capped to the tool's ``max_output`` bytes, head and tail kept); structured
content is kept as JSON in ``data["structured"]`` (and shown as JSON when there is no text); images, audio and
resources are named in the observation (``[image image/png, 68 bytes]``) and kept in ``data["content"]`` for the
trace (base64 data up to :data:`MAX_KEPT_BASE64` characters per block); ``isError`` makes the status "error".

Spec: https://modelcontextprotocol.io/specification/2025-11-25/server/tools#tool-result
"""

from __future__ import annotations

import json
from typing import Any

from thinkflow.tools.base import ToolResult
from thinkflow.tools.output import cap_text, format_size

MAX_KEPT_BASE64 = 262144
"""Characters of one image's, audio clip's or blob's base64 data kept in the trace; larger data is left out."""


def _size_of_base64(data: str) -> int:
    return len(data) * 3 // 4 - data[-2:].count("=") if data else 0


def _binary(kind: str, block: Any, label: str = "") -> tuple[str, dict[str, Any]]:
    data = getattr(block, "data", None) or getattr(block, "blob", None) or ""
    mime = getattr(block, "mime_type", None) or "application/octet-stream"
    size = _size_of_base64(data)
    entry: dict[str, Any] = {"type": kind, "mime_type": mime, "bytes": size}
    if label:
        entry["uri"] = label
    if len(data) <= MAX_KEPT_BASE64:
        entry["data"] = data
    else:
        entry["data_omitted"] = True
    where = f" {label}" if label else ""
    return f"[{kind}{where} {mime}, {format_size(size)}]", entry


def _block(block: Any) -> tuple[str | None, dict[str, Any] | None]:
    """(text for the observation, entry for ``data["content"]``) of one content block."""
    kind = getattr(block, "type", None)
    if kind == "text":
        return block.text, None
    if kind in ("image", "audio"):
        return _binary(kind, block)
    if kind == "resource_link":
        name = block.name or block.uri
        entry = {"type": "resource_link", "uri": str(block.uri), "name": block.name,
                 "mime_type": block.mime_type}
        return f"[resource {name} ({block.uri})]", entry
    if kind == "resource":
        resource = block.resource
        uri = str(resource.uri)
        text = getattr(resource, "text", None)
        if text is not None:
            return f"[resource {uri}]\n{text}", {"type": "resource", "uri": uri, "mime_type": resource.mime_type}
        return _binary("resource", resource, uri)
    return f"[{kind or 'unknown'} content]", {"type": str(kind)}


def to_tool_result(result: Any, max_output: int) -> ToolResult:
    """The ToolResult of one ``mcp_types.CallToolResult``; ``data`` has ``bytes``, ``truncated`` and, when
    present, ``structured`` and ``content`` (non-text blocks)."""
    parts: list[str] = []
    kept: list[dict[str, Any]] = []
    for block in result.content or []:
        text, entry = _block(block)
        if text is not None:
            parts.append(text)
        if entry is not None:
            kept.append(entry)
    structured = result.structured_content
    texts = [p for p in parts if p]
    if structured is not None and not any(getattr(b, "type", None) == "text" for b in result.content or []):
        texts.insert(0, json.dumps(structured, ensure_ascii=False, default=str))
    body = "\n".join(texts) or "(no output)"
    status = "error" if result.is_error else "ok"
    if status == "error" and not body.startswith("error"):
        body = f"error: {body}"
    text, total, truncated = cap_text(body, max_output)
    data: dict[str, Any] = {"bytes": total, "truncated": truncated}
    if structured is not None:
        data["structured"] = structured
    if kept:
        data["content"] = kept
    return ToolResult(status, text, data)
