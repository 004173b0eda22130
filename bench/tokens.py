"""Count prompt tokens of the exact request bodies a scripted server received, with one tokenizer for everyone.

Tokenizer: tiktoken ``cl100k_base`` (loaded offline from the copy LiteLLM ships, without importing LiteLLM).
A request's prompt tokens = the tools array as compact JSON + for each message: 4 (OpenAI's per-message
framing) + its role + its text (content string, or the text parts of a content list) + for each tool call its
name and JSON arguments + 3 (reply priming). This is the accounting of OpenAI's cookbook recipe, applied the same
way to every framework's request, so differences come from what each framework puts in the prompt.
"""

from __future__ import annotations

import json
import os
from functools import lru_cache
from pathlib import Path
from typing import Any


@lru_cache(maxsize=1)
def _encoding() -> Any:
    if "TIKTOKEN_CACHE_DIR" not in os.environ:
        import importlib.util

        spec = importlib.util.find_spec("litellm")
        if spec and spec.submodule_search_locations:
            cache = Path(list(spec.submodule_search_locations)[0]) / "litellm_core_utils" / "tokenizers"
            if cache.is_dir():
                os.environ["TIKTOKEN_CACHE_DIR"] = str(cache)
    import tiktoken

    return tiktoken.get_encoding("cl100k_base")


def count_text(text: str) -> int:
    """Tokens of ``text`` in cl100k_base."""
    return len(_encoding().encode(text or "", disallowed_special=()))


def _content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in content)
    return json.dumps(content)


def _tools_json(body: dict) -> str:
    """The request's tool definitions as compact JSON (a chat template renders them into the prompt)."""
    return json.dumps(body["tools"], separators=(",", ":"), ensure_ascii=False) if body.get("tools") else ""


def schema_chars(body: dict) -> int:
    """Characters of the request's JSON-schema ``response_format`` as compact JSON (the json style), 0 without one.

    Not part of the prompt: llama.cpp (``json_schema`` -> a grammar), Ollama (``format``) and vLLM (guided
    decoding) turn it into a decoding constraint the model never reads; a provider that shows structured-output
    schemas to its model (OpenAI) would count it as prompt tokens."""
    fmt = body.get("response_format")
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        return len(json.dumps(fmt, separators=(",", ":"), ensure_ascii=False))
    return 0


def count_chars(body: dict, parts: bool = False) -> Any:
    """Characters of one request body, counted as :func:`count_request` counts tokens (tools as compact JSON, each
    message's role, text, tool-call names and arguments); with ``parts`` a dict ``{"system", "tools",
    "conversation", "total"}``."""
    tools = len(_tools_json(body))
    system = conversation = 0
    for m in body.get("messages", []):
        n = len(str(m.get("role", ""))) + len(_content_text(m.get("content")))
        for call in m.get("tool_calls") or []:
            fn = call.get("function", {})
            n += len(str(fn.get("name", ""))) + len(str(fn.get("arguments", "")))
        if m.get("role") == "system":
            system += n
        else:
            conversation += n
    total = tools + system + conversation
    if parts:
        return {"system": system, "tools": tools, "conversation": conversation, "total": total}
    return total


def count_request(body: dict) -> int:
    """Prompt tokens of one chat-completions request body (messages + tools), as described in the module doc."""
    total = 3
    tools = _tools_json(body)
    if tools:
        total += count_text(tools)
    for m in body.get("messages", []):
        total += 4 + count_text(str(m.get("role", ""))) + count_text(_content_text(m.get("content")))
        for call in m.get("tool_calls") or []:
            fn = call.get("function", {})
            total += count_text(str(fn.get("name", ""))) + count_text(str(fn.get("arguments", "")))
    return total


def count_parts(body: dict) -> dict[str, int]:
    """Breakdown of :func:`count_request`: ``{"system", "tools", "conversation", "total"}`` tokens."""
    tools = _tools_json(body)
    t_tools = count_text(tools) if tools else 0
    t_system = sum(4 + count_text("system") + count_text(_content_text(m.get("content")))
                   for m in body.get("messages", []) if m.get("role") == "system")
    total = count_request(body)
    return {"system": t_system, "tools": t_tools, "conversation": total - t_system - t_tools, "total": total}
