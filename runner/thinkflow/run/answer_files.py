"""The ``loop.check_answer_files`` check: a final answer must not name files that do not exist.

Small models often finish with "... chart saved to charts/sales.png" without having called the tool that writes it.
With the check on, the loop looks for file paths in a final answer (a path ending in one of
:data:`FILE_EXTENSIONS`, relative to the agent's workspace or absolute; URLs are not paths) and, when one does not
exist, sends the answer back once with :func:`missing_files_request` so the model can create the file with a tool or
drop the claim. An answer that names none of the files the run's tools wrote (a chart made, then "the total is
12345") is sent back with :func:`unnamed_files_request`. How often an answer is sent back is
:mod:`thinkflow.run.answer_checks`' to decide (once per run).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

FILE_EXTENSIONS = (
    "png", "jpg", "jpeg", "gif", "svg", "webp", "pdf", "csv", "tsv", "json", "jsonl", "txt", "md", "html", "htm",
    "xlsx", "xls", "parquet", "yaml", "yml", "log", "py", "sql", "zip",
)

# A path: optional leading "/" or "~/", directories, a name, a known extension; not preceded by a word character,
# "/", ".", ":" or "-" (so the tail of a URL or of a longer name never matches) and not followed by a word character.
_PATH = re.compile(
    r"(?<![\w/.:~-])((?:~/|/)?(?:[\w.-]+/)*[\w-][\w.-]*\.(?:" + "|".join(FILE_EXTENSIONS) + r"))(?![\w/-])",
    re.IGNORECASE,
)


def named_files(text: str) -> list[str]:
    """The file paths named in ``text``, in order of first mention, without repeats.

    A path ends in one of :data:`FILE_EXTENSIONS` (case-insensitive); quotes, backticks and brackets around it
    are not part of it; ``https://host/a.png`` names no file.
    """
    seen: dict[str, None] = {}
    for match in _PATH.finditer(text):
        seen.setdefault(match.group(1), None)
    return list(seen)


def missing_files(text: str, workspace: Path) -> list[str]:
    """The paths named in ``text`` (see :func:`named_files`) that do not exist, relative paths resolved against
    ``workspace`` (a directory)."""
    missing = []
    for name in named_files(text):
        path = Path(name).expanduser()
        if not path.is_absolute():
            path = workspace / path
        if not path.exists():
            missing.append(name)
    return missing


def missing_files_request(answer: str, missing: list[str]) -> str:
    """The message that sends the final ``answer`` back because the files in ``missing`` do not exist: make them
    if the task asks for them, else answer the task without them. The answer is not quoted back: a small model
    repeats a quoted answer word for word, the invented path included."""
    names = ", ".join(missing)
    they, do, it = ("it", "does", "it") if len(missing) == 1 else ("they", "do", "them")
    return (
        f"Your final answer names {names}, but {they} {do} not exist: no tool has written {it}. If the task asks "
        f"for {it}, call the tool that creates {it} now, then give your final answer again. If the task does not, "
        f"give the final answer to the task without {it}."
    )


def unnamed_files(answer: str, written: list[str]) -> list[str]:
    """The files of ``written`` (workspace-relative paths the run's tools wrote) that ``answer`` names neither by
    path nor by file name, without repeats; empty when the answer names at least one of them (a run that rewrote a
    draft need not list every version)."""
    files = list(dict.fromkeys(written))
    named = [f for f in files if f in answer or Path(f).name in answer]
    return [] if named else files


def unnamed_files_request(unnamed: list[str]) -> str:
    """The message that sends a final answer back because it does not say where the run's files are."""
    names = ", ".join(unnamed)
    return (f"Your final answer does not say where the result is: this run saved {names}. Give the final answer "
            f"again, with what you found and the path {names}.")
