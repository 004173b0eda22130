"""Running a test file's cases: build the agent with a replaying, recording or live model client, run the real loop
(or the planner), and check the assertions.

Modes:
* ``replay`` (default): each case's cassette answers every model call (:class:`~thinkflow.testing.replay.ReplayClient`);
  offline, deterministic. A missing cassette fails the case and says how to record it.
* ``record``: the real model answers (through LiteLLM) and every call is written to the case's cassette.
* ``live``: the real model answers; cassettes are neither read nor written.

Each test file runs in a fresh temporary directory for sessions, traces and long-term memory, so cases see no
state of earlier test runs (cases naming the same session share it, in file order). Tools run for real, in the
agent's workspace; ``confirm`` tools are denied (no one is there to approve).
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from thinkflow.config.spec import AgentSpec, ModelSpec
from thinkflow.config.testspec import CaseSpec, TestFileSpec
from thinkflow.errors import MemoryStoreError, ModelError, PromptError, ThinkFlowError, ToolError
from thinkflow.model.providers import key_values
from thinkflow.run import events as ev
from thinkflow.run.base import exit_code_of
from thinkflow.testing.assertions import Observed, check
from thinkflow.testing.cassette import Cassette, CassetteError, load_cassette, now_iso, save_cassette
from thinkflow.testing.replay import RecordingClient, ReplayClient

MODES = ("replay", "record", "live")

ClientFactory = Callable[[ModelSpec, "str | None"], Any]
"""``(agent's model spec, case's model override) -> client`` for record and live runs."""


@dataclass
class RunOutcome:
    """One run of a case.

    Attributes:
        failure: the first failing assertion's message, or None when the run passed.
        line, column: where the failing assertion is in the test file (the case's line for errors).
        observed: what the run did (None when it could not start).
        diff: the request diff of a replay mismatch, or "".
    """

    failure: str | None
    line: int
    column: int
    observed: Observed | None = None
    diff: str = ""

    @property
    def passed(self) -> bool:
        """True when every assertion held."""
        return self.failure is None


@dataclass
class CaseResult:
    """A case's result over its runs.

    Attributes:
        file: the test file; case: the case.
        runs: one :class:`RunOutcome` per repeat.
        passed: at least ``pass_at_least`` runs passed.
        duration_s: wall time in seconds.
        cassette: the cassette written (record mode) or read (replay), or None.
    """

    file: Path
    case: CaseSpec
    runs: list[RunOutcome] = field(default_factory=list)
    duration_s: float = 0.0
    cassette: Path | None = None

    @property
    def passes(self) -> int:
        """How many runs passed."""
        return sum(1 for r in self.runs if r.passed)

    @property
    def passed(self) -> bool:
        """True when at least ``pass_at_least`` runs passed."""
        return bool(self.runs) and self.passes >= self.case.pass_at_least

    @property
    def first_failure(self) -> RunOutcome | None:
        """The first failing run, or None."""
        return next((r for r in self.runs if not r.passed), None)


def default_client(model: ModelSpec, override: str | None) -> Any:
    """The real client of a record or live run (LiteLLM, ``override`` as ``--model``)."""
    from thinkflow.model.client import build_client

    return build_client(model, override=override)


def _secrets(test: TestFileSpec, agent_secrets: tuple[str, ...]) -> list[str]:
    return [*agent_secrets, *test.secrets, *key_values("")]  # every credential variable in the environment


class _Collector:
    """``on_event`` that keeps every tool call of the run, sub-agents' included, in order."""

    def __init__(self) -> None:
        self.tool_calls: list[tuple[str, dict[str, Any]]] = []

    def __call__(self, event: Any) -> None:
        if isinstance(event, ev.ToolCalled):
            self.tool_calls.append((event.name, dict(event.arguments)))
        elif isinstance(event, ev.SubAgentEvent) and event.event.get("type") == "tool_called":
            self.tool_calls.append((str(event.event.get("name", "")), dict(event.event.get("arguments") or {})))


class TestRunner:
    """Runs the cases of test files.

    Args:
        mode: "replay", "record" or "live".
        cache: response-cache settings turned on for record and live runs (``--cache``), or None.
        client_factory: builds the real client for record/live runs (default :func:`default_client`; the cassette
            recording script passes one pointed at a scripted server).
        judge_factory: builds the judge's real client from a :class:`~thinkflow.config.testspec.JudgeModelSpec`
            (default :func:`thinkflow.testing.judge.judge_client`).
        on_case: called with each :class:`CaseResult` as it finishes.
    """

    __test__ = False  # not a pytest class

    def __init__(self, *, mode: str = "replay", cache: dict[str, Any] | None = None,
                 client_factory: ClientFactory | None = None, judge_factory: Callable[[Any], Any] | None = None,
                 on_case: Callable[[CaseResult], None] | None = None):
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}; one of {', '.join(MODES)}")
        self.mode = mode
        self.cache = cache
        self.client_factory = client_factory or default_client
        self.judge_factory = judge_factory
        self.on_case = on_case

    # ------------------------------------------------------------------------------------------------ files
    def run_file(self, test: TestFileSpec) -> list[CaseResult]:
        """Run every case of ``test`` in order; returns their results.

        Raises:
            SpecError: the agent file no longer loads.
        """
        from thinkflow.config.loader import load_agent

        spec = load_agent(test.agent_path)
        if self.cache and self.mode != "replay":
            from thinkflow.model.resolution import with_cache

            spec = dataclasses.replace(spec, model=with_cache(spec.model, self.cache))
        results = []
        with tempfile.TemporaryDirectory(prefix="thinkflow-test-") as work:
            for case in test.cases:
                result = self.run_case(test, case, spec, Path(work))
                results.append(result)
                if self.on_case is not None:
                    self.on_case(result)
        return results

    # ------------------------------------------------------------------------------------------------ cases
    def run_case(self, test: TestFileSpec, case: CaseSpec, spec: AgentSpec, work: Path) -> CaseResult:
        """Run ``case`` ``repeat`` times; in record mode write its cassette."""
        started = time.monotonic()
        result = CaseResult(file=test.path, case=case, cassette=test.cassette_path(case))
        cassette: Cassette | None = None
        if self.mode == "replay":
            try:
                cassette = load_cassette(test.cassette_path(case))
            except CassetteError as error:
                result.runs = [RunOutcome(str(error), case.line, case.column)]
                result.duration_s = time.monotonic() - started
                return result
            if not cassette.runs:
                result.runs = [RunOutcome(f"the cassette {test.cassette_path(case)} holds no run", case.line,
                                          case.column)]
                return result
        recorded: list[list[dict[str, Any]]] = []
        judge_calls: list[dict[str, Any]] = []
        model, capabilities = "", {}
        secrets = _secrets(test, spec.secrets)
        for index in range(case.repeat):
            client: Any
            if cassette is not None:
                client = ReplayClient(cassette.runs[index % len(cassette.runs)], model=cassette.model,
                                      capabilities=cassette.capabilities, mode=case.replay, secrets=secrets)
            else:
                inner = self.client_factory(spec.model, case.model)
                client = RecordingClient(inner) if self.mode == "record" else inner
            outcome = self._run_once(test, case, spec, client, work, cassette, index, judge_calls)
            result.runs.append(outcome)
            if isinstance(client, RecordingClient):
                recorded.append(client.interactions)
                model = client.model
                capabilities = client.capabilities_dict()
        if self.mode == "record" and recorded:
            save_cassette(test.cassette_path(case), Cassette(
                agent=spec.name, case=case.name, model=model, capabilities=capabilities, runs=recorded,
                judge=judge_calls, recorded_at=now_iso()), secrets)
        result.duration_s = time.monotonic() - started
        return result

    def _run_once(self, test: TestFileSpec, case: CaseSpec, spec: AgentSpec, client: Any, work: Path,
                  cassette: Cassette | None, index: int, judge_calls: list[dict[str, Any]]) -> RunOutcome:
        from thinkflow.agent import build

        try:
            agent = build(spec, model=case.model, client=client, share_client=True, prompt_vars=case.vars or None,
                          memory_dir=work / "memory")
        except (PromptError, ToolError, MemoryStoreError, ModelError) as error:
            return RunOutcome(f"the agent cannot be built: {error}", case.line, case.column)
        session = None
        if case.session:
            from thinkflow.run.session import Session

            session = Session(spec.name, case.session, root=work / "sessions")
        if spec.planner.enabled:
            from thinkflow.run.planner import run as run_agent
        else:
            from thinkflow.run.loop import run as run_agent
        collector = _Collector()
        try:
            result = run_agent(agent, case.task, on_event=collector, session=session, trace_dir=work / "traces",
                               max_steps=case.max_steps, stream=False)
        except ThinkFlowError as error:
            return RunOutcome(f"the run failed: {error}", case.line, case.column)
        observed = Observed(status=result.status, exit_code=exit_code_of(result.status), answer=result.answer,
                            steps=result.steps, tokens=result.usage.total_tokens, cost_usd=result.usage.cost_usd,
                            tool_calls=collector.tool_calls)
        mismatch = getattr(client, "mismatch", None)
        if mismatch is not None:
            return RunOutcome(f"replay mismatch: {mismatch.args[0]}", case.line, case.column, observed,
                              diff=mismatch.diff)
        for assertion in case.assertions:
            failure = check(assertion, observed)
            if failure is not None:
                return RunOutcome(failure, assertion.line, assertion.column, observed)
        if case.judge is not None:
            failure = self._judge(case, observed, cassette, index, judge_calls)
            if failure is not None:
                return RunOutcome(failure, case.judge.line, case.judge.column, observed)
        return RunOutcome(None, case.line, case.column, observed)

    def _judge(self, case: CaseSpec, observed: Observed, cassette: Cassette | None, index: int,
               judge_calls: list[dict[str, Any]]) -> str | None:
        from thinkflow.testing.judge import judge_client, verdict

        assert case.judge is not None
        if cassette is not None:
            if index >= len(cassette.judge):
                return "the cassette holds no judge reply for this run (record it with `thinkflow test --record`)"
            client: Any = ReplayClient([cassette.judge[index]], model=case.judge.model.model,
                                       capabilities={"json_schema": True, "json_mode": True}, mode=case.replay)
        else:
            inner = (self.judge_factory or judge_client)(case.judge.model)
            client = RecordingClient(inner)
        failure = verdict(client, case.judge.rubric, case.task, observed.answer)
        if isinstance(client, RecordingClient) and self.mode == "record":
            judge_calls.extend(client.interactions)
        return failure
