"""Turn a model reply into one action: run tools, finish with an answer, or tell the model what went wrong.

One parser, pure functions, no I/O. :func:`parse_reply` applies these rules in this fixed order and stops at the
first that yields an action:

1. Normalise: the content becomes a string (``None`` -> "", a list of parts -> their text joined); reasoning
   blocks ``<think>...</think>`` are cut out and kept as the thought.
2. Native tool calls (style ``native``, or whenever the provider returned ``tool_calls``): every call is kept, in
   order; its name is matched to a known tool (rule 7) and its arguments must have decoded (a call whose arguments
   could not be decoded keeps its error in :attr:`ToolAction.errors` and is never run).
3. Empty: no text and no tool calls -> :class:`ParseFailure` with ``kind="empty"``.
4. The style's own format:
   - ``json``: the first JSON object holding an ``"action"`` key, looking in fenced blocks (```json, ```, ~~~)
     first, then at every ``{`` of the text in order. Objects are decoded with ``json.JSONDecoder().raw_decode``
     (so prose after the object, braces and backticks inside strings are fine); only when no object decodes
     strictly is near-JSON repaired with ``json_repair`` (never a cut-off object: a guess would invent values).
   - ``react``: labelled lines ``Thought:`` / ``Action:`` / ``Action Input:`` / ``Observation:`` /
     ``Final Answer:`` (any case, wrapped in ``**``/``__``/backticks, ASCII or full-width colon ``：``). Whichever
     of the first ``Action`` and the first ``Final Answer`` comes first wins: an action runs and everything after
     it (an invented ``Observation:``, a ``Final Answer:``) is discarded. The tool name is on the label's line or,
     if that is empty, on the next non-empty line.
5. Recovery, whatever the style: a tool call written in the text -- inside ``<tool_call>...</tool_call>`` tags,
   in a fenced block, or bare -- in one of the shapes ``{"name", "arguments"}``, ``{"name", "parameters"}``,
   ``{"function": {"name", "arguments"}}``, ``{"action", "action_input"}`` or ``{"tool_calls": [...]}``, is run
   when its name is a known tool (inside ``<tool_call>`` tags it is a tool call whatever the name);
   ``{"action": "final_answer", "action_input": ...}`` finishes. Then ReAct labels (an ``Action:`` naming a known
   tool, or a ``Final Answer:``) are honoured in the other styles too.
6. Otherwise: in ``native`` style the text is the final answer (a leading ``Final Answer:`` label removed); in
   ``json`` and ``react`` style it is a :class:`ParseFailure` (``kind="format"``) whose message states exactly the
   expected format.
7. Tool names are compared exactly, then ignoring case, surrounding quotes, backticks and ``*``; an unknown name
   is kept as written (the loop answers it with the list of available tools).

Arguments (rule 2, 4, 5) go through :func:`thinkflow.messages.decode_arguments` (dict, JSON string, double-encoded
string, near-JSON repaired). When they cannot be decoded the model gets the decoder's exact error and the expected
keys; a tool is never called with ``{}`` or with the raw string in place of its arguments. A missing or empty
``Action Input`` means ``{}`` only for a tool with no required parameters.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass, field
from typing import Any, Iterator, Literal, Mapping, Sequence

from .messages import ArgumentsError, ToolCall, decode_arguments

Style = Literal["native", "json", "react"]
FINAL_ACTION = "final_answer"
_FINAL_ALIASES = {"final_answer", "final answer", "finalanswer", "final", "answer", "finish"}

_decoder = json.JSONDecoder()


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
        kind: "empty" (no text, no tool calls), "format" (no action in the expected format) or "arguments"
            (an action whose arguments cannot be decoded).
        thought: any reasoning text found.
    """

    message: str
    error: str
    kind: Literal["empty", "format", "arguments"] = "format"
    thought: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form for the trace."""
        return {"kind": "error", "error_kind": self.kind, "error": self.error, "message": self.message}


Action = ToolAction | FinalAnswer | ParseFailure


# --------------------------------------------------------------------------------------------------------------
# Rule 1: normalising content


def as_text(content: Any) -> str:
    """Return message content as a string: None -> "", list of parts -> their ``text`` joined, other -> ``str``."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, (list, tuple)):
        parts = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict):
                value = part.get("text", part.get("content"))
                if isinstance(value, str):
                    parts.append(value)
        return "".join(parts)
    if isinstance(content, dict):
        return as_text(content.get("text", content.get("content")))
    return str(content)


