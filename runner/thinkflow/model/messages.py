"""Provider-neutral chat messages, tool calls, model replies and usage.

The wire shape follows the OpenAI chat-completions format (``role``/``content``/``tool_calls``/``tool_call_id``),
which LiteLLM accepts for every provider. No I/O happens here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from thinkflow.model import json_limits
from thinkflow.model.repair_check import repair_changed

Role = Literal["system", "user", "assistant", "tool"]


@dataclass(frozen=True)
class ToolCall:
    """A request from the model to run one tool.

    Attributes:
        id: the call id that the tool result must echo (unique within a reply).
        name: the tool name as the model wrote it.
        arguments: the decoded arguments (always a dict).
    """

    id: str
    name: str
    arguments: dict[str, Any]

    def arguments_json(self) -> str:
        """The arguments as compact JSON (no spaces after separators), encoded once per call: the conversation
        re-sends every earlier call at each step."""
        text = self.__dict__.get("_arguments_json")
        if text is None:
            text = json.dumps(self.arguments, ensure_ascii=False, separators=(",", ":"))
            object.__setattr__(self, "_arguments_json", text)  # frozen: a cache, not a field
        return text

    def to_dict(self) -> dict[str, Any]:
        """Return the OpenAI ``tool_calls[]`` item: ``{"id", "type": "function", "function": {"name", "arguments"}}``
        (arguments as compact JSON: :meth:`arguments_json`)."""
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": self.arguments_json()}}


@dataclass(frozen=True)
class Message:
    """One chat message.

    Attributes:
        role: "system", "user", "assistant" or "tool".
        content: the text (never None; "" when an assistant message only holds tool calls).
        tool_calls: for assistant messages, the tool calls it made.
        tool_call_id: for tool messages, the id of the call this result answers.
        name: for tool messages, the tool's name.
    """

    role: Role
    content: str
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """Return the OpenAI chat-completions message dict."""
        out: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.tool_calls:
            out["tool_calls"] = [c.to_dict() for c in self.tool_calls]
        if self.tool_call_id is not None:
            out["tool_call_id"] = self.tool_call_id
        if self.name is not None:
            out["name"] = self.name
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Message":
        """Build a message from :meth:`to_dict` output (as stored in sessions). Raises KeyError/TypeError on bad shape."""
        calls = []
        for raw in data.get("tool_calls") or ():
            fn = raw["function"]
            args = fn.get("arguments") or "{}"
            calls.append(ToolCall(raw["id"], fn["name"], json.loads(args) if isinstance(args, str) else dict(args)))
        return cls(
            role=data["role"],
            content=data.get("content") or "",
            tool_calls=tuple(calls),
            tool_call_id=data.get("tool_call_id"),
            name=data.get("name"),
        )


@dataclass
class Usage:
    """Token counts and cost of one or more model calls.

    Attributes:
        prompt_tokens, completion_tokens, total_tokens: token counts as the provider (or LiteLLM) reported them.
        cost_usd: cost in US dollars from LiteLLM's price list, or None when the price is unknown.
        calls: how many model calls this covers.
    """

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    cost_usd: float | None = None
    calls: int = 0

    def add(self, other: "Usage") -> None:
        """Add ``other`` into this usage in place (cost stays None only if both are unknown)."""
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.total_tokens += other.total_tokens
        self.calls += other.calls
        if other.cost_usd is not None:
            self.cost_usd = (self.cost_usd or 0.0) + other.cost_usd

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict of the counts."""
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.total_tokens,
            "cost_usd": self.cost_usd,
            "calls": self.calls,
        }


USAGE_COUNTS = ("prompt_tokens", "completion_tokens", "total_tokens", "cost_usd", "calls")
"""The fields of :class:`Usage`: what a stored usage object (a trace line's, a cassette's) holds, each a number."""


