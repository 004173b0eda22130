"""OpenTelemetry spans of runs, per the OpenTelemetry GenAI semantic conventions.

A :class:`SpanRecorder` is an event sink (an ``on_event`` of :func:`thinkflow.run.loop.run`): from a run's events
it builds one ``invoke_agent`` span per run, one ``chat`` span per model call and one ``execute_tool`` span per
tool call, with sub-agent runs (their events arrive wrapped in ``subagent_event``) nested under the tool call that
started them, and plan steps as ``plan_step`` spans under their run. Span times are the events' own times, so the
spans show exactly what the trace shows.

Attributes follow https://opentelemetry.io/docs/specs/semconv/gen-ai/ (``gen_ai.operation.name``,
``gen_ai.provider.name``, ``gen_ai.request.model``, ``gen_ai.response.model``, ``gen_ai.usage.input_tokens`` /
``output_tokens``, ``gen_ai.response.finish_reasons``, ``gen_ai.agent.name``, ``gen_ai.conversation.id``,
``gen_ai.tool.name``, ``gen_ai.tool.call.id``, ``error.type``), plus ``thinkflow.run.id``, ``thinkflow.run.status``
and ``thinkflow.step``. Message content (``gen_ai.input.messages``, ``gen_ai.output.messages``, tool arguments and
results) is recorded only when ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`` (or
``telemetry.capture_content``), and always with the agent's secrets redacted.

Off by default. :func:`settings_from` turns it on from the standard ``OTEL_*`` variables (an OTLP endpoint set),
``--otel``, or an agent's ``telemetry:`` block; only then is the OpenTelemetry SDK imported (in :class:`Telemetry`,
the only place).
"""

from __future__ import annotations

import atexit
import json
import threading
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from thinkflow import __version__
from thinkflow.redaction import Redactor
from thinkflow.run import events as ev

CAPTURE_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
MAX_ATTRIBUTE_CHARS = 8_000

#: LiteLLM provider prefix -> ``gen_ai.provider.name`` (well-known values of the conventions where one exists).
PROVIDERS = {
    "openai": "openai", "azure": "azure.ai.openai", "azure_ai": "azure.ai.inference", "anthropic": "anthropic",
    "gemini": "gcp.gemini", "vertex_ai": "gcp.vertex_ai", "bedrock": "aws.bedrock", "cohere": "cohere",
    "mistral": "mistral_ai", "groq": "groq", "deepseek": "deepseek", "xai": "x_ai", "perplexity": "perplexity",
    "watsonx": "ibm.watsonx.ai", "ollama": "ollama", "ollama_chat": "ollama", "hosted_vllm": "vllm",
    "local": "llama.cpp",
}


def provider_name(model: str) -> str:
    """``gen_ai.provider.name`` for a LiteLLM model string: ``"openai/gpt-4o"`` -> ``"openai"``,
    ``"ollama_chat/qwen2.5"`` -> ``"ollama"``, an unknown prefix as it is, no prefix -> ``"openai"``
    (LiteLLM's default)."""
    prefix, sep, _ = model.partition("/")
    return PROVIDERS.get(prefix, prefix) if sep else "openai"


@dataclass(frozen=True)
class TelemetrySettings:
    """Where spans go.

    Attributes:
        endpoint: the OTLP endpoint (``http://host:4318`` for http/protobuf, ``host:4317`` for grpc), or None to
            let the exporter read ``OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT`` (default ``localhost:4318``).
        protocol: ``"http/protobuf"`` or ``"grpc"``.
        headers: ``(name, value)`` pairs sent with each export (secrets from the environment); empty:
            ``OTEL_EXPORTER_OTLP_HEADERS``.
        service_name: ``service.name`` of the resource, or None (``OTEL_SERVICE_NAME``, else ``thinkflow``).
        capture_content: record message content, tool arguments and results (redacted).
    """

    endpoint: str | None = None
    protocol: str = "http/protobuf"
    headers: tuple[tuple[str, str], ...] = ()
    service_name: str | None = None
    capture_content: bool = False


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


