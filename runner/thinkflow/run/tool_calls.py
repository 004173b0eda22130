"""One step's tool calls: which may run, running them, and the observations the model gets back.

:func:`admit_calls` answers what must not run (undecodable arguments, an unknown tool, a repetition, a spent
tool-call budget) and charges the budget for the rest; :func:`execute_calls` runs the admitted calls -- in
parallel threads when there are several and every tool is parallel-safe; :func:`observation_messages` turns the
:class:`~thinkflow.run.step.CallOutcome` s, in call order, into the conversation messages of the style in force.
"""

from __future__ import annotations

import json
import re
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, NamedTuple, Sequence

from thinkflow.model.messages import Message, ToolCall
from thinkflow.reply.actions import ToolAction
from thinkflow.reply.react_text import before_observation
from thinkflow.run.collaborators import Toolbox
from thinkflow.run.limits import Budget, RepetitionDetector
from thinkflow.run.outcome import Outcome
from thinkflow.run.step import PARTIAL_OBSERVATION_CHARS, CallOutcome, Step
from thinkflow.text import cut_middle, suggested_values

MAX_PARALLEL_TOOLS = 8
DUPLICATE_CALL = "not run: the same call as an earlier one in this reply (its result is above)"


class Admission(NamedTuple):
    """What :func:`admit_calls` decided: ``decided`` the outcomes of the calls answered without running (by call
    index), ``admitted`` the indexes of the calls to run (in order), ``stop`` the ending of the run it found
    (``loop_detected`` or ``budget_exceeded``, no answer yet) or None."""

    decided: dict[int, CallOutcome]
    admitted: list[int]
    stop: Outcome | None


def admit_calls(action: ToolAction, *, toolbox: Toolbox, repetition: RepetitionDetector, budget: Budget,
                messages: Sequence[Message], warn: Callable[[str], None]) -> Admission:
    """Decide, call by call in order, which calls of ``action`` run.

    A call identical to an earlier one of the same reply (name and decoded arguments) is not run and not counted as
    a repetition. A call with undecodable arguments (each its own error, whatever the calls before it), a repeated
    call (the first repetition: a warning, passed to ``warn``; unknown tools included), an unknown tool or one past
    the tool-call budget gets its observation at once; after a repetition that continues past the warning or a
    spent budget, the remaining calls are skipped. Admitted calls are charged to ``budget``.
    """
    decided: dict[int, CallOutcome] = {}
    admitted: list[int] = []
    stop: Outcome | None = None

    def skip(i: int, call: ToolCall, text: str, reason: str) -> None:
        decided[i] = CallOutcome(call, "skipped", text, {"reason": reason})

    seen: set[str] = set()
    for i, call in enumerate(action.calls):
        if stop is not None:
            skip(i, call, f"not run: {stop.error}", stop.status)
            continue
        if call.id in action.errors:  # each gets its own error: two different bad texts both decode to {}
            decided[i] = CallOutcome(call, "invalid",
                                     f"invalid arguments for tool '{call.name}': {action.errors[call.id]}")
            continue
        same = json.dumps([call.name, call.arguments], sort_keys=True, default=str)
        if same in seen:  # a small model may write the same call many times in one reply: it runs once
            skip(i, call, DUPLICATE_CALL, "duplicate")
            continue
        seen.add(same)
        verdict = repetition.check(call.name, call.arguments)  # an unknown tool called again and again too
        if verdict == "stop":
            stop = Outcome("loop_detected", error=_loop_message(repetition, call))
            skip(i, call, f"not run: {stop.error}", "loop_detected")
            continue
        if verdict == "warn":
            text = _repetition_warning(repetition, call, messages)
            warn(text.split("\n", 1)[0])
            skip(i, call, text, "repetition")
            continue
        if call.name not in toolbox:
            unknown = toolbox.unknown(call.name)
            decided[i] = CallOutcome(call, unknown.status, unknown.text, dict(unknown.data))
            continue
        why = budget.tool_calls_exceeded()
        if why:
            stop = Outcome("budget_exceeded", error=why)
            skip(i, call, f"not run: {why}", "budget_exceeded")
            continue
        budget.charge_tool_call()
        admitted.append(i)
    return Admission(decided, admitted, stop)


