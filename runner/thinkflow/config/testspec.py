"""Agent test files as data: the frozen :class:`TestFileSpec` of a checked ``*.test.yaml``, its cases
(:class:`CaseSpec`), their checks (:class:`Assertion`) and rubric judges (:class:`JudgeSpec`), and the file-name
rules. :mod:`thinkflow.config.testfile` reads and checks the files into these; :mod:`thinkflow.testing` runs them.
No I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TEST_SUFFIXES = (".test.yaml", ".test.yml")

#: assertion kinds in the order they are checked (and reported)
ASSERTION_KINDS = (
    "status", "exit_code", "max_steps", "max_tokens", "max_cost",
    "answer.equals", "answer.contains", "answer.not_contains", "answer.regex", "answer.number", "answer.schema",
    "tools.called", "tools.not_called", "tools.order", "tools.count",
)


def is_test_file(path: Path) -> bool:
    """True for ``*.test.yaml`` / ``*.test.yml``."""
    return path.name.endswith(TEST_SUFFIXES)


def test_stem(path: Path) -> str:
    """``calculator_agent`` for ``calculator_agent.test.yaml``."""
    name = path.name
    for suffix in TEST_SUFFIXES:
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return path.stem


@dataclass(frozen=True)
class Assertion:
    """One check of a case.

    Attributes:
        kind: one of :data:`ASSERTION_KINDS`.
        value: the expected value as written (normalised: texts and names are tuples, tool calls are
            ``{"name", "arguments"}`` dicts, a count is ``{"min", "max"}``, a number ``{"value", "tolerance"}``).
        line, column: where the assertion's key is in the test file (1-based).
        ignore_case: for the answer's text checks.
    """

    kind: str
    value: Any
    line: int = 1
    column: int = 1
    ignore_case: bool = False


@dataclass(frozen=True)
class JudgeModelSpec:
    """The model that checks rubrics: a LiteLLM model string and optional base URL and temperature."""

    model: str
    api_base: str | None = None
    temperature: float | None = 0.0


@dataclass(frozen=True)
class JudgeSpec:
    """A rubric checked by ``model`` (the case's judge model, else the file's)."""

    rubric: str
    model: JudgeModelSpec
    line: int = 1
    column: int = 1


@dataclass(frozen=True)
class CaseSpec:
    """One test case.

    Attributes:
        name: unique in its file; names the cassette (``<cassette_dir>/<name>.json``).
        task: the user's message.
        vars: prompt template variables (like ``--var``).
        session: the session name, or None for no session.
        model: a model override (like ``--model``), or None.
        max_steps: a ``loop.max_steps`` override, or None.
        replay: "exact" (requests must equal the recorded ones) or "by_step" (replies replayed in order).
        repeat: how many runs; pass_at_least: how many of them must pass.
        assertions: the checks, in :data:`ASSERTION_KINDS` order.
        judge: the rubric check, or None.
        line, column: where the case starts in the file.
    """

    name: str
    task: str
    vars: dict[str, Any] = field(default_factory=dict)
    session: str | None = None
    model: str | None = None
    max_steps: int | None = None
    replay: str = "exact"
    repeat: int = 1
    pass_at_least: int = 1
    assertions: tuple[Assertion, ...] = ()
    judge: JudgeSpec | None = None
    line: int = 1
    column: int = 1


@dataclass(frozen=True)
class TestFileSpec:
    """A checked test file.

    Attributes:
        path: the test file.
        agent_path: the agent file under test.
        cassette_dir: where the cases' cassettes live.
        cases: the cases, in file order.
        secrets: values interpolated from the environment (redacted from output).
    """

    __test__ = False  # not a pytest class

    path: Path
    agent_path: Path
    cassette_dir: Path
    cases: tuple[CaseSpec, ...]
    secrets: tuple[str, ...] = field(default=(), repr=False)

    def cassette_path(self, case: CaseSpec) -> Path:
        """The cassette file of ``case``."""
        return self.cassette_dir / f"{case.name}.json"
