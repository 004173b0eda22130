"""The checks of a batch's inputs that need the agent: what each run would refuse, found before any input runs.

:mod:`~thinkflow.batch.inputs` reads the file on its own; here each input is held against the agent's prompt and the
session rules. An input's own ``vars`` (a JSONL input's) must each be a variable of the agent's prompt and not one
the runner sets (``task``, ``tools``, ...: :func:`thinkflow.prompting.templates.prompt_var_checker`); a CSV row's
columns pass on only the ones the prompt uses, so they are never refused. A ``session`` must be a safe session name
(:func:`thinkflow.run.session.check_name`). Before, such an input became an error result at run time, after the
inputs before it had run. :func:`input_issues` is handed to :func:`thinkflow.batch.inputs.read_inputs`, so these
problems are reported with the file's own (a duplicate id, a missing task), all at once.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

from thinkflow.batch.inputs import BatchInput
from thinkflow.config.spec import PromptSpec
from thinkflow.errors import ConfigIssue, SessionError
from thinkflow.prompting.templates import prompt_var_checker
from thinkflow.run.session import check_name


def input_issues(path: Path, inputs: Iterable[BatchInput], prompt: PromptSpec) -> list[ConfigIssue]:
    """Every problem a run would have with the ``vars`` or ``session`` of one of ``inputs`` (read from ``path``),
    each at its input's line, in file order.

    Raises:
        PromptError: the agent's template cannot be read or parsed.
    """
    problem = prompt_var_checker(prompt, task_from="the input's 'task'")
    issues: list[ConfigIssue] = []
    for item in inputs:
        column = 1 if item.line else 0
        if not item.only_used_vars:
            for key in item.vars:
                found = problem(key)
                if found:
                    issues.append(ConfigIssue(str(path), item.line, column, f"vars.{key}", found))
        if item.session is not None:
            try:
                check_name(item.session)
            except SessionError as error:
                issues.append(ConfigIssue(str(path), item.line, column, "session", str(error)))
    return sorted(issues, key=lambda i: i.line)