_THINK = re.compile(r"<(think|thinking|reasoning)>(.*?)(?:</\1>|\Z)", re.S | re.I)


def split_reasoning(text: str) -> tuple[str, str]:
    """Cut ``<think>...</think>`` blocks out of ``text``; return ``(text_without_them, reasoning)``."""
    thoughts = [m.group(2).strip() for m in _THINK.finditer(text)]
    if not thoughts:
        return text, ""
    return _THINK.sub("", text), "\n".join(t for t in thoughts if t)


# --------------------------------------------------------------------------------------------------------------
# Rule 7: tool names

_NAME_STRIP = " \t\r\n*`'\"“”‘’「」『』<>[]:：.,;"


def match_tool_name(raw: str, tool_names: Sequence[str]) -> str:
    """Return the known tool ``raw`` names: exact match, else ignoring case and surrounding quotes/backticks/``*``;
    an unknown name comes back cleaned but otherwise as written."""
    if raw in tool_names:
        return raw
    clean = raw.strip().strip(_NAME_STRIP).strip()
    if clean in tool_names:
        return clean
    folded = clean.casefold()
    for name in tool_names:
        if name.casefold() == folded:
            return name
    return clean


def _is_final_name(name: str) -> bool:
    return name.strip().strip(_NAME_STRIP).casefold().replace("-", "_") in _FINAL_ALIASES


# --------------------------------------------------------------------------------------------------------------
# JSON found in text

_FENCE = re.compile(r"^[ \t]*(```|~~~)[^\n]*\n", re.M)
_TOOL_CALL_TAG = re.compile(r"<tool_call>", re.I)


@dataclass(frozen=True)
class _Found:
    value: Any
    start: int
    end: int
    fenced: bool
    tagged: bool


def iter_json_objects(text: str) -> Iterator[_Found]:
    """Yield every JSON object in ``text`` that decodes strictly: those opening a fenced block first, then one at
    each ``{`` in order (skipping over objects already decoded). Decoding uses ``raw_decode`` from the brace, so the
    decoder -- not a pattern -- decides where the object ends."""
    seen: set[int] = set()
    tag_spans = [m.end() for m in _TOOL_CALL_TAG.finditer(text)]

    def tagged(pos: int) -> bool:
        return any(0 <= pos - end and not text[end:pos].strip() for end in tag_spans)

    for fence in _FENCE.finditer(text):
        pos = fence.end()
        while pos < len(text) and text[pos] in " \t\r\n":
            pos += 1
        if pos < len(text) and text[pos] == "{":
            try:
                value, end = _decoder.raw_decode(text, pos)
            except json.JSONDecodeError:
                continue
            seen.add(pos)
            yield _Found(value, pos, end, True, tagged(pos))
    pos = text.find("{")
    while pos != -1:
        if pos in seen:
            pos = text.find("{", pos + 1)
            continue
        try:
            value, end = _decoder.raw_decode(text, pos)
        except json.JSONDecodeError:
            pos = text.find("{", pos + 1)
            continue
        yield _Found(value, pos, end, False, tagged(pos))
        pos = text.find("{", end)


def _repair_objects(text: str) -> Iterator[_Found]:
    """Near-JSON objects (single quotes, Python literals, trailing commas, unquoted keys), repaired with json_repair,
    at each ``{`` in order (fenced blocks first). A cut-off object is never repaired."""
    import json_repair

    starts: list[int] = []
    for fence in _FENCE.finditer(text):
        pos = fence.end()
        while pos < len(text) and text[pos] in " \t\r\n":
            pos += 1
        if pos < len(text) and text[pos] == "{":
            starts.append(pos)
    pos = text.find("{")
    while pos != -1:
        if pos not in starts:
            starts.append(pos)
        pos = text.find("{", pos + 1)
    for start in starts:
        end = _balanced_end(text, start)
        if end is None:
            continue  # cut off: a repair would invent the rest
        value = json_repair.loads(text[start:end])
        if isinstance(value, list) and value and isinstance(value[0], dict):
            value = value[0]
        if isinstance(value, dict) and value:
            yield _Found(value, start, len(text), False, False)


