"""Frozen specs built from validated config documents: AgentSpec, ModelSpec, ToolSpec, MemorySpec, LoopSpec, ...

These dataclasses are the in-memory form of the config language defined by ``schemas/*.schema.json`` (JSON Schema
is the only validator; ``tests/test_spec.py`` keeps schema and dataclasses in step). Times are in seconds, sizes in
bytes, budgets in tokens or US dollars. Mappings are plain dicts and must be treated as read-only. The builders
from validated dicts are in :mod:`thinkflow.config.specbuild`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

ActionStyle = Literal["auto", "native", "json", "react"]
ToolKind = Literal["python", "shell", "http", "mcp", "builtin"]

DEFAULT_LOCAL_MODEL = "local/qwen2.5-coder-1.5b"


@dataclass(frozen=True)
class ModelSpec:
    """Which model answers and how it is called (all routed through LiteLLM).

    Attributes:
        name: a LiteLLM model string (``openai/gpt-4o-mini``, ``ollama_chat/qwen2.5:7b``), ``local/<name-or-gguf>``
            for the embedded model, or None for the default (embedded unless a provider key is set).
        temperature: sampling temperature, or None for the provider default.
        max_tokens: cap on generated tokens per call, or None.
        timeout: seconds one model request may take before it fails (always passed explicitly); with num_retries and
            fallbacks it bounds a whole call too (:meth:`thinkflow.model.client.LiteLLMClient.call_limit`).
        num_retries: retries on transient errors (429, 5xx, connection), with backoff honouring Retry-After.
        fallbacks: model strings tried in order when the main model fails after retries.
        api_base: provider base URL (``http://127.0.0.1:11434`` for Ollama), or None.
        api_key: secret, already interpolated from the environment; never printed (repr hides it).
        stop: extra stop sequences.
        extra: provider parameters passed through unchanged (``num_ctx`` for Ollama, ``top_p``, ...).
        cache: LiteLLM response-cache settings (``{"type": "disk"|"redis", "dir", "ttl", ...}``), or None when off
            (see :mod:`thinkflow.model.cache`).
    """

    name: str | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    timeout: float = 120.0
    num_retries: int = 2
    fallbacks: tuple[str, ...] = ()
    api_base: str | None = None
    api_key: str | None = field(default=None, repr=False)
    stop: tuple[str, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)
    cache: dict[str, Any] | None = None


@dataclass(frozen=True)
class PromptSpec:
    """The agent's own system prompt template.

    Attributes:
        system: resolved path of a Jinja template file, or None.
        text: an inline Jinja template, or None (at most one of ``system``/``text`` is set).
        vars: variables passed to the template (data, never rendered as templates themselves).
    """

    system: Path | None = None
    text: str | None = None
    vars: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class LoopSpec:
    """Limits and action style of the ReAct loop.

    Attributes:
        style: "auto", "native", "json" or "react".
        max_steps: model calls allowed before the run ends with status ``max_steps``.
        timeout: wall-clock seconds for the whole run, or None.
        max_tokens: budget of total tokens (prompt + completion) over the run, or None.
        max_cost: budget in US dollars over the run, or None.
        max_tool_calls: budget of tool calls over the run, or None.
        max_empty_replies: empty replies retried with a nudge before the run fails.
        stream: stream the model's text to the console as it arrives.
        check_answer_files: send back (once) a final answer that names files which do not exist, or none of the
            files the run's tools wrote
            (see :mod:`thinkflow.run.answer_files`).
        retry_after_error: send back (once) a final answer given right after a step in which no tool call succeeded,
            with the errors, so the model fixes the call (see :mod:`thinkflow.run.answer_checks`).
        answer_tool: native style only: the model answers by calling an added ``final_answer`` tool. True: it
            must also call a tool at every step (``tool_choice: "required"``), so a server that constrains tool
            calls by grammar can never return an unparsed call or an echoed tool result as the answer (the
            embedded model gets the ``final_answer`` tool without ``"required"``, which its server mishandles).
            None (unset): on under ``style: auto`` for the embedded model (``local/...``), off otherwise. False:
            off.
    """

    style: ActionStyle = "auto"
    max_steps: int = 15
    timeout: float | None = 300.0
    max_tokens: int | None = None
    max_cost: float | None = None
    max_tool_calls: int | None = None
    max_empty_replies: int = 2
    stream: bool = False
    check_answer_files: bool = False
    retry_after_error: bool = True
    answer_tool: bool | None = None


@dataclass(frozen=True)
class ShortTermSpec:
    """The conversation kept in the prompt.

    Attributes:
        window: keep the last N messages (system prompt and task always kept), or None for all.
        max_tokens: trim the history to this many tokens (LiteLLM's counter for the model), or None.
        summarize_after: when the history passes N messages, older turns become a model-written summary; or None.
        summary_model: model string that writes summaries, or None for the agent's model.
    """

    window: int | None = None
    max_tokens: int | None = None
    summarize_after: int | None = None
    summary_model: str | None = None


@dataclass(frozen=True)
class RecallSpec:
    """When and how long-term memories are recalled.

    Attributes:
        when: "on_start" (once per run, before the first step) or "every_step".
        k: how many memories at most.
        min_score: minimum cosine similarity, 0..1.
        where: a Chroma metadata filter (``{"kind": "user_fact"}``), or None.
        reranker: a locally installed sentence-transformers cross-encoder name or path, or None.
    """

    when: Literal["on_start", "every_step"] = "on_start"
    k: int = 3
    min_score: float = 0.0
    where: dict[str, Any] | None = None
    reranker: str | None = None


@dataclass(frozen=True)
class RetentionSpec:
    """Applied when memories are written: at most ``max_items`` per collection, none older than ``max_age_days``."""

    max_items: int | None = None
    max_age_days: float | None = None


@dataclass(frozen=True)
class LongTermSpec:
    """Long-term memory in ChromaDB.

    Attributes:
        collection: Chroma collection name.
        path: directory of the embedded store (default ``.thinkflow/memory``), ignored when ``host`` is set.
        host, port: a Chroma server to use instead of the embedded store.
        embedding_model: sentence-transformers model name or local path (default all-MiniLM-L6-v2, packaged).
        query_threads: CPU threads for embedding a recall query (ONNX Runtime's or torch's, see
            thinkflow.memory.embeddings), or None for the backend's default.
        remember: what is written after a run: any of "final_answer", "tool_results", "user_facts".
        remember_tools: for "tool_results", the tools whose results are kept (empty: all).
        recall: the recall policy.
        retention: the retention policy.
    """

    collection: str
    path: Path | None = None
    host: str | None = None
    port: int | None = None
    embedding_model: str = "all-MiniLM-L6-v2"
    query_threads: int | None = 1
    remember: tuple[str, ...] = ("final_answer",)
    remember_tools: tuple[str, ...] = ()
    recall: RecallSpec = field(default_factory=RecallSpec)
    retention: RetentionSpec = field(default_factory=RetentionSpec)


@dataclass(frozen=True)
class MemorySpec:
    """The agent's memory policy: short-term always, long-term when declared."""

    short_term: ShortTermSpec = field(default_factory=ShortTermSpec)
    long_term: LongTermSpec | None = None


@dataclass(frozen=True)
class PlannerSpec:
    """Plan-then-execute: the model writes a plan of at most ``max_plan_steps`` steps before the loop.

    Attributes:
        enabled: whether to plan.
        max_plan_steps: upper bound on plan length.
        replan: "never" or "on_failure".
        max_replans: bound on plan revisions per run.
    """

    enabled: bool = False
    max_plan_steps: int = 8
    replan: Literal["never", "on_failure"] = "on_failure"
    max_replans: int = 2


@dataclass(frozen=True)
class TelemetrySpec:
    """OpenTelemetry spans of the agent's runs (see :mod:`thinkflow.run.telemetry`).

    Attributes:
        enabled: export spans (also on with ``--otel`` or an ``OTEL_EXPORTER_OTLP_ENDPOINT`` in the environment).
        endpoint: the OTLP endpoint, or None for the ``OTEL_*`` environment's (default ``localhost:4318``).
        protocol: "http/protobuf" or "grpc", or None for ``OTEL_EXPORTER_OTLP_PROTOCOL``'s.
        headers: headers sent with each export (write secrets as ``${VAR}``).
        service_name: the resource's ``service.name``, or None for ``OTEL_SERVICE_NAME`` (else "thinkflow").
        capture_content: record message content, tool arguments and results (secrets redacted).
    """

    enabled: bool = False
    endpoint: str | None = None
    protocol: Literal["http/protobuf", "grpc"] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    service_name: str | None = None
    capture_content: bool = False


@dataclass(frozen=True)
class HttpRequestSpec:
    """The request template of an http tool; every string may hold ``{param}`` placeholders.

    Attributes:
        method: HTTP method, upper case.
        url: URL template; placeholders in path and query are percent-encoded.
        params: query parameters (templates).
        headers: headers (templates; secrets come from ``${ENV}`` and are redacted when shown).
        json: a JSON body template (strings inside are templates), or None.
        body: a raw body template, or None.
    """

    method: str = "GET"
    url: str = ""
    params: dict[str, str] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict, repr=False)
    json: Any = None
    body: str | None = None


@dataclass(frozen=True)
class ToolSpec:
    """A tool the model can call.

    Common attributes:
        name: the name the model uses.
        description: what it does, written for the model.
        kind: "python", "shell", "http", "mcp" (the tools of a Model Context Protocol server), or "builtin" (tools
            shipped with ThinkFlow).
        parameters: JSON Schema of the arguments (type object), or None for a python tool whose schema is derived
            from the function's signature and docstring.
        timeout: seconds one call may take (always enforced).
        max_output: bytes of output shown to the model; head and tail are kept around a marked cut.
        confirm: a person must approve each call (denied without a terminal unless ``--yes``).
        source: the file the spec came from, or None (built-ins, entry points).
        secrets: values interpolated from the environment into this spec, redacted wherever shown.
    python: ``entrypoint`` as ``package.module:function``; ``quick`` (the function returns at once: it runs in the
        caller's thread, with no handoff, and its timeout is not enforced; Ctrl-C still interrupts it).
    shell: ``command`` argv templates, ``shell`` opt-in for a shell pipeline, ``cwd``, ``env`` (declared
        variables) and ``env_allow`` (names passed through from the environment besides the default allowlist).
    http: ``request``, ``response_json_path``, ``allow_hosts``, ``allow_private``, ``max_redirects``.
    mcp: one server, over stdio (``command`` argv, already interpolated, run without a shell, with ``cwd``,
        ``env`` and ``env_allow`` as for shell tools) or streamable HTTP (``url``, ``headers`` whose secrets are
        redacted); ``tools`` the allowlist of server tool names with per-tool rules (empty: every tool the server
        lists; each ToolRef's ``name`` is the server's name for the tool); ``prefix`` put before each name the
        model sees; ``startup_timeout`` seconds the server may take to start and list its tools; ``timeout`` is
        per call.
    """

    name: str
    description: str
    kind: ToolKind
    parameters: dict[str, Any] | None = None
    timeout: float = 30.0
    max_output: int = 16384
    confirm: bool = False
    source: Path | None = None
    secrets: tuple[str, ...] = field(default=(), repr=False)
    entrypoint: str | None = None
    quick: bool = False
    command: tuple[str, ...] = ()
    shell: bool = False
    cwd: Path | None = None
    env: dict[str, str] = field(default_factory=dict, repr=False)
    env_allow: tuple[str, ...] = ()
    request: HttpRequestSpec | None = None
    response_json_path: str | None = None
    allow_hosts: tuple[str, ...] = ()
    allow_private: bool = False
    max_redirects: int = 5
    url: str | None = None
    headers: dict[str, str] = field(default_factory=dict, repr=False)
    tools: tuple["ToolRef", ...] = ()
    prefix: str = ""
    startup_timeout: float = 30.0


@dataclass(frozen=True)
class ToolRef:
    """How an agent uses one tool.

    Attributes:
        name: the tool's name.
        confirm: overrides the tool's own ``confirm`` when not None.
        allow: per argument name, regexes one of which the argument's text must match (``re.search``).
        deny: per argument name, regexes none of which the argument's text may match.
    """

    name: str
    confirm: bool | None = None
    allow: dict[str, tuple[str, ...]] = field(default_factory=dict)
    deny: dict[str, tuple[str, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class SubAgentRef:
    """A sub-agent the model can delegate to, shown as a tool ``name`` taking a ``task`` string."""

    name: str
    description: str
    spec: "AgentSpec"


@dataclass(frozen=True)
class AgentSpec:
    """A whole, checked agent.

    Attributes:
        name, description: identity (the name keys sessions, traces and memory metadata).
        model: the model spec.
        prompt: the agent's system prompt template.
        tools: the tools the agent names, in order, with per-agent rules.
        tool_specs: every named tool resolved to its spec, by name.
        workspace: root directory for the file built-ins (read_file, list_dir, write_file, read_csv, ...).
        loop, memory, planner: policies.
        telemetry: OpenTelemetry export of the agent's runs.
        agents: sub-agents, resolved recursively (cycles are rejected at load).
        max_depth: how deep delegation may nest from this agent.
        output_schema: JSON Schema the final answer (parsed as JSON) must satisfy, or None.
        source: the agent file.
        secrets: values interpolated from the environment, redacted in errors, logs and traces.
        tool_paths: extra tool files or folders the agent listed, resolved against its folder (already searched
            at load; the tools found are in ``tool_specs``).
    """

    name: str
    description: str = ""
    model: ModelSpec = field(default_factory=ModelSpec)
    prompt: PromptSpec = field(default_factory=PromptSpec)
    tools: tuple[ToolRef, ...] = ()
    tool_specs: dict[str, ToolSpec] = field(default_factory=dict)
    workspace: Path = Path(".")
    loop: LoopSpec = field(default_factory=LoopSpec)
    memory: MemorySpec = field(default_factory=MemorySpec)
    planner: PlannerSpec = field(default_factory=PlannerSpec)
    telemetry: TelemetrySpec = field(default_factory=TelemetrySpec)
    agents: tuple[SubAgentRef, ...] = ()
    max_depth: int = 3
    output_schema: dict[str, Any] | None = None
    source: Path | None = None
    secrets: tuple[str, ...] = field(default=(), repr=False)
    tool_paths: tuple[Path, ...] = ()