def execute_calls(toolbox: Toolbox, calls: Sequence[ToolCall], admitted: Sequence[int],
                  earlier: Sequence[Step] = ()) -> dict[int, CallOutcome]:
    """Run ``calls[i]`` for each ``i`` in ``admitted`` through ``toolbox``; returns their outcomes (``ran=True``) by
    call index. A tool layer that raises becomes an "error" observation; a failed call's error that quotes a value
    close to an argument it gave gets a "did you mean" line (:func:`did_you_mean_values`), and one whose arguments
    call another tool a line saying so (:func:`nested_call_hint`), and one whose arguments name a field that an
    ``earlier`` step's result holds the value of (:func:`field_value_hint`; read only when a call failed). Several
    parallel-safe calls run in up to :data:`MAX_PARALLEL_TOOLS` threads.
    Ctrl-C while they run kills every process the tools started (:func:`~thinkflow.tools.process.terminate_all`)
    and re-raises."""
    def one(i: int) -> CallOutcome:
        call = calls[i]
        try:
            result = toolbox.call(call.name, dict(call.arguments))
        except Exception as failure:  # noqa: BLE001 - a tool layer bug is an observation, not a crash
            return CallOutcome(call, "error", f"tool '{call.name}' failed: {type(failure).__name__}: {failure}",
                               ran=True)
        text = result.text if result.text.strip() else "(no output)"
        if result.status in ("error", "invalid"):
            text += (did_you_mean_values(call.arguments, text) + nested_call_hint(call, toolbox.names())
                     + field_value_hint(call, [c for s in earlier if not s.discarded for c in s.calls]))
        return CallOutcome(call, result.status, text, dict(result.data), ran=True)

    parallel = len(admitted) > 1 and all(toolbox.parallel_safe(calls[i].name) for i in admitted)
    if not parallel:
        return {i: one(i) for i in admitted}
    pool = ThreadPoolExecutor(max_workers=min(MAX_PARALLEL_TOOLS, len(admitted)), thread_name_prefix="thinkflow-tool")
    try:
        futures = {i: pool.submit(one, i) for i in admitted}
        return {i: futures[i].result() for i in admitted}
    except KeyboardInterrupt:  # the calls' threads cannot be stopped, but their processes can
        from thinkflow.tools.process import terminate_all

        terminate_all()
        raise
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


def did_you_mean_values(arguments: object, error: str) -> str:
    """The line appended to a failed call's error when the error quotes a value close to one the call gave
    (:func:`thinkflow.text.suggested_values`): ``"\ndid you mean item='widget'?"``, else ``""``. A small model
    sends ``widgets`` again and again when the error only lists ``widget`` among the known keys."""
    hints = [f"{key}={value!r}" for key, _, value in suggested_values(arguments, error)]
    return f"\ndid you mean {', '.join(hints)}?" if hints else ""


def nested_call_hint(call: ToolCall, tool_names: Sequence[str], *, limit: int = 4000,
                     max_arguments: int = 20) -> str:
    """The line appended to a failed call's error when one of its string arguments calls another offered tool
    (``calculator("8 * item_price('gadget')")``, which a small model writes): that tool is called on its own,
    first. ``""`` otherwise. One pass per argument over the first ``limit`` characters of at most
    ``max_arguments`` arguments."""
    others = [name for name in tool_names if name != call.name]
    if not others or not isinstance(call.arguments, dict):
        return ""
    pattern = re.compile(r"(?<![\w.])(" + "|".join(map(re.escape, sorted(others, key=len, reverse=True)))
                         + r")\s*\(")
    texts = [v for v in call.arguments.values() if isinstance(v, str)][:max_arguments]
    nested = list(dict.fromkeys(m.group(1) for text in texts for m in pattern.finditer(text[:limit])))
    if not nested:
        return ""
    return (f"\n{', '.join(nested)} {'is a tool' if len(nested) == 1 else 'are tools'} of its own, not part of "
            f"{call.name}'s arguments: call {nested[0]} first, then use its result here.")


_FIELD = re.compile(r"(?<![\w.'\"])([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)(?![\w(])")
"""A name or dotted field path in an argument (``port``, ``shop.port``, ``config.app.port``), not a call."""


