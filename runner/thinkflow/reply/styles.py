"""Action styles: which one a run starts with, which one it falls back to, and what each sends to the model.

``native`` sends the tools as function definitions; ``json`` asks for one JSON object per reply (sent as
``response_format`` where the provider supports it); ``react`` asks for labelled text and stops at
``Observation:``. ``auto`` starts with the best style the model supports and, after
:data:`MALFORMED_BEFORE_SWITCH` malformed replies in a row, moves along :data:`NEXT_STYLE`.
"""

from __future__ import annotations

import json
from typing import Any, Sequence

from thinkflow.reply.actions import FINAL_ACTION
from thinkflow.model.messages import Message

NEXT_STYLE = {"native": "json", "json": "react"}
MALFORMED_BEFORE_SWITCH = 2
REACT_STOP = ("Observation:",)


def choose_style(style: str, capabilities: Any) -> str:
    """The style to start with: ``style`` itself unless "auto"; then native when the model supports function
    calling, json when it supports JSON-schema output, else react."""
    if style != "auto":
        return style
    if getattr(capabilities, "function_calling", False):
        return "native"
    if getattr(capabilities, "json_schema", False):
        return "json"
    return "react"


def json_action_schema(tool_names: Sequence[str]) -> dict[str, Any]:
    """The JSON Schema of one json-style reply: ``{"thought", "action" (enum: tools + final_answer),
    "action_input"}``."""
    return {
        "type": "object",
        "properties": {
            "thought": {"type": "string"},
            "action": {"type": "string", "enum": [*tool_names, FINAL_ACTION]},
            "action_input": {},
        },
        "required": ["thought", "action", "action_input"],
    }


def textualize(messages: Sequence[Message]) -> list[Message]:
    """Native tool traffic rewritten as text (for json/react styles): an assistant tool call becomes
    ``Action: name`` / ``Action Input: {...}`` and a tool message ``Observation: ...`` from the user."""
    out: list[Message] = []
    for m in messages:
        if m.role == "assistant" and m.tool_calls:
            parts = [m.content.strip()] if m.content.strip() else []
            for c in m.tool_calls:
                parts.append(f"Action: {c.name}\nAction Input: {json.dumps(c.arguments, ensure_ascii=False)}")
            out.append(Message("assistant", "\n".join(parts)))
        elif m.role == "tool":
            out.append(Message("user", f"Observation: {m.content}"))
        else:
            out.append(m)
    return out


def style_kwargs(style: str, toolbox: Any, client: Any) -> dict[str, Any]:
    """The ``complete()`` keyword arguments of ``style``: ``tools`` (native, when there are tools),
    ``response_format`` (json: a json_schema format when the model supports it, else JSON mode when supported) or
    ``stop`` (react)."""
    kwargs: dict[str, Any] = {}
    if style == "native" and len(toolbox):
        kwargs["tools"] = toolbox.definitions()
    elif style == "json":
        try:
            caps = client.capabilities()
        except Exception:  # noqa: BLE001
            caps = None
        if getattr(caps, "json_schema", False):
            kwargs["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "agent_action", "schema": json_action_schema(toolbox.names())},
            }
        elif getattr(caps, "json_mode", False):
            kwargs["response_format"] = {"type": "json_object"}
    elif style == "react":
        kwargs["stop"] = REACT_STOP
    return kwargs