@dataclass
class ModelReply:
    """A model's reply, normalised whatever the provider.

    Attributes:
        text: the message content as a string ("" when the model sent none).
        tool_calls: native tool calls, arguments decoded to dicts, ids unique.
        finish_reason: "stop", "tool_calls", "length", ... as reported, or None.
        usage: token counts and cost of this call.
        model: the model that actually answered (may be a fallback).
        response: what the provider's response held beyond these fields, as a JSON-ready dict for the trace (its
            id and model name, reasoning content, the arguments text of calls that could not be decoded; see
            :func:`thinkflow.model.replies.response_details`).
        latency_s: wall time of the call in seconds.
        argument_errors: per tool-call id, why its arguments could not be decoded (the call keeps ``{}``).
        cached: True when LiteLLM's response cache answered (no provider call was made).
    """

    text: str
    tool_calls: list[ToolCall] = field(default_factory=list)
    finish_reason: str | None = None
    usage: Usage = field(default_factory=Usage)
    model: str = ""
    response: dict[str, Any] | None = None
    latency_s: float = 0.0
    argument_errors: dict[str, str] = field(default_factory=dict)
    cached: bool = False

    def to_message(self) -> Message:
        """The assistant message to append to the history."""
        return Message("assistant", self.text, tuple(self.tool_calls))


class ArgumentsError(ValueError):
    """Tool-call arguments could not be decoded into a JSON object. The message is the decoder's exact error."""


def decode_arguments(raw: Any) -> dict[str, Any]:
    """Decode tool-call arguments as providers and small models send them into a dict.

    Accepts a dict; None, "" or whitespace (-> ``{}``); a JSON object string; a JSON string holding a JSON object
    string (double-encoded); and near-JSON that ``json_repair`` can fix (single quotes, Python ``None``/``True``,
    trailing commas, unquoted keys). Two objects one after the other (``{"a": 1}{"a": 2}``, calls glued together,
    whatever text lies between them) are refused, not merged or cut to one; empty objects before or after the object
    (``{}{"a": 1}``: a server that streamed ``{}`` before the real arguments) are ignored. A key with no value
    (``{"path": }``) is refused, not repaired into ``""``; so is a number with a leading zero (``0755``, ``09:30``:
    a repair would send 755 and 9). Raises :class:`ArgumentsError` with the decoder's message when the result is not
    a JSON object; never returns the raw string in place of arguments. Arguments cut off before their end (an
    unterminated string, an object still open) are refused as truncated, never repaired into a shorter value;
    arguments nested deeper than :data:`~thinkflow.model.json_limits.MAX_DEPTH` levels are refused (no
    ``RecursionError``); NaN, Infinity and floats beyond the float range are refused (JSON has no such numbers),
    also after a repair; near-JSON longer than :data:`~thinkflow.model.json_limits.MAX_REPAIR_CHARS` is not
    repaired.
    """
    value = raw
    for attempt in range(3):  # dict, JSON string, or a JSON string inside a JSON string
        if isinstance(value, dict):
            break
        if value is None or (isinstance(value, str) and not value.strip()):
            return {}
        if not isinstance(value, str) or (attempt and not value.lstrip().startswith("{")):
            # a JSON string that holds no object ('"sales.csv"') is a string, not text to decode again
            raise ArgumentsError(f"arguments must be a JSON object, got {type(value).__name__}")
        try:
            value = json_limits.loads(value)
        except json_limits.NestingError as error:
            raise ArgumentsError(f"arguments are {error}; send them with less nesting") from None
        except json_limits.NumberError as error:
            raise ArgumentsError(f"arguments hold a number JSON cannot carry: {error.msg}; send a finite number "
                                 "(or a string)") from None
        except json_limits.DuplicateKeyError as error:  # which of the two values was meant is not for us to guess
            raise ArgumentsError(f"arguments name {json.dumps(error.key)[:60]} twice; send each key once, with the "
                                 "one value meant") from None
        except json.JSONDecodeError as strict_error:
            value = _repair(value, strict_error)
    if isinstance(value, dict):
        if json_limits.too_deep(value):
            raise ArgumentsError(f"arguments are {json_limits.NestingError()}; send them with less nesting")
        return value
    raise ArgumentsError(f"arguments must be a JSON object, got {type(value).__name__}")


_JSON_SPACE_OR_COMMA = json_limits.JSON_SPACE | {","}


def _after_empty_objects(text: str, start: int = 0) -> int:
    """The index in ``text`` after the empty JSON objects (``{} { },``) from ``start`` on, and the space and commas
    between and after them; ``start`` when none is there. Linear in the span read."""
    i = end = start
    while True:
        while i < len(text) and text[i] in _JSON_SPACE_OR_COMMA:
            i += 1
        if i >= len(text) or text[i] != "{":
            return i if end > start else start
        j = i + 1
        while j < len(text) and text[j] in json_limits.JSON_SPACE:
            j += 1
        if j >= len(text) or text[j] != "}":
            return i if end > start else start
        i = end = j + 1


