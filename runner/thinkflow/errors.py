"""The exception tree of ThinkFlow, rooted at :class:`ThinkFlowError`.

The library raises these and never prints or exits; ``thinkflow.cli`` maps each to a message and an exit code.
No I/O happens here.
"""

from __future__ import annotations

from dataclasses import dataclass


class ThinkFlowError(Exception):
    """Base of every error ThinkFlow raises on purpose."""


@dataclass(frozen=True)
class ConfigIssue:
    """One problem found in a config file.

    Attributes:
        file: path of the file as given (str), or "<string>".
        line: 1-based line, or 0 when unknown.
        column: 1-based column, or 0 when unknown.
        path: location inside the document, dotted (``tools[2].request.method``), "" for the root.
        message: what is wrong.
        hint: how to fix it ("did you mean 'method'?"), or "".
    """

    file: str
    line: int
    column: int
    path: str
    message: str
    hint: str = ""

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}:{self.column}"
        text = f"{where}: {self.path or '<root>'}: {self.message}"
        return f"{text} ({self.hint})" if self.hint else text


class SpecError(ThinkFlowError):
    """A config file (agent, tool, prompt) is invalid. ``issues`` lists every problem found, in file order."""

    def __init__(self, issues: list[ConfigIssue]):
        self.issues = list(issues)
        super().__init__("\n".join(str(i) for i in self.issues) or "invalid config")


class PromptError(ThinkFlowError):
    """A system prompt template failed to load or render (syntax error, undefined variable)."""


class ModelError(ThinkFlowError):
    """A model call failed after retries and fallbacks. ``hint`` says how to fix it; ``model`` names the model."""

    def __init__(self, message: str, *, model: str = "", hint: str = ""):
        self.model = model
        self.hint = hint
        super().__init__(f"{message} ({hint})" if hint else message)


class AuthenticationError(ModelError):
    """The provider refused the credentials, or none were set ("set OPENAI_API_KEY")."""


class ModelNotFoundError(ModelError):
    """The provider does not know the model name."""


class ProviderUnavailableError(ModelError):
    """The provider could not be reached (for example Ollama not running at the address)."""


class RateLimitError(ModelError):
    """The provider kept answering 429 after every retry."""


class ModelTimeoutError(ModelError):
    """The model did not answer within the configured timeout (seconds)."""


class ContextWindowError(ModelError):
    """The prompt is longer than the model's context window."""


class LocalModelError(ModelError):
    """The embedded local model could not be assembled, verified or started."""


class ToolError(ThinkFlowError):
    """A tool could not be built (bad entry point, missing optional dependency).

    Failures while a tool runs are not raised: they become observations (``ToolResult`` with an error status).
    """


class MemoryStoreError(ThinkFlowError):
    """The long-term memory store failed (unreachable Chroma server, embedding model mismatch, bad import file)."""


class SessionError(ThinkFlowError):
    """A session could not be read or written."""


class TraceError(ThinkFlowError):
    """A trace could not be found or read."""


class BatchError(ThinkFlowError):
    """A batch cannot run: its inputs file is unreadable or invalid (``issues`` names each bad line), or its
    results file cannot be written."""

    def __init__(self, message: str, issues: list[ConfigIssue] | None = None):
        self.issues = list(issues or [])
        super().__init__("\n".join([message, *(str(i) for i in self.issues)]))