def _balanced_end(text: str, start: int) -> int | None:
    """End index of the near-JSON object opening at ``text[start] == "{"``: brackets are counted outside string
    literals (double- or single-quoted, backslash escapes honoured). None when the object never closes."""
    depth, quote, i = 0, "", start
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == "\\":
                i += 1
            elif ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return None


def _cut_fence(chunk: str) -> str:
    """Drop a closing fence and what follows it (used only before repairing near-JSON)."""
    for fence in ("\n```", "\n~~~", "```", "~~~"):
        idx = chunk.find(fence)
        if idx != -1:
            return chunk[:idx]
    return chunk


def _tool_call_shapes(value: Any) -> list[tuple[str, Any]] | None:
    """If ``value`` is shaped like a tool call (or a list of them), return ``[(name, raw_arguments), ...]``."""
    if isinstance(value, list):
        out: list[tuple[str, Any]] = []
        for item in value:
            shapes = _tool_call_shapes(item)
            if not shapes:
                return None
            out.extend(shapes)
        return out or None
    if not isinstance(value, dict):
        return None
    if isinstance(value.get("tool_calls"), list):
        return _tool_call_shapes(value["tool_calls"])
    fn = value.get("function")
    if isinstance(fn, dict) and isinstance(fn.get("name"), str):
        return [(fn["name"], fn.get("arguments", fn.get("parameters")))]
    if isinstance(value.get("name"), str) and ("arguments" in value or "parameters" in value):
        return [(value["name"], value.get("arguments", value.get("parameters")))]
    if isinstance(value.get("action"), str) and "action_input" in value:
        return [(value["action"], value["action_input"])]
    return None


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
        return (
            "Reply with exactly one JSON object and nothing else:\n"
            '{"thought": "<your reasoning>", "action": "<one of: ' + ", ".join([*tool_names, FINAL_ACTION]) + '>", '
            '"action_input": <a JSON object with the tool\'s arguments, or the answer text when the action is '
            '"final_answer">}'
        )
    if style == "react":
        return (
            "Use exactly this format:\n"
            "Thought: <your reasoning>\n"
            f"Action: <one tool name, one of: {names}>\n"
            "Action Input: <a JSON object with the tool's arguments>\n"
            "or, when you know the answer:\n"
            "Thought: <your reasoning>\n"
            "Final Answer: <the answer>"
        )
    return f"Call one of the tools ({names}) through the function-calling interface, or reply with the final answer as plain text."


def _failure(style: Style, tool_names: Sequence[str], error: str, kind: str = "format", thought: str = "") -> ParseFailure:
    message = f"Your last reply could not be used: {error}\n{expected_format(style, tool_names)}"
    return ParseFailure(message=message, error=error, kind=kind, thought=thought)  # type: ignore[arg-type]


def _arguments_failure(style: Style, tools: Mapping[str, Any], name: str, error: str, thought: str) -> ParseFailure:
    keys = describe_keys(tools.get(name))
    text = f"the arguments for tool '{name}' are not a JSON object: {error}. Expected a JSON object with: {keys}."
    return ParseFailure(
        message=f"Your last reply could not be used: {text}\n{expected_format(style, list(tools))}",
        error=error,
        kind="arguments",
        thought=thought,
    )


def _new_id() -> str:
    return "call_" + uuid.uuid4().hex[:12]


def _required(schema: Any) -> list[str]:
    return list((schema or {}).get("required") or ()) if isinstance(schema, dict) else []


# --------------------------------------------------------------------------------------------------------------
# The parser


