"""The actions a model reply turns into, and what the parser says back when a reply cannot be used.

:class:`ToolAction`, :class:`FinalAnswer` and :class:`ParseFailure` (the :data:`Action` union), tool-name matching,
the exact expected-format text for each style, and the decoding of one call's arguments. Pure functions, no I/O;
shared by :mod:`thinkflow.reply.parsing` and :mod:`thinkflow.reply.react_text`.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any, Literal, Mapping, Sequence

from thinkflow.model.messages import ArgumentsError, ToolCall, decode_arguments

Style = Literal["native", "json", "react"]
FINAL_ACTION = "final_answer"
FINAL_ALIASES = {"final_answer", "final answer", "finalanswer", "final", "answer", "finish"}


@dataclass(frozen=True)
class ToolAction:
    """Run these tool calls, in order.

    Attributes:
        calls: the tool calls (names matched to known tools where possible; ids unique in the reply).
        thought: the model's reasoning text that came with the calls ("" when none).
        errors: per call id, why that call's arguments are unusable; such a call is answered with the error and
            never run.
        source: where the calls came from: "native" (provider tool_calls), "json", "react" or "text" (recovered
            from the content).
    """

    calls: tuple[ToolCall, ...]
    thought: str = ""
    errors: dict[str, str] = field(default_factory=dict)
    source: str = "native"

    kind = "tool"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form for the trace."""
        return {
            "kind": "tool",
            "source": self.source,
            "thought": self.thought,
            "calls": [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in self.calls],
            "errors": dict(self.errors),
        }


@dataclass(frozen=True)
class FinalAnswer:
    """Finish with this answer.

    Attributes:
        text: the answer as shown to the user.
        thought: the reasoning that came with it.
        data: the answer as the model structured it (a dict/list from a JSON ``action_input``), else None.
    """

    text: str
    thought: str = ""
    data: Any = None

    kind = "final"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form for the trace."""
        return {"kind": "final", "text": self.text, "thought": self.thought, "data": self.data}


@dataclass(frozen=True)
class ParseFailure:
    """The reply could not be turned into an action.

    Attributes:
        message: the observation for the model: what went wrong and exactly which format is expected.
        error: the parser's own error (for the trace).
        kind: "empty" (no text, no tool calls), "format" (no action in the expected format), "arguments"
            (an action whose arguments cannot be decoded) or "schema_echo" (the reply is a tool's parameter schema,
            copied from the tool definitions, instead of an answer).
        thought: any reasoning text found.
    """

    message: str
    error: str
    kind: Literal["empty", "format", "arguments", "schema_echo"] = "format"
    thought: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form for the trace."""
        return {"kind": "error", "error_kind": self.kind, "error": self.error, "message": self.message}


Action = ToolAction | FinalAnswer | ParseFailure


# --------------------------------------------------------------------------------------------------------------
# Tool names

NAME_STRIP = " \t\r\n*`'\"“”‘’「」『』<>[]:：.,;"


def match_tool_name(raw: str, tool_names: Sequence[str]) -> str:
    """Return the known tool ``raw`` names: exact match, else ignoring case and surrounding quotes/backticks/``*``,
    else the name before a ``(`` (small models copy the signature the prompt shows: ``calculator(expression:
    string)``); an unknown name comes back cleaned but otherwise as written."""
    if raw in tool_names:
        return raw
    clean = raw.strip().strip(NAME_STRIP).strip()
    for candidate in dict.fromkeys((clean, clean.split("(", 1)[0].strip())):
        if candidate in tool_names:
            return candidate
        folded = candidate.casefold()
        for name in tool_names:
            if name.casefold() == folded:
                return name
    return clean


NO_TOOL_NAMES = {"none", "n/a", "na", "null", "nil", "no tool", "no_tool", "no-tool", "no action", "no_action",
                 "nothing", ""}
"""What a model writes as the action when it wants no tool (compared case-insensitively, quotes stripped)."""


def is_no_tool(raw: str) -> bool:
    """True when an action name ``raw`` means "no tool" (``None``, ``N/A``, empty, ...)."""
    return raw.strip().strip(NAME_STRIP).strip().casefold() in NO_TOOL_NAMES


def is_final_name(name: str) -> bool:
    """True when ``name`` is one of the ways a model writes the final-answer action."""
    return name.strip().strip(NAME_STRIP).casefold().replace("-", "_") in FINAL_ALIASES


# --------------------------------------------------------------------------------------------------------------
# Expected formats (the observation sent back on a failure)


def describe_keys(schema: Mapping[str, Any] | None) -> str:
    """``"expression (string, required), precision (integer)"`` for a tool's parameter schema; "no arguments"."""
    props = (schema or {}).get("properties") or {}
    required = set((schema or {}).get("required") or ())
    if not props:
        return "no arguments"
    parts = []
    for key, sub in props.items():
        kind = sub.get("type", "any") if isinstance(sub, dict) else "any"
        if isinstance(kind, list):
            kind = "|".join(str(k) for k in kind)
        parts.append(f"{key} ({kind}{', required' if key in required else ''})")
    return ", ".join(parts)


