"""Provider replies as :class:`~thinkflow.model.messages.ModelReply`: text, decoded tool calls, usage and cost.

Shapes follow the OpenAI chat-completions API as LiteLLM returns it (objects or dicts): ``choices[0].message``
with ``content`` (a string, None or a list of parts) and ``tool_calls``; ``usage`` in tokens; the cost in USD from
LiteLLM's price map (0.0 for the embedded model, None when the model has no price).
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Mapping, Sequence
from typing import Any

from thinkflow.model.messages import ArgumentsError, Message, ModelReply, ToolCall, Usage, decode_arguments
from thinkflow.model.providers import load_litellm
from thinkflow.text import valid_unicode, valid_unicode_in


def message_dict(m: Message | Mapping[str, Any]) -> dict[str, Any]:
    """An OpenAI message dict for a :class:`Message` (a mapping is copied as is)."""
    return m.to_dict() if isinstance(m, Message) else dict(m)


#: LiteLLM providers that find a tool result's tool by its call id, so its ``name`` need not be sent (OpenAI and
#: OpenAI-compatible servers, Azure, Anthropic; Gemini/Vertex recover it from the assistant turn's calls)
NAMELESS_TOOL_RESULTS = frozenset({"openai", "azure", "anthropic", "gemini", "vertex_ai"})


def wire_messages(msgs: Sequence[dict[str, Any]], provider: str) -> list[dict[str, Any]]:
    """The message dicts as sent to ``provider``: an assistant turn that only carries tool calls has no content
    (None, as the OpenAI API returns it, instead of ""), and a tool result drops its ``name`` where the provider
    does not need it (:data:`NAMELESS_TOOL_RESULTS`). Other messages are passed as they are (not copied)."""
    drop_name = provider in NAMELESS_TOOL_RESULTS
    out = []
    for m in msgs:
        if m.get("tool_calls") and m.get("role") == "assistant" and m.get("content") == "":
            m = {**m, "content": None}
        elif drop_name and m.get("role") == "tool" and "name" in m:
            m = {k: v for k, v in m.items() if k != "name"}
        out.append(m)
    return out


def content_text(content: Any) -> str:
    """Message content as a string: None -> "", whitespace-only -> "", a list of parts -> their texts joined."""
    if content is None:
        return ""
    if isinstance(content, list):
        texts = []
        for part in content:
            if isinstance(part, str):
                texts.append(part)
            elif isinstance(part, Mapping):
                value = part.get("text")
                if isinstance(value, str):
                    texts.append(value)
        content = "".join(texts)
    text = valid_unicode(content if isinstance(content, str) else str(content))
    return text if text.strip() else ""


def normalise_tool_calls(raw_calls: Sequence[Any], undecoded: dict[str, Any] | None = None
                         ) -> tuple[list[ToolCall], dict[str, str]]:
    """Tool calls from a provider reply (objects or dicts in the OpenAI shape) as :class:`ToolCall` with decoded
    arguments and unique ids (missing or repeated ids become ``call_<n>_<hex>``). Arguments that cannot be decoded
    stay ``{}`` and the decoder's message is returned per call id; ``undecoded``, when given, receives their text
    as sent, per call id. Strings become valid Unicode (:func:`thinkflow.text.valid_unicode`)."""
    calls: list[ToolCall] = []
    errors: dict[str, str] = {}
    seen: set[str] = set()
    for n, raw in enumerate(raw_calls):
        get = raw.get if isinstance(raw, Mapping) else (lambda k, r=raw: getattr(r, k, None))
        fn = get("function")
        fget = fn.get if isinstance(fn, Mapping) else (lambda k, f=fn: getattr(f, k, None))
        call_id = get("id")
        if not isinstance(call_id, str) or not call_id.strip() or call_id in seen:
            call_id = f"call_{n}_{secrets.token_hex(4)}"
        seen.add(call_id)
        name = fget("name") if fn is not None else None
        sent = fget("arguments") if fn is not None else None
        try:
            args = decode_arguments(sent)
        except ArgumentsError as exc:
            args = {}
            errors[call_id] = str(exc)
            if undecoded is not None:
                undecoded[call_id] = sent
        if not isinstance(sent, str) or "\\u" in sent or not sent.isascii():  # "\ud800" decodes to a lone surrogate
            args = valid_unicode_in(args)
        calls.append(ToolCall(id=call_id, name=valid_unicode(str(name or "")), arguments=args))
    return calls, errors


def normalise_reply(response: Any, *, model: str, local: bool, latency: float) -> ModelReply:
    """The :class:`ModelReply` of a LiteLLM response (None: an empty stream) from ``model`` (as configured) after
    ``latency`` seconds; ``local``: the embedded model (cost 0.0)."""
    if response is None:  # an empty stream
        return ModelReply(text="", model=model, latency_s=latency, usage=Usage(calls=1))
    choices = getattr(response, "choices", None) or []
    message = getattr(choices[0], "message", None) if choices else None
    text = content_text(getattr(message, "content", None)) if message is not None else ""
    undecoded: dict[str, Any] = {}
    calls, errors = normalise_tool_calls((getattr(message, "tool_calls", None) or []) if message is not None else [],
                                         undecoded)
    finish = getattr(choices[0], "finish_reason", None) if choices else None
    usage = usage_of(response, local=local)
    from thinkflow.model.cache import served_from_cache

    return ModelReply(text=text, tool_calls=calls, finish_reason=finish, usage=usage, model=model,
                      response=response_details(response, message, undecoded),
                      latency_s=latency, argument_errors=errors, cached=served_from_cache(response))


_RESPONSE_FIELDS = ("id", "model", "created", "system_fingerprint")
_READ_MESSAGE_FIELDS = frozenset({"role", "content", "tool_calls", "function_call"})


def response_details(response: Any, message: Any, undecoded: Mapping[str, Any]) -> dict[str, Any]:
    """What a provider's response holds beyond what :class:`ModelReply` reads (text, tool calls, finish reason,
    usage), for the trace, as a JSON-ready dict: ``id``, ``model`` (the provider's name of the model that
    answered), ``created`` and ``system_fingerprint`` when set; ``message``: the message's other fields that are
    set (``reasoning_content``, ``annotations``, ``provider_specific_fields``, ...); ``arguments``: ``undecoded``
    (per call id, the arguments text as sent of each call whose arguments could not be decoded) with JSON's
    ``\\uXXXX`` and ``\\/`` escapes written as their characters, so that the trace's redaction finds a secret
    the model spelled in escapes.

    The whole response (``response.model_dump()``, about 1 KB a step for a tool call) repeated the text and the
    calls of its own line, and encoding it cost more than the rest of the line (bench/RESULTS.md, the loop)."""
    out: dict[str, Any] = {}
    for name in _RESPONSE_FIELDS:
        value = getattr(response, name, None)
        if value is not None and value != "":
            out[name] = value
    fields = message if isinstance(message, Mapping) else getattr(message, "__dict__", None)
    extra = {k: valid_unicode_in(_plain(v)) for k, v in (fields or {}).items()
             if k not in _READ_MESSAGE_FIELDS and not k.startswith("_") and v not in (None, "", [], {})}
    if extra:
        out["message"] = extra
    if undecoded:
        out["arguments"] = {call_id: _unescaped(text) if isinstance(text, str) else valid_unicode_in(_plain(text))
                            for call_id, text in undecoded.items()}
    return out


_ESCAPE = re.compile(r"\\u([0-9a-fA-F]{4})|\\/")


def _unescaped(text: str) -> str:
    """``text`` with JSON's ``\\uXXXX`` and ``\\/`` escapes as their characters (valid Unicode after)."""
    if "\\" not in text:
        return valid_unicode(text)
    return valid_unicode(_ESCAPE.sub(lambda m: chr(int(m.group(1), 16)) if m.group(1) else "/", text))


