"""The optional judge assertion: a model named in the test file checks the answer against a rubric.

The judge's client is recorded into and replayed from the case's cassette (``judge`` calls) like the agent's, so a
replayed test with a judge stays offline. The verdict is the reply's JSON ``{"pass", "reason"}``
(:mod:`thinkflow.prompting.judge`); a reply that is not such an object fails the assertion with what it said.
"""

from __future__ import annotations

from typing import Any

from thinkflow.config.spec import ModelSpec
from thinkflow.config.testspec import JudgeModelSpec
from thinkflow.errors import ModelError
from thinkflow.prompting.judge import VERDICT_SCHEMA, judge_messages
from thinkflow.reply.json_text import iter_json_objects


def judge_client(model: JudgeModelSpec) -> Any:
    """A LiteLLM client for the judge model (no fallbacks; temperature as configured, default 0)."""
    from thinkflow.model.client import LiteLLMClient

    return LiteLLMClient(ModelSpec(name=model.model, api_base=model.api_base, temperature=model.temperature))


def verdict(client: Any, rubric: str, task: str, answer: str) -> str | None:
    """Ask ``client`` whether ``answer`` meets ``rubric``: None when it passes, else the failure message.

    A model error is a failure too (``judge failed: ...``)."""
    try:
        reply = client.complete(judge_messages(rubric, task, answer),
                                response_format={"type": "json_schema",
                                                 "json_schema": {"name": "verdict", "schema": VERDICT_SCHEMA}})
    except ModelError as error:
        return f"judge failed: {error}"
    data = next((f.value for f in iter_json_objects(reply.text) if isinstance(f.value, dict)), None)
    if not isinstance(data, dict) or not isinstance(data.get("pass"), bool):
        return f"the judge's reply is not a verdict: {reply.text.strip()[:200]!r}"
    if data["pass"]:
        return None
    return f"judge: {str(data.get('reason') or 'the answer does not meet the rubric').strip()}"
