"""The memory policy: what is remembered after a run, how recalled memories reach the prompt, and the
``remember_fact`` tool.

``memory.long_term.remember`` lists what is written after a run: ``final_answer`` (the task and the answer, cut to
its head and tail when long), ``tool_results`` (observations of the tools in ``remember_tools``, all tools when
empty) and ``user_facts`` (statements the user asked to keep, stored at once by the ``remember_fact`` tool). Every
memory carries metadata ``agent``, ``session``, ``kind`` (``final_answer`` | ``tool_result`` | ``user_fact``),
``time`` (unix seconds) and ``time_iso``, usable in ``recall.where`` filters.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from thinkflow.config.spec import LongTermSpec, ToolSpec
from thinkflow.errors import MemoryStoreError
from thinkflow.tools.base import RunInfo, ToolResult
from thinkflow.memory.shortterm import cut_middle
from thinkflow.memory.records import now_metadata

if TYPE_CHECKING:  # pragma: no cover
    from thinkflow.memory.longterm import LongTermMemory
    from thinkflow.memory.records import MemoryRecord

MAX_TASK_CHARS = 1000
MAX_ANSWER_CHARS = 2000
MAX_OBSERVATION_CHARS = 2000

KIND_FINAL_ANSWER = "final_answer"
KIND_TOOL_RESULT = "tool_result"
KIND_USER_FACT = "user_fact"


def shorten(text: str, limit: int) -> str:
    """``text`` unchanged when it has at most ``limit`` characters, else its head and tail around a cut marker."""
    return cut_middle(text, limit)


def _base_metadata(agent: str, session: str | None, kind: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"agent": agent, "session": session, "kind": kind}
    meta.update(now_metadata())
    return meta


def remember_run(
    memory: "LongTermMemory",
    spec: LongTermSpec,
    *,
    agent: str,
    session: str | None,
    task: str,
    answer: str | None,
    tool_results: Sequence[tuple[str, dict, str]] = (),
    user_facts: Sequence[str] = (),
) -> list[str]:
    """Write what ``spec.remember`` asks for after a run, then apply retention; return the new memory ids.

    - ``final_answer`` (when ``answer`` is not None/empty): ``"Task: <task>\\nAnswer: <answer>"``, task cut to
      1,000 and answer to 2,000 characters (head and tail kept).
    - ``tool_results``: for each ``(tool_name, arguments, observation)`` whose tool is in ``spec.remember_tools``
      (or all when that is empty): ``"Tool <name> <arguments as JSON> returned:\\n<observation>"`` (observation cut
      to 2,000 characters), metadata ``tool``.
    - ``user_facts``: each fact verbatim.
    Raises MemoryStoreError when the store fails.
    """
    items: list[tuple[str, Mapping[str, Any]]] = []
    policy = set(spec.remember)
    if KIND_FINAL_ANSWER in policy and answer and answer.strip():
        content = f"Task: {shorten(task.strip(), MAX_TASK_CHARS)}\nAnswer: {shorten(answer.strip(), MAX_ANSWER_CHARS)}"
        items.append((content, _base_metadata(agent, session, KIND_FINAL_ANSWER)))
    if "tool_results" in policy:
        selected = set(spec.remember_tools)
        for name, arguments, observation in tool_results:
            if selected and name not in selected:
                continue
            if not observation or not observation.strip():
                continue
            args = json.dumps(arguments or {}, ensure_ascii=False, sort_keys=True, default=str)
            content = f"Tool {name} {args} returned:\n{shorten(observation.strip(), MAX_OBSERVATION_CHARS)}"
            meta = _base_metadata(agent, session, KIND_TOOL_RESULT)
            meta["tool"] = name
            items.append((content, meta))
    if "user_facts" in policy:
        for fact in user_facts:
            if fact and fact.strip():
                items.append((fact.strip(), _base_metadata(agent, session, KIND_USER_FACT)))
    return memory.remember_many(items)


def recall_query(task: str, history: Sequence[Any] = ()) -> str:
    """The text to recall with: the task on start; with ``every_step``, the task plus the latest non-empty
    assistant or tool message (so that recall follows the run)."""
    latest = ""
    for m in reversed(list(history)):
        if getattr(m, "role", None) in ("assistant", "tool") and getattr(m, "content", "").strip():
            latest = m.content.strip()
            break
    return f"{task}\n{shorten(latest, 1000)}" if latest else task


def format_memories(records: Sequence["MemoryRecord"]) -> list[dict[str, Any]]:
    """The value of the prompt variable ``memories``: one dict per recalled memory, best first::

        {"id": str, "content": str (verbatim), "score": float | None (cosine similarity, 3 decimals),
         "kind": str | None, "time": ISO 8601 str | None, "metadata": dict}

    Contents are data: templates must print them (``{{ m.content }}``), and they are never rendered as templates.
    """
    out = []
    for r in records:
        meta = dict(r.metadata)
        out.append(
            {
                "id": r.id,
                "content": r.content,
                "score": None if r.score is None else round(float(r.score), 3),
                "kind": meta.get("kind"),
                "time": meta.get("time_iso"),
                "metadata": meta,
            }
        )
    return out


REMEMBER_FACT_DESCRIPTION = (
    "Save a fact to long-term memory so that later runs can recall it. Use it only when the user asks you to "
    "remember or keep something (a preference, a name, a decision). Write the fact as one self-contained sentence."
)


class RememberFactTool:
    """The builtin tool ``remember_fact`` ({"fact": str}): stores the fact at once as a ``user_fact`` memory.

    The loop adds it to the toolbox when ``memory.long_term.remember`` includes ``user_facts``. ``run`` never
    raises: a store failure is a ToolResult with status "error".
    """

    name = "remember_fact"

    def __init__(self, memory: "LongTermMemory", *, agent: str, session: str | None = None):
        self.memory = memory
        self.agent = agent
        self.session = session
        self._run_session: str | None = None
        self.spec = ToolSpec(
            name=self.name,
            description=REMEMBER_FACT_DESCRIPTION,
            kind="builtin",
            parameters=self.parameters(),
            timeout=60.0,
        )

    def start_run(self, run: RunInfo) -> None:
        """Remember the session of the run that is starting (:class:`thinkflow.tools.base.RunAware`): facts stored
        during it are tagged with it unless the tool was built with a session of its own."""
        self._run_session = run.session

    def parameters(self) -> dict[str, Any]:
        """JSON Schema: an object with one required non-empty string ``fact``."""
        return {
            "type": "object",
            "properties": {"fact": {"type": "string", "minLength": 1, "description": "The fact to remember, as one sentence."}},
            "required": ["fact"],
            "additionalProperties": False,
        }

    def run(self, arguments: dict[str, Any]) -> ToolResult:
        """Store ``arguments["fact"]`` (tagged with the session of the run calling it, when it has one); observation
        ``"Remembered: <fact>"``, data ``{"id": memory id}``."""
        fact = arguments.get("fact")
        if not isinstance(fact, str) or not fact.strip():
            return ToolResult("invalid", "remember_fact needs a non-empty string argument 'fact'")
        fact = fact.strip()
        session = self.session or self._run_session
        try:
            mid = self.memory.remember(fact, _base_metadata(self.agent, session, KIND_USER_FACT))
        except MemoryStoreError as exc:
            return ToolResult("error", f"could not remember the fact: {exc}")
        return ToolResult("ok", f"Remembered: {fact}", {"id": mid})