def expected_format(style: Style, tool_names: Sequence[str]) -> str:
    """The exact reply format the parser expects in ``style``, naming the tools."""
    names = ", ".join(tool_names) or "(no tools)"
    if style == "json":
        tools = ", ".join(tool_names) or "(no tools)"
        return (
            "Reply with exactly one JSON object and nothing else. To answer (also when no tool fits the question):\n"
            '{"thought": "<your reasoning>", "actions": [{"action": "final_answer", "action_input": "<the answer>"}]}\n'
            "To use tools (one or several calls at once; tools: " + tools + "):\n"
            '{"thought": "<your reasoning>", "actions": [{"action": "<tool name>", "action_input": {<its arguments>}}]}'
        )
    if style == "react":
        return (
            "Use exactly this format:\n"
            "Thought: <your reasoning>\n"
            "Final Answer: <the answer, when you know it or no tool fits the question>\n"
            "or, to use a tool:\n"
            "Thought: <your reasoning>\n"
            f"Action: <one tool name, one of: {names}>\n"
            "Action Input: <a JSON object with the tool's arguments>"
        )
    return (f"Reply with the final answer as plain text when you know it or no tool fits the question, or call one "
            f"of the tools ({names}) through the function-calling interface.")


def is_schema_echo(value: Any) -> bool:
    """True when ``value`` looks like a JSON Schema of an object (``{"type": "object", "properties": {...}}``), the
    shape a small model echoes in place of arguments or of an answer (Qwen2.5-Coder 1.5B under
    ``loop.answer_tool``)."""
    return (isinstance(value, dict) and value.get("type") == "object" and isinstance(value.get("properties"), dict)
            and set(value) <= {"type", "properties", "required", "additionalProperties", "description", "title"})


def echoes_schemas(action: Any) -> bool:
    """True when ``action`` (a parsed reply) copies tool definitions instead of acting: a ParseFailure of kind
    ``schema_echo``, or tool calls whose arguments are all parameter schemas (:func:`is_schema_echo`)."""
    if isinstance(action, ParseFailure):
        return action.kind == "schema_echo"
    calls = getattr(action, "calls", ())
    return bool(calls) and all(is_schema_echo(call.arguments) for call in calls)


def failure(style: Style, tool_names: Sequence[str], error: str, kind: str = "format", thought: str = "") -> ParseFailure:
    """A :class:`ParseFailure` whose message states ``error`` and the expected format of ``style``."""
    message = f"Your last reply could not be used: {error}\n{expected_format(style, tool_names)}"
    return ParseFailure(message=message, error=error, kind=kind, thought=thought)  # type: ignore[arg-type]


def final_answer_format(style: Style) -> str:
    """How to give the final answer in ``style`` (the reminder sent when a reply names no tool)."""
    if style == "json":
        return '{"thought": "<your reasoning>", "action": "final_answer", "action_input": "<the answer>"}'
    if style == "react":
        return "Thought: <your reasoning>\nFinal Answer: <the answer>"
    return "reply with the answer as plain text, without calling a tool"


def no_tool_failure(style: Style, tool_names: Sequence[str], raw: str, thought: str = "") -> ParseFailure:
    """A ``kind="format"`` :class:`ParseFailure` for an action that names no tool (``raw``: ``None``, ``N/A``, empty):
    nothing was run; to finish, give the final answer (exactly how, in ``style``), else call one of the tools."""
    shown = f"'{raw}'" if raw else "nothing"
    error = f"the action names no tool ({shown}), so nothing was run"
    tools = ", ".join(tool_names) or "(no tools)"
    message = (
        f"Your last reply could not be used: {error}.\n"
        f"If you need no tool, give your final answer now, in this format:\n{final_answer_format(style)}\n"
        f"If you do need a tool, call one of: {tools}."
    )
    return ParseFailure(message=message, error=error, kind="format", thought=thought)


def arguments_failure(style: Style, tools: Mapping[str, Any], name: str, error: str, thought: str) -> ParseFailure:
    """A ``kind="arguments"`` :class:`ParseFailure` for tool ``name``: the error and the keys it expects."""
    keys = describe_keys(tools.get(name))
    text = f"the arguments for tool '{name}' are not a JSON object: {error}. Expected a JSON object with: {keys}."
    return ParseFailure(
        message=f"Your last reply could not be used: {text}\n{expected_format(style, list(tools))}",
        error=error,
        kind="arguments",
        thought=thought,
    )


def new_call_id() -> str:
    """A fresh tool-call id, ``call_<12 hex>``."""
    return "call_" + uuid.uuid4().hex[:12]


def required_params(schema: Any) -> list[str]:
    """The required parameter names of a tool's parameters JSON Schema ([] when none or no schema)."""
    return list((schema or {}).get("required") or ()) if isinstance(schema, dict) else []


def decode_input(name: str, raw_args: Any, tools: Mapping[str, Any]) -> dict[str, Any]:
    """The arguments of a call to tool ``name`` written as ``raw_args`` (dict, JSON text, near-JSON): decoded with
    :func:`~thinkflow.model.messages.decode_arguments`; a missing or empty input means ``{}`` only for a tool with no
    required parameters. Raises ArgumentsError."""
    if raw_args is None or (isinstance(raw_args, str) and not raw_args.strip()):
        if required_params(tools.get(name)):
            raise ArgumentsError("no arguments were given but the tool has required parameters")
        return {}
    return decode_arguments(raw_args)


def tool_from_input(
    name: str, raw_args: Any, style: Style, tools: Mapping[str, Any], thought: str, source: str
) -> Action:
    """A one-call :class:`ToolAction` for ``name`` with ``raw_args`` decoded, or the arguments
    :class:`ParseFailure`."""
    try:
        args = decode_input(name, raw_args, tools)
    except ArgumentsError as error:
        return arguments_failure(style, tools, name, str(error), thought)
    return ToolAction((ToolCall(new_call_id(), name, args),), thought=thought, source=source)
