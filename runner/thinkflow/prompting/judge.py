"""The request a judge model answers in ``thinkflow test``: does an agent's answer meet a rubric?

The task, the answer and the rubric are data inside the user message (never rendered as templates). The reply is
asked for as one JSON object ``{"pass": true|false, "reason": "..."}`` (also sent as ``response_format``).
"""

from __future__ import annotations

import json
from typing import Any

from thinkflow.model.messages import Message

JUDGE_SYSTEM = (
    "You grade the answer an AI agent gave to a task against a rubric. Judge only what the rubric asks. "
    'Reply with one JSON object and nothing else: {"pass": true or false, "reason": "<one sentence>"}.'
)

VERDICT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"pass": {"type": "boolean"}, "reason": {"type": "string"}},
    "required": ["pass", "reason"],
    "additionalProperties": False,
}


def judge_messages(rubric: str, task: str, answer: str) -> list[Message]:
    """The system and user messages of one judgement (task, answer and rubric quoted as JSON strings)."""
    body = "\n".join([
        "Task given to the agent: " + json.dumps(task, ensure_ascii=False),
        "The agent's answer: " + json.dumps(answer, ensure_ascii=False),
        "Rubric: " + json.dumps(rubric, ensure_ascii=False),
    ])
    return [Message("system", JUDGE_SYSTEM), Message("user", body)]