def settings_from(env: Mapping[str, str], block: Any = None, *, flag: bool = False) -> TelemetrySettings | None:
    """The telemetry settings in force, or None when telemetry is off.

    On when ``flag`` (``--otel``), when ``block`` (an agent's :class:`~thinkflow.config.spec.TelemetrySpec`) is
    enabled, or when ``OTEL_EXPORTER_OTLP_ENDPOINT`` / ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` is set; off whatever
    else when ``OTEL_SDK_DISABLED=true`` or ``OTEL_TRACES_EXPORTER=none``. The block's values win over the
    environment's; the protocol comes from ``OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL`` otherwise.
    """
    if _truthy(env.get("OTEL_SDK_DISABLED")) or env.get("OTEL_TRACES_EXPORTER", "").strip().lower() == "none":
        return None
    from_env = bool(env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))
    enabled_block = block is not None and getattr(block, "enabled", False)
    if not (flag or enabled_block or from_env):
        return None
    protocol = (env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or env.get("OTEL_EXPORTER_OTLP_PROTOCOL")
                or "http/protobuf").strip()
    capture = _truthy(env.get(CAPTURE_ENV))
    if enabled_block:
        return TelemetrySettings(endpoint=block.endpoint, protocol=block.protocol or protocol,
                                 headers=tuple(sorted(block.headers.items())), service_name=block.service_name,
                                 capture_content=block.capture_content or capture)
    return TelemetrySettings(protocol=protocol, capture_content=capture)


class Telemetry:
    """A tracer provider exporting spans over OTLP (or to ``exporter``, for tests).

    Args:
        settings: where spans go.
        exporter: a span exporter to use instead of OTLP (e.g. the SDK's ``InMemorySpanExporter``); spans are then
            exported as each ends (a simple processor), else batched.
    Raises:
        ImportError: the OpenTelemetry SDK is not installed (``pip install 'thinkflow[otel]'``).
    """

    def __init__(self, settings: TelemetrySettings, exporter: Any = None):
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

        attributes = {"service.name": settings.service_name} if settings.service_name else {}
        resource = Resource.create(attributes)
        if "service.name" not in attributes and resource.attributes.get("service.name", "").startswith("unknown"):
            resource = resource.merge(Resource.create({"service.name": "thinkflow"}))
        self.settings = settings
        self.provider = TracerProvider(resource=resource)
        if exporter is not None:
            self.provider.add_span_processor(SimpleSpanProcessor(exporter))
        else:
            self.provider.add_span_processor(BatchSpanProcessor(_otlp_exporter(settings)))
        self.tracer = self.provider.get_tracer("thinkflow", __version__)
        self._closed = False

    def recorder(self, *, secrets: Iterable[str] = ()) -> "SpanRecorder":
        """A new event sink for one top-level run."""
        return SpanRecorder(self.tracer, secrets=secrets, capture_content=self.settings.capture_content)

    def shutdown(self) -> None:
        """Export every span still buffered, then stop (idempotent). Call before the process exits."""
        if not self._closed:
            self._closed = True
            self.provider.force_flush()
            self.provider.shutdown()


EXPORT_TIMEOUT_S = 5.0  #: per export, unless OTEL_EXPORTER_OTLP_(TRACES_)TIMEOUT says otherwise


def _otlp_exporter(settings: TelemetrySettings) -> Any:
    """The OTLP span exporter; it reads what is not given here from the ``OTEL_EXPORTER_OTLP_*`` environment."""
    import os

    headers = dict(settings.headers) if settings.headers else None
    timeout = None if (os.environ.get("OTEL_EXPORTER_OTLP_TIMEOUT")
                       or os.environ.get("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT")) else EXPORT_TIMEOUT_S
    if settings.protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter

        return GrpcExporter(endpoint=settings.endpoint, headers=headers, timeout=timeout)
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    endpoint = settings.endpoint
    if endpoint and not endpoint.rstrip("/").endswith("/v1/traces"):
        endpoint = endpoint.rstrip("/") + "/v1/traces"
    return OTLPSpanExporter(endpoint=endpoint, headers=headers, timeout=timeout)


_SHARED: dict[TelemetrySettings, Telemetry] = {}
_SHARED_LOCK = threading.Lock()


def shared(settings: TelemetrySettings) -> Telemetry:
    """One :class:`Telemetry` per settings in this process (batch workers, Ray tasks), flushed at exit."""
    with _SHARED_LOCK:
        if settings not in _SHARED:
            _SHARED[settings] = Telemetry(settings)
            atexit.register(_SHARED[settings].shutdown)
        return _SHARED[settings]


def _ns(seconds: float) -> int:
    return int(seconds * 1_000_000_000)


