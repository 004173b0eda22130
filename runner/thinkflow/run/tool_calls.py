"""One step's tool calls: which may run, running them, and the observations the model gets back.

:func:`admit_calls` answers what must not run (undecodable arguments, an unknown tool, a repetition, a spent
tool-call budget) and charges the budget for the rest; :func:`execute_calls` runs the admitted calls -- in
parallel threads when there are several and every tool is parallel-safe -- and keeps the results in call order;
:func:`observation_messages` turns the results into the conversation messages of the style in force.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Sequence

from thinkflow.reply.actions import ToolAction
from thinkflow.model.messages import Message, ToolCall
from thinkflow.reply.react_text import before_observation
from thinkflow.text import cut_middle

MAX_PARALLEL_TOOLS = 8
PARTIAL_OBSERVATION_CHARS = 1000

Result = tuple[str, str, dict]
"""``(status, observation, data)`` of one call."""


def admit_calls(action: ToolAction, *, toolbox: Any, repetition: Any, budget: Any, messages: Sequence[Message],
                warn: Callable[[str], None]) -> tuple[dict[int, Result], list[int], tuple[str, str] | None]:
    """Decide, call by call in order, which calls of ``action`` run.

    A call with undecodable arguments, an unknown tool, a repeated call (the first repetition: a warning, passed
    to ``warn``) or one past the tool-call budget gets its observation at once; after a repetition that continues
    past the warning or a spent budget, the remaining calls are skipped. Admitted calls are charged to ``budget``.
    Returns ``(results by call index, indexes of the admitted calls, (status, error) that ends the run or None)``.
    """
    results: dict[int, Result] = {}
    pending: list[int] = []
    stop: tuple[str, str] | None = None
    for i, call in enumerate(action.calls):
        if stop is not None:
            results[i] = ("skipped", f"not run: {stop[1]}", {"reason": stop[0]})
            continue
        if call.id in action.errors:
            results[i] = ("invalid", f"invalid arguments for tool '{call.name}': {action.errors[call.id]}", {})
            continue
        if call.name not in toolbox:
            unknown = toolbox.unknown(call.name)
            results[i] = (unknown.status, unknown.text, dict(unknown.data))
            continue
        verdict = repetition.check(call.name, call.arguments)
        if verdict == "stop":
            stop = ("loop_detected", _loop_message(repetition, call))
            results[i] = ("skipped", f"not run: {stop[1]}", {"reason": "loop_detected"})
            continue
        if verdict == "warn":
            text = _repetition_warning(repetition, call, messages)
            warn(text.split("\n", 1)[0])
            results[i] = ("skipped", text, {"reason": "repetition"})
            continue
        why = budget.tool_calls_exceeded()
        if why:
            stop = ("budget_exceeded", why)
            results[i] = ("skipped", f"not run: {why}", {"reason": "budget_exceeded"})
            continue
        budget.charge_tool_call()
        pending.append(i)
    return results, pending, stop


def execute_calls(toolbox: Any, calls: Sequence[ToolCall], pending: list[int], results: dict[int, Result]) -> None:
    """Run ``calls[i]`` for each ``i`` in ``pending`` through ``toolbox`` and store ``results[i]``; a tool layer
    that raises becomes an "error" observation. Several parallel-safe calls run in up to
    :data:`MAX_PARALLEL_TOOLS` threads; results stay keyed by call index, so their order is the calls' order."""
    def one(i: int) -> Result:
        call = calls[i]
        try:
            result = toolbox.call(call.name, dict(call.arguments))
        except Exception as failure:  # noqa: BLE001 - a tool layer bug is an observation, not a crash
            return "error", f"tool '{call.name}' failed: {type(failure).__name__}: {failure}", {}
        return result.status, result.text if result.text.strip() else "(no output)", dict(result.data)

    parallel = len(pending) > 1 and all(toolbox.parallel_safe(calls[i].name) for i in pending)
    if not parallel:
        for i in pending:
            results[i] = one(i)
        return
    pool = ThreadPoolExecutor(max_workers=min(MAX_PARALLEL_TOOLS, len(pending)), thread_name_prefix="thinkflow-tool")
    try:
        futures = {i: pool.submit(one, i) for i in pending}
        for i in pending:
            results[i] = futures[i].result()
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


def observation_messages(action: ToolAction, reply_text: str, results: dict[int, Result], *,
                         native_format: bool) -> list[Message]:
    """The assistant turn and the observations of ``action``'s calls: native tool messages (by call id), or the
    reply text (cut at an invented ``Observation:``) and one user message of ``Observation:`` lines."""
    if native_format:
        content = reply_text if action.source == "native" else action.thought
        out = [Message("assistant", content, tuple(action.calls))]
        for i, call in enumerate(action.calls):
            out.append(Message("tool", results[i][1], tool_call_id=call.id, name=call.name))
        return out
    if len(action.calls) == 1:
        text = f"Observation: {results[0][1]}"
    else:
        text = "\n\n".join(f"Observation ({c.name}): {results[i][1]}" for i, c in enumerate(action.calls))
    return [Message("assistant", before_observation(reply_text)), Message("user", text)]


def _repetition_warning(repetition: Any, call: ToolCall, messages: Sequence[Message]) -> str:
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


def _pair(repetition: Any) -> str:
    """The two calls of a ping-pong: "'a' and 'b'", or "two calls of 'a'" when both call the same tool."""
    a, b = repetition.alternating_names()
    return f"two calls of '{a}'" if a == b else f"'{a}' and '{b}'"


def _loop_message(repetition: Any, call: ToolCall) -> str:
    if repetition.last_pattern == "ping-pong":
        return f"the model kept alternating between {_pair(repetition)} with the same arguments after a warning"
    return f"the model kept calling '{call.name}' with the same arguments after a warning"