def field_value_hint(call: ToolCall, earlier: Sequence[CallOutcome], *, limit: int = 4000) -> str:
    """The line appended to a failed call's error when its string arguments name a field (``2 * shop.port``) whose
    last part is a key with a number or short text in a JSON object an ``earlier`` ok result of the run printed
    (``{"name": "shop", "port": 8080}``): ``"\nport is 8080 in the result of read_file: write the value
    itself."``; ``""`` otherwise. Reads the first ``limit`` characters of each argument and result."""
    texts = [v[:limit] for v in call.arguments.values() if isinstance(v, str)] if isinstance(call.arguments, dict) else []
    wanted = {path.rsplit(".", 1)[-1]: path for text in texts for path in _FIELD.findall(text)}
    if not wanted:
        return ""
    for outcome in reversed(earlier):
        if outcome.status != "ok":
            continue
        found = _scalar_fields(outcome.observation[:limit])
        for key in wanted:
            if key in found:
                return (f"\n{key} is {json.dumps(found[key])} in the result of {outcome.call.name}: write the value "
                        "itself.")
    return ""


def _scalar_fields(text: str) -> dict[str, object]:
    """The numbers and short strings of the JSON object ``text`` is (nested objects included), by key; {} when it
    is not one."""
    text = text.strip()
    if not text.startswith("{"):
        return {}
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return {}
    out: dict[str, object] = {}
    stack, seen = [value], 0
    while stack and seen < 1000:
        item = stack.pop()
        seen += 1
        if isinstance(item, dict):
            for key, inner in item.items():
                if isinstance(inner, (int, float)) and not isinstance(inner, bool) or \
                        isinstance(inner, str) and len(inner) <= 80:
                    out.setdefault(str(key), inner)
                elif isinstance(inner, (dict, list)):
                    stack.append(inner)
        elif isinstance(item, list):
            stack.extend(item)
    return out


def observation_messages(action: ToolAction, reply_text: str, outcomes: Sequence[CallOutcome], *,
                         native_format: bool) -> list[Message]:
    """The assistant turn and the observations of ``action``'s calls (``outcomes`` in call order): native tool
    messages (by call id), or the reply text (cut at an invented ``Observation:``) and one user message of
    ``Observation:`` lines."""
    if native_format:
        content = reply_text if action.source == "native" else action.thought
        out = [Message("assistant", content, tuple(action.calls))]
        for outcome in outcomes:
            out.append(Message("tool", outcome.observation, tool_call_id=outcome.call.id, name=outcome.call.name))
        return out
    if len(outcomes) == 1:
        text = f"Observation: {outcomes[0].observation}"
    else:
        text = "\n\n".join(f"Observation ({o.call.name}): {o.observation}" for o in outcomes)
    return [Message("assistant", before_observation(reply_text)), Message("user", text)]


def _repetition_warning(repetition: RepetitionDetector, call: ToolCall, messages: Sequence[Message]) -> str:
    previous = ""
    for m in reversed(messages):
        if m.role == "tool" or (m.role == "user" and m.content.startswith("Observation")):
            previous = m.content
            break
    if repetition.last_pattern == "ping-pong":
        head = (f"Warning: you keep alternating between {_pair(repetition)} with the same arguments; "
                "this call was not run again.")
    else:
        head = (f"Warning: you called '{call.name}' with the same arguments {repetition.repeat} times in a "
                "row; this call was not run again.")
    tail = "Use the results you already have, try something different, or give the final answer."
    if previous:
        return f"{head}\nThe last result was:\n{cut_middle(previous, PARTIAL_OBSERVATION_CHARS)}\n{tail}"
    return f"{head}\n{tail}"


def _pair(repetition: RepetitionDetector) -> str:
    """The two calls of a ping-pong: "'a' and 'b'", or "two calls of 'a'" when both call the same tool."""
    a, b = repetition.alternating_names()
    return f"two calls of '{a}'" if a == b else f"'{a}' and '{b}'"


def _loop_message(repetition: RepetitionDetector, call: ToolCall) -> str:
    if repetition.last_pattern == "ping-pong":
        return f"the model kept alternating between {_pair(repetition)} with the same arguments after a warning"
    return f"the model kept calling '{call.name}' with the same arguments after a warning"