@dataclass
class _RunState:
    """The open spans of one run (the top run or a sub-agent's)."""

    span: Any
    agent: str
    model: str
    chat: Any = None
    plan_step: Any = None
    tools: dict[str, tuple[str, Any]] = field(default_factory=dict)  # call id -> (tool name, span)


class SpanRecorder:
    """Builds spans from one top-level run's events (use as, or inside, the run's ``on_event``). Thread-safe.

    Args:
        tracer: an OpenTelemetry tracer.
        secrets: values redacted from every recorded text.
        capture_content: record message content and tool arguments/results.
    """

    def __init__(self, tracer: Any, *, secrets: Iterable[str] = (), capture_content: bool = False):
        from opentelemetry import trace

        self._trace = trace
        self.tracer = tracer
        self.redact = Redactor(secrets)
        self.capture = capture_content
        self._runs: dict[tuple[int, str], _RunState] = {}
        self._top = ""
        self._lock = threading.Lock()

    def __call__(self, event: Any) -> None:
        with self._lock:
            if isinstance(event, ev.SubAgentEvent):
                inner = ev.from_dict(event.event)
                if isinstance(inner, ev.Event):
                    parent = self._runs.get((event.depth - 1, event.parent_agent)) if event.depth > 1 else \
                        self._runs.get((0, self._top))
                    self._handle(inner, (event.depth, event.agent), parent, event.agent)
                return
            if isinstance(event, ev.RunStarted):
                self._top = event.agent
            self._handle(event, (0, self._top), None, "")

    # ------------------------------------------------------------------------------------------------ events
    def _handle(self, event: Any, key: tuple[int, str], parent: _RunState | None, tool_name: str) -> None:
        state = self._runs.get(key)
        if isinstance(event, ev.RunStarted):
            self._start_run(event, key, parent, tool_name)
            return
        if state is None:
            return
        under = state.plan_step or state.span
        if isinstance(event, ev.ModelRequest):
            self._end(state.chat, event.time)
            attributes = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": provider_name(state.model),
                          "gen_ai.request.model": _bare_model(state.model), "thinkflow.step": event.step}
            if self.capture:
                attributes["gen_ai.input.messages"] = self._json(_input_messages(event.messages))
            state.chat = self._start(f"chat {_bare_model(state.model)}", under, event.time, attributes, client=True)
        elif isinstance(event, ev.ModelReplied) and state.chat is not None:
            span, state.chat = state.chat, None
            usage = event.usage or {}
            span.set_attribute("gen_ai.response.model", _bare_model(event.model or state.model))
            span.set_attribute("gen_ai.usage.input_tokens", int(usage.get("prompt_tokens") or 0))
            span.set_attribute("gen_ai.usage.output_tokens", int(usage.get("completion_tokens") or 0))
            if event.finish_reason:
                span.set_attribute("gen_ai.response.finish_reasons", [event.finish_reason])
            if self.capture:
                span.set_attribute("gen_ai.output.messages", self._json(_output_messages(event)))
            self._end(span, event.time)
        elif isinstance(event, ev.ToolCalled):
            attributes = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": event.name,
                          "gen_ai.tool.call.id": event.call_id, "gen_ai.tool.type": "function",
                          "thinkflow.step": event.step}
            if self.capture:
                attributes["gen_ai.tool.call.arguments"] = self._json(event.arguments)
            state.tools[event.call_id] = (event.name,
                                          self._start(f"execute_tool {event.name}", under, event.time, attributes))
        elif isinstance(event, ev.ToolReturned) and event.call_id in state.tools:
            _, span = state.tools.pop(event.call_id)
            span.set_attribute("thinkflow.tool.status", event.status)
            if self.capture:
                span.set_attribute("gen_ai.tool.call.result", self._text(event.observation))
            if event.status != "ok":
                self._fail(span, event.status, event.observation)
            self._end(span, event.time)
        elif isinstance(event, ev.PlanStepStarted):
            self._end(state.plan_step, event.time)
            state.plan_step = self._start(f"plan_step {event.index}", state.span, event.time,
                                          {"thinkflow.plan.step": event.index})
        elif isinstance(event, ev.StepOutcome) and state.plan_step is not None:
            span, state.plan_step = state.plan_step, None
            span.set_attribute("thinkflow.run.status", event.status)
            if event.status != "completed":
                self._fail(span, event.status, event.error or "")
            self._end(span, event.time)
        elif isinstance(event, (ev.RunWarning, ev.StyleSwitched)):
            attributes = {k: v for k, v in event.to_dict().items() if isinstance(v, (str, int, float, bool))
                          and k not in ("type", "time")}
            state.span.add_event(event.type, self.redact(attributes), timestamp=_ns(event.time))
        elif isinstance(event, ev.RunFinished):
            self._finish_run(event, key, state)

    def _start_run(self, event: Any, key: tuple[int, str], parent: _RunState | None, tool_name: str) -> None:
        under = parent.span if parent is not None else None
        if parent is not None:  # nest under the open call of the sub-agent's tool, the newest one
            calls = [span for name, span in parent.tools.values() if name == tool_name]
            under = calls[-1] if calls else (parent.plan_step or parent.span)
        attributes = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": event.agent,
                      "gen_ai.provider.name": provider_name(event.model),
                      "gen_ai.request.model": _bare_model(event.model), "thinkflow.run.id": event.run_id}
        if event.session:
            attributes["gen_ai.conversation.id"] = event.session
        self._runs[key] = _RunState(self._start(f"invoke_agent {event.agent}", under, event.time, attributes),
                                    event.agent, event.model)

    def _finish_run(self, event: Any, key: tuple[int, str], state: _RunState) -> None:
        for span in [state.chat, state.plan_step, *(s for _, s in state.tools.values())]:
            if span is not None:
                self._fail(span, event.status, event.error or "the run ended first")
                self._end(span, event.time)
        span = state.span
        span.set_attribute("thinkflow.run.status", event.status)
        span.set_attribute("thinkflow.run.steps", event.steps)
        usage = event.usage or {}
        span.set_attribute("gen_ai.usage.input_tokens", int(usage.get("prompt_tokens") or 0))
        span.set_attribute("gen_ai.usage.output_tokens", int(usage.get("completion_tokens") or 0))
        if event.status != "completed":
            self._fail(span, event.status, event.error or "")
        self._end(span, event.time)
        del self._runs[key]

    # ------------------------------------------------------------------------------------------------ helpers
    def _start(self, name: str, parent: Any, at: float, attributes: dict[str, Any], *, client: bool = False) -> Any:
        context = self._trace.set_span_in_context(parent) if parent is not None else None
        kind = self._trace.SpanKind.CLIENT if client else self._trace.SpanKind.INTERNAL
        return self.tracer.start_span(name, context=context, kind=kind, attributes=attributes, start_time=_ns(at))

    def _end(self, span: Any, at: float) -> None:
        if span is not None and span.is_recording():
            span.end(end_time=_ns(at))

    def _fail(self, span: Any, error_type: str, message: str) -> None:
        from opentelemetry.trace import Status, StatusCode

        span.set_attribute("error.type", error_type)
        span.set_status(Status(StatusCode.ERROR, self._text(message)[:500]))

    def _text(self, value: str) -> str:
        return self.redact.text(value)[:MAX_ATTRIBUTE_CHARS]

    def _json(self, value: Any) -> str:
        return self._text(json.dumps(self.redact(value), ensure_ascii=False, default=str))


def _bare_model(model: str) -> str:
    """The model name without LiteLLM's provider prefix (``openai/gpt-4o`` -> ``gpt-4o``)."""
    return model.partition("/")[2] or model


def _input_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Trace messages in the conventions' shape: ``{"role", "parts": [{"type": "text", "content"}, ...]}``."""
    out = []
    for m in messages:
        parts: list[dict[str, Any]] = []
        if m.get("content"):
            kind = "tool_call_response" if m.get("role") == "tool" else "text"
            parts.append({"type": kind, "content": m["content"]} if kind == "text"
                         else {"type": kind, "id": m.get("tool_call_id"), "response": m["content"]})
        for call in m.get("tool_calls") or []:
            parts.append({"type": "tool_call", "id": call.get("id"), "name": call.get("name"),
                          "arguments": call.get("arguments")})
        out.append({"role": m.get("role"), "parts": parts})
    return out


def _output_messages(event: Any) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = [{"type": "text", "content": event.text}] if event.text else []
    parts += [{"type": "tool_call", "id": c.get("id"), "name": c.get("name"), "arguments": c.get("arguments")}
              for c in event.tool_calls]
    return [{"role": "assistant", "parts": parts, "finish_reason": event.finish_reason or ""}]