def parse_reply(
    text: Any,
    tool_calls: Sequence[ToolCall] = (),
    *,
    style: Style,
    tools: Mapping[str, Mapping[str, Any] | None],
    argument_errors: Mapping[str, str] | None = None,
) -> Action:
    """Turn one model reply into an :data:`Action` by the rules in this module's docstring.

    Args:
        text: the reply content (str, None or a list of parts).
        tool_calls: native tool calls from the provider (arguments already decoded to dicts).
        style: the action style in force: "native", "json" or "react".
        tools: known tool names -> their parameters JSON Schema (or None), in the order shown to the model.
        argument_errors: per native call id, why its arguments could not be decoded.
    Returns:
        ToolAction, FinalAnswer or ParseFailure. Never raises for anything a model can say.
    """
    names = list(tools)
    raw = as_text(text)
    body, reasoning = split_reasoning(raw)

    # Rule 2: native tool calls.
    if tool_calls:
        calls, errors, seen_ids = [], {}, set()
        for call in tool_calls:
            call_id = call.id if call.id and call.id not in seen_ids else _new_id()
            seen_ids.add(call_id)
            name = match_tool_name(call.name, names)
            calls.append(ToolCall(call_id, name, dict(call.arguments) if isinstance(call.arguments, dict) else {}))
            err = (argument_errors or {}).get(call.id)
            if err:
                errors[call_id] = f"{err}. Expected a JSON object with: {describe_keys(tools.get(name))}."
        thought = "\n".join(t for t in (reasoning, body.strip()) if t)
        return ToolAction(tuple(calls), thought=thought, errors=errors, source="native")

    # Rule 3: empty.
    if not body.strip():
        if reasoning:
            return _failure(style, names, "the reply held only reasoning, no action and no answer", "format", reasoning)
        return ParseFailure(
            message="Your last reply was empty. " + expected_format(style, names),
            error="empty reply",
            kind="empty",
        )

    # Rule 4: the style's own format.
    if style == "json":
        action = _parse_json_action(body, style, tools, reasoning)
        if action is not None:
            return action
    elif style == "react":
        action = _parse_react(body, style, tools, reasoning, known_only=False)
        if action is not None:
            return action

    # Rule 5: recovery of tool calls written as text, then ReAct labels.
    recovered = _recover_text_calls(body, style, tools, reasoning)
    if recovered is not None:
        return recovered
    if style != "react":
        action = _parse_react(body, style, tools, reasoning, known_only=True)
        if action is not None:
            return action

    # Rule 6.
    if style == "native":
        return FinalAnswer(_strip_final_label(body).strip(), thought=reasoning)
    if style == "json":
        return _failure(style, names, "no JSON object with an \"action\" key was found", thought=reasoning)
    return _failure(style, names, "no 'Action:' or 'Final Answer:' line was found", thought=reasoning)


def _final_from_input(value: Any, thought: str) -> FinalAnswer:
    """A FinalAnswer from a JSON ``action_input``: a string as is; ``{"answer": "..."}``-like single keys unwrapped;
    other structures as compact JSON text (``data`` keeps the structure)."""
    if isinstance(value, str):
        return FinalAnswer(value.strip(), thought=thought)
    if value is None:
        return FinalAnswer("", thought=thought)
    if isinstance(value, dict) and len(value) == 1:
        (key, inner), = value.items()
        if key in ("answer", "text", "final_answer", "response", "result", "output") and isinstance(inner, str):
            return FinalAnswer(inner.strip(), thought=thought, data=value)
    if isinstance(value, (dict, list)):
        return FinalAnswer(json.dumps(value, ensure_ascii=False), thought=thought, data=value)
    return FinalAnswer(str(value), thought=thought, data=value)


def _tool_from_input(
    name: str, raw_args: Any, style: Style, tools: Mapping[str, Any], thought: str, source: str
) -> Action:
    try:
        if raw_args is None or (isinstance(raw_args, str) and not raw_args.strip()):
            if _required(tools.get(name)):
                raise ArgumentsError("no arguments were given but the tool has required parameters")
            args: dict[str, Any] = {}
        else:
            args = decode_arguments(raw_args)
    except ArgumentsError as error:
        return _arguments_failure(style, tools, name, str(error), thought)
    return ToolAction((ToolCall(_new_id(), name, args),), thought=thought, source=source)