def _repair(text: str, strict_error: json.JSONDecodeError) -> Any:
    """Repair near-JSON with json_repair; raise ArgumentsError quoting the strict decoder's error if it can't, if
    the text was cut off, nests too deeply or is too long to repair."""
    at = " " if strict_error.msg.endswith(" at") else " at "  # "Unterminated string starting at"
    where = f"{strict_error.msg}{at}line {strict_error.lineno} column {strict_error.colno}"
    stripped = text.strip()
    if not stripped.startswith(("{", "[", '"')):
        raise ArgumentsError(f"arguments are not JSON: {where}")
    after = _after_empty_objects(stripped)
    if after and stripped.startswith("{", after):
        # '{}{"location": "Boston"}': a streamed call whose arguments began as "{}" before the real ones were
        # appended (a known server bug, vLLM among others): the empty objects say nothing
        return decode_arguments(stripped[after:])
    truncated = ArgumentsError(f"arguments are truncated JSON: {where}; the call was cut off, send the complete call")
    # The strict decoder reached the end of the text: inside a string ("Unterminated string") or a value still open.
    if strict_error.msg.startswith("Unterminated string") or strict_error.pos >= len(text.rstrip()):
        raise truncated
    if len(stripped) > json_limits.MAX_REPAIR_CHARS:
        if stripped[0] in "{[" and stripped[-1] not in "}]" and strict_error.msg != "Extra data":
            raise truncated
        raise ArgumentsError(f"arguments are not valid JSON: {where} (too long to repair: {len(stripped)} characters)")
    end, deepest, _ = json_limits.scan_end(stripped, 0)
    if deepest > json_limits.MAX_DEPTH:
        raise ArgumentsError(f"arguments are {json_limits.NestingError()}; send them with less nesting")
    if end is None:  # near-JSON cut off mid-value: a repair would invent the rest (a shorter string, a missing key)
        raise truncated
    rest = stripped[end:]
    if "{" in rest:
        if stripped[0] == "{" and _after_empty_objects(rest) == len(rest):  # '{"a": 1} {}': empty ones after it
            return decode_arguments(stripped[:end])
        # '[] {"cmd": "rm"}': an object after a value that is not one is no more the call's arguments
        # '{"a": 1}{"a": 2}', '{...}<|tool_call_end|>{...}': calls glued into one, whatever lies between them
        # (json_repair would keep the last object: a call the model did not make)
        raise ArgumentsError(f"arguments hold more than one JSON value ({where}); send one object with all of the "
                             "call's arguments, and one call per object")
    if json_limits.key_without_value(stripped):  # '{"path": }': a repair would invent "" for it
        raise ArgumentsError(f"arguments have a key with no value ({where}); send a value for every argument, or "
                             "leave the key out")
    zero = json_limits.leading_zero(stripped)
    if zero is not None:  # '{"mode": 0755}', '{"at": 09:30}': a repair would send 755, or 9
        raise ArgumentsError(f"arguments have a number with a leading zero ({zero}), which JSON does not allow; "
                             f"send it as a string if the zeros matter (\"{zero}\"), else without them")
    import json_repair

    try:
        repaired = json_repair.loads(stripped)
    except Exception:  # noqa: BLE001 - a third-party repair of untrusted text: any failure means "not JSON"
        repaired = None
    if isinstance(repaired, dict) and (repaired or stripped.replace(" ", "") == "{}"):
        changed = repair_changed(stripped, repaired)
        if changed is not None:  # '{"at": 9:30}' -> 9, '{"n": 2*21}' -> 2, '{"a" 1}' -> "": values not written
            raise ArgumentsError(f"arguments are not valid JSON near `{changed}` ({where}), and cannot be read as "
                                 "written; send JSON: quote each text value, one value per key, commas between items")
        if json_limits.non_finite(repaired):
            raise ArgumentsError(f"arguments hold a number JSON cannot carry (NaN or Infinity): {where}")
        if json_limits.too_deep(repaired):
            raise ArgumentsError(f"arguments are {json_limits.NestingError()}; send them with less nesting")
        return repaired
    raise ArgumentsError(f"arguments are not valid JSON: {where}")