def _plain(value: Any) -> Any:
    """``value`` with pydantic models (LiteLLM's response parts) as dicts, lists and tuples as lists."""
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        try:
            return dump()
        except Exception:  # noqa: BLE001 - a part that cannot dump itself is written as text
            return str(value)
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


def usage_of(response: Any, *, local: bool) -> Usage:
    """Tokens and cost (USD) of one response: LiteLLM's ``response_cost`` when it priced the call, else
    ``completion_cost``; 0.0 for the embedded model; None when the model has no price."""
    u = getattr(response, "usage", None)
    prompt = int(getattr(u, "prompt_tokens", 0) or 0)
    completion = int(getattr(u, "completion_tokens", 0) or 0)
    total = int(getattr(u, "total_tokens", 0) or 0) or prompt + completion
    cost: float | None
    hidden = getattr(response, "_hidden_params", None) or {}
    if local:
        cost = 0.0
    elif "response_cost" in hidden:  # LiteLLM already priced the call (None: the model has no price)
        cost = float(hidden["response_cost"]) if hidden["response_cost"] is not None else None
    else:  # e.g. a reply rebuilt from stream chunks
        try:
            cost = float(load_litellm().completion_cost(completion_response=response))
        except Exception:  # model not in LiteLLM's price map
            cost = None
    return Usage(prompt_tokens=prompt, completion_tokens=completion, total_tokens=total, cost_usd=cost, calls=1)