def _parse_json_action(body: str, style: Style, tools: Mapping[str, Any], reasoning: str) -> Action | None:
    names = list(tools)
    found = next((f for f in iter_json_objects(body) if isinstance(f.value, dict) and "action" in f.value), None)
    if found is None:
        found = next((f for f in _repair_objects(body) if "action" in f.value), None)
    if found is None:
        return None
    obj = found.value
    thought = "\n".join(t for t in (reasoning, as_text(obj.get("thought")).strip()) if t)
    action = obj.get("action")
    if isinstance(action, dict):  # {"action": {"name": ..., "arguments": ...}}
        shapes = _tool_call_shapes(action) or _tool_call_shapes({"function": action})
        if not shapes:
            return _failure(style, names, '"action" must be a tool name or "final_answer"', thought=thought)
        action, obj = shapes[0][0], {"action": shapes[0][0], "action_input": shapes[0][1]}
    if not isinstance(action, str) or not action.strip():
        return _failure(style, names, '"action" must be a tool name or "final_answer"', thought=thought)
    name = match_tool_name(action, names)
    if name not in names and _is_final_name(action):
        return _final_from_input(obj.get("action_input", obj.get("answer")), thought)
    if "action_input" not in obj:
        if _required(tools.get(name)):
            return _arguments_failure(style, tools, name, 'the object has no "action_input" key', thought)
        return ToolAction((ToolCall(_new_id(), name, {}),), thought=thought, source="json")
    return _tool_from_input(name, obj["action_input"], style, tools, thought, "json")


def _recover_text_calls(body: str, style: Style, tools: Mapping[str, Any], reasoning: str) -> Action | None:
    names = list(tools)
    calls: list[ToolCall] = []
    errors: dict[str, str] = {}
    for found in iter_json_objects(body):
        shapes = _tool_call_shapes(found.value)
        if not shapes:
            continue
        for raw_name, raw_args in shapes:
            name = match_tool_name(raw_name, names)
            if name not in names:
                if _is_final_name(raw_name) and isinstance(found.value, dict):
                    if calls:
                        continue
                    thought = "\n".join(t for t in (reasoning, as_text(found.value.get("thought")).strip()) if t)
                    return _final_from_input(raw_args, thought)
                if not found.tagged:
                    continue
            call_id = _new_id()
            try:
                if raw_args is None or (isinstance(raw_args, str) and not raw_args.strip()):
                    if _required(tools.get(name)):
                        raise ArgumentsError("no arguments were given but the tool has required parameters")
                    args: dict[str, Any] = {}
                else:
                    args = decode_arguments(raw_args)
            except ArgumentsError as error:
                args = {}
                errors[call_id] = f"{error}. Expected a JSON object with: {describe_keys(tools.get(name))}."
            calls.append(ToolCall(call_id, name, args))
    if not calls:
        return None
    thought = reasoning
    if style != "native" and len(calls) == 1 and errors:
        return _arguments_failure(style, tools, calls[0].name, errors[calls[0].id].split(". Expected")[0], thought)
    return ToolAction(tuple(calls), thought=thought, errors=errors, source="text")


# ReAct labels: at the start of a line, optionally wrapped in **, __ or backticks, ASCII or full-width colon.
_LABEL = re.compile(
    r"^[ \t]*(?:[>#*_`~-]+[ \t]*)*"
    r"(?P<label>thought|action[ \t_-]*input|action|observation|final[ \t_-]*answer)"
    r"[ \t]*(?:[*_`]+[ \t]*)*[:：](?:[ \t]*[*_]{1,2}(?=[ \t]|$))?[ \t]*",
    re.I | re.M,
)


def _label_kind(label: str) -> str:
    folded = re.sub(r"[ \t_-]+", "", label.casefold())
    return {"thought": "thought", "actioninput": "input", "action": "action", "observation": "observation",
            "finalanswer": "final"}[folded]


def _parse_react(body: str, style: Style, tools: Mapping[str, Any], reasoning: str, *, known_only: bool) -> Action | None:
    names = list(tools)
    labels = [(m, _label_kind(m.group("label"))) for m in _LABEL.finditer(body)]
    first_action = next((i for i, (_, k) in enumerate(labels) if k == "action"), None)
    first_final = next((i for i, (_, k) in enumerate(labels) if k == "final"), None)
    if first_action is None and first_final is None:
        return None
    lead_end = labels[min(i for i in (first_action, first_final) if i is not None)][0].start()
    thought = _strip_thought_label(body[:lead_end]).strip()
    thought = "\n".join(t for t in (reasoning, thought) if t)

    if first_action is not None and (first_final is None or first_action < first_final):
        match = labels[first_action][0]
        section_end = labels[first_action + 1][0].start() if first_action + 1 < len(labels) else len(body)
        section = body[match.end():section_end]
        lines = [ln for ln in section.splitlines() if ln.strip()]
        raw_name = lines[0] if lines else ""
        if not raw_name.strip() or not raw_name.strip().strip(_NAME_STRIP):
            if known_only:
                return None
            return _failure(style, names, "the 'Action:' line names no tool", thought=thought)
        name = match_tool_name(raw_name, names)
        if known_only and name not in names:
            return None
        if name not in names and _is_final_name(raw_name):
            # "Action: Final Answer" + "Action Input: <answer>"
            answer = _section_after(labels, first_action, "input", body)
            return FinalAnswer((answer or "").strip(), thought=thought)
        raw_input = _section_after(labels, first_action, "input", body)
        if raw_input is None or not raw_input.strip():
            if _required(tools.get(name)):
                return _arguments_failure(
                    style, tools, name, "the 'Action Input:' line is missing or empty", thought
                )
            return ToolAction((ToolCall(_new_id(), name, {}),), thought=thought, source="react")
        return _tool_from_input(name, _input_json(raw_input), style, tools, thought, "react")

    match = labels[first_final][0]
    answer = body[match.end():]
    return FinalAnswer(answer.strip(), thought=thought)


def _section_after(labels: list, index: int, kind: str, body: str) -> str | None:
    """Text of the label of ``kind`` that directly follows label ``index`` (up to the next label), or None."""
    if index + 1 < len(labels) and labels[index + 1][1] == kind:
        match = labels[index + 1][0]
        end = labels[index + 2][0].start() if index + 2 < len(labels) else len(body)
        return body[match.end():end]
    return None


def _input_json(raw: str) -> str:
    """The Action Input text ready for decoding: a fence opening removed, a strictly decodable object cut at its
    end (so prose or a closing fence after it does not matter)."""
    text = raw.strip()
    fence = _FENCE.match(text + "\n") if text.startswith(("```", "~~~")) else None
    if fence:
        text = text[fence.end():] if fence.end() <= len(text) else ""
        text = _cut_fence(text).strip()
    if text.startswith("{"):
        try:
            _, end = _decoder.raw_decode(text)
            return text[:end]
        except json.JSONDecodeError:
            return _cut_fence(text).strip()
    if len(text) >= 2 and text[0] == text[-1] == "`":
        return text.strip("`").strip()
    return text


_FINAL_PREFIX = re.compile(r"^\s*(?:[*_`]+\s*)?final[ \t_-]*answer\s*(?:[*_`]+\s*)?[:：](?:\s*[*_`]+(?=\s))?\s*", re.I)
_THOUGHT_PREFIX = re.compile(r"^\s*(?:[*_`]+\s*)?thought\s*(?:[*_`]+\s*)?[:：](?:\s*[*_`]+(?=\s))?\s*", re.I)


def _strip_final_label(text: str) -> str:
    return _FINAL_PREFIX.sub("", text, count=1)


def _strip_thought_label(text: str) -> str:
    return _THOUGHT_PREFIX.sub("", text, count=1)
