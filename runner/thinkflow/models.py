"""Model clients: every model call goes through LiteLLM (this is the only module importing it).

* :func:`resolve_model` picks the effective model: ``--model`` override, the spec's model, a default for the first
  provider key found in the environment, or the embedded local model.
* :func:`build_client` returns a :class:`LiteLLMClient` for any LiteLLM model string (``openai/gpt-4o-mini``,
  ``ollama_chat/qwen2.5:7b``, ...) or for ``local/...`` (the embedded llama.cpp server from
  :mod:`thinkflow.local_model`, started on first use and reached as ``openai/<alias>`` with ``api_base``).
* :meth:`LiteLLMClient.complete` sends one chat completion and returns a normalised
  :class:`~thinkflow.messages.ModelReply`; provider failures become the typed errors of :mod:`thinkflow.errors`,
  each with the fix in ``hint``.

Call policy (provider docs + LiteLLM 1.x source):
* ``timeout`` (seconds) is always passed explicitly; LiteLLM's own default is 600 s. A timeout is not retried.
* Retries are done here, not by LiteLLM: LiteLLM's ``num_retries`` re-calls immediately with a constant strategy
  (tenacity, no wait), ignores ``Retry-After`` and also retries 401/404. So every call goes out with
  ``num_retries=0, max_retries=0`` and this module retries 429, 5xx and connection errors up to
  ``spec.num_retries`` times, waiting ``Retry-After`` (seconds or HTTP date; ``retry-after-ms``) when the
  provider sends it, capped at 60 s, and exponential backoff (0.5 s, 1 s, 2 s ... max 8 s) otherwise.
* ``fallbacks`` are tried in order after the main model fails (after its retries). ``api_base`` and ``api_key`` of
  the spec apply to the main model only; fallbacks use their provider's environment variables.
* Ollama (``ollama/...``, ``ollama_chat/...``): when ``extra`` has no ``num_ctx`` the client sends
  ``num_ctx = 8192`` because Ollama's default context (2048-4096 tokens depending on version) silently truncates
  long prompts (agent histories with tool results pass that quickly).
* Embedded model (``local/...``): ``extra.n_ctx`` (default 8192) and ``extra.n_threads`` (default CPU cores) size
  the in-process llama.cpp server and are not sent with requests; its cost is recorded as 0.0.
* ``response_format``: a JSON-schema format is sent when LiteLLM says the model supports response schemas (always
  for the embedded model: llama.cpp constrains output with a grammar), downgraded to ``{"type": "json_object"}``
  when only JSON mode is supported, dropped otherwise.
* ``LITELLM_LOCAL_MODEL_COST_MAP=True`` is set before LiteLLM is imported, so importing it makes no network call.
"""

from __future__ import annotations

import email.utils
import os
import random
import re
import secrets
import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping, Protocol, Sequence

from .errors import (
    AuthenticationError,
    ContextWindowError,
    ModelError,
    ModelNotFoundError,
    ModelTimeoutError,
    ProviderUnavailableError,
    RateLimitError,
)
from .messages import ArgumentsError, Message, ModelReply, ToolCall, Usage, decode_arguments
from .spec import DEFAULT_LOCAL_MODEL, ModelSpec

Progress = Callable[[str], None]

#: provider (LiteLLM prefix) -> environment variable of its API key
PROVIDER_KEYS: dict[str, str] = {
    "openai": "OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
    "gemini": "GEMINI_API_KEY",
    "groq": "GROQ_API_KEY",
    "mistral": "MISTRAL_API_KEY",
    "deepseek": "DEEPSEEK_API_KEY",
    "openrouter": "OPENROUTER_API_KEY",
    "xai": "XAI_API_KEY",
    "together_ai": "TOGETHERAI_API_KEY",
    "fireworks_ai": "FIREWORKS_API_KEY",
    "cohere": "COHERE_API_KEY",
    "cohere_chat": "COHERE_API_KEY",
    "perplexity": "PERPLEXITYAI_API_KEY",
}

#: when no model is named: the first key found (in this order) picks the default model
DEFAULT_MODELS: tuple[tuple[str, str], ...] = (
    ("OPENAI_API_KEY", "openai/gpt-4o-mini"),
    ("ANTHROPIC_API_KEY", "anthropic/claude-haiku-4-5"),
    ("GEMINI_API_KEY", "gemini/gemini-2.5-flash"),
    ("GOOGLE_API_KEY", "gemini/gemini-2.5-flash"),
    ("GROQ_API_KEY", "groq/openai/gpt-oss-20b"),
    ("MISTRAL_API_KEY", "mistral/mistral-small-latest"),
    ("DEEPSEEK_API_KEY", "deepseek/deepseek-chat"),
    ("OPENROUTER_API_KEY", "openrouter/openai/gpt-4o-mini"),
)

OLLAMA_PROVIDERS = ("ollama", "ollama_chat")
OLLAMA_DEFAULT_NUM_CTX = 8192
OLLAMA_DEFAULT_BASE = "http://localhost:11434"
MAX_RETRY_AFTER = 60.0
LOCAL_API_KEY = "thinkflow-local"  # the in-process llama.cpp server checks no key; the OpenAI client needs one
LOCAL_EXTRA_KEYS = ("n_ctx", "n_threads")  # consumed by the embedded server, not sent with requests


@dataclass(frozen=True)
class Capabilities:
    """What a model can do natively (as LiteLLM's model map knows it).

    Attributes:
        function_calling: native tool calls (``tools=`` / ``tool_calls`` in replies).
        json_schema: ``response_format={"type": "json_schema", ...}`` constrains the reply to a schema.
        json_mode: ``response_format={"type": "json_object"}`` is accepted.
    """

    function_calling: bool
    json_schema: bool
    json_mode: bool


class ModelClient(Protocol):
    """What the loop needs from a model. ``model`` is the effective model string (for example the fallback that
    answered is reported in :attr:`ModelReply.model`, not here)."""

    model: str

    def capabilities(self) -> Capabilities: ...

    def complete(self, messages: Sequence[Message], *, tools: list[dict] | None = None,
                 response_format: dict | None = None, stop: Sequence[str] = (),
                 on_text: Callable[[str], None] | None = None) -> ModelReply: ...

    def count_tokens(self, messages: Sequence[Message]) -> int: ...


# --- LiteLLM import -------------------------------------------------------------------------------------------------

def _litellm() -> Any:
    """Import LiteLLM with the bundled model/price map (no network at import) and quiet debug banners."""
    os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    import litellm

    litellm.suppress_debug_info = True
    return litellm


def provider_of(model: str) -> str:
    """The LiteLLM provider of a model string (``"openai"`` for ``gpt-4o-mini``), or the text before the first
    ``/``, or "" when unknown. ``local/...`` -> ``"local"``."""
    if model.startswith("local/"):
        return "local"
    try:
        return _litellm().get_llm_provider(model)[1] or ""
    except Exception:  # LiteLLM raises BadRequestError for unknown providers
        return model.split("/", 1)[0] if "/" in model else ""


def key_env_var(model: str) -> str | None:
    """Name of the environment variable holding the API key for ``model``'s provider, or None (Ollama, local)."""
    provider = provider_of(model)
    if provider in PROVIDER_KEYS:
        return PROVIDER_KEYS[provider]
    if provider in OLLAMA_PROVIDERS or provider == "local" or not provider:
        return None
    try:
        missing = _litellm().validate_environment(model=model).get("missing_keys") or []
    except Exception:
        return None
    keys = [k for k in missing if k.endswith("_KEY")]
    return keys[0] if keys else None


# --- model resolution ------------------------------------------------------------------------------------------------

def resolve_model(spec: ModelSpec, *, override: str | None = None,
                  environ: Mapping[str, str] | None = None) -> tuple[ModelSpec, str | None]:
    """Return the effective model spec and a one-line notice (or None).

    * ``override`` (``--model``) replaces ``spec.name`` for this run; when its provider differs from the spec's
      model, the spec's ``api_base`` and ``api_key`` (meant for the other provider) are dropped.
    * ``spec.name`` set: used as is.
    * ``spec.name`` None: the default model of the first provider key set in ``environ`` (see
      :data:`DEFAULT_MODELS`), else the embedded model ``local/qwen2.5-coder-1.5b``. The notice says which.
    No network, no LiteLLM import.
    """
    env = os.environ if environ is None else environ
    if override:
        if spec.name and _prefix(override) != _prefix(spec.name):
            return replace(spec, name=override, api_base=None, api_key=None), None
        return replace(spec, name=override), None
    if spec.name:
        return spec, None
    for var, default in DEFAULT_MODELS:
        if env.get(var, "").strip():
            return replace(spec, name=default), f"No model configured: using {default} ({var} is set)."
    return (replace(spec, name=DEFAULT_LOCAL_MODEL),
            f"No model configured and no provider key found: using the embedded local model {DEFAULT_LOCAL_MODEL}.")


def _prefix(model: str) -> str:
    return model.split("/", 1)[0] if "/" in model else "openai"


def build_client(spec: ModelSpec, *, override: str | None = None,
                 on_progress: Progress | None = None) -> "LiteLLMClient":
    """Build the client for ``spec`` (after :func:`resolve_model` with ``override``).

    Nothing is started or contacted here; the embedded model is assembled and loaded on the first
    :meth:`~LiteLLMClient.complete`, reporting through ``on_progress``.
    """
    effective, _ = resolve_model(spec, override=override)
    return LiteLLMClient(effective, on_progress=on_progress)


# --- the client ----------------------------------------------------------------------------------------------------

@dataclass
class _Route:
    """One model to try: ``name`` as configured, ``model``/``api_base``/``api_key`` as sent to LiteLLM."""

    name: str
    model: str
    api_base: str | None = None
    api_key: str | None = field(default=None, repr=False)
    extra: dict[str, Any] = field(default_factory=dict)
    local: bool = False
    ready: bool = True


class LiteLLMClient:
    """A :class:`ModelClient` over ``litellm.completion``.

    Attributes:
        model: the effective model string.
        spec: the model spec (with the effective name).
        usage_total: usage and cost summed over every call of this client.
        sleep: function used to wait between retries (seconds); tests replace it.
    """

    def __init__(self, spec: ModelSpec, *, on_progress: Progress | None = None,
                 sleep: Callable[[float], None] = time.sleep):
        if not spec.name:
            spec, _ = resolve_model(spec)
        self.spec = spec
        self.model: str = spec.name or DEFAULT_LOCAL_MODEL
        self.on_progress = on_progress
        self.sleep = sleep
        self.usage_total = Usage()
        self._caps: Capabilities | None = None
        self._routes = [self._route(self.model, primary=True)] + [self._route(m, primary=False) for m in spec.fallbacks]

    # routes ---------------------------------------------------------------------------------------------------------
    def _route(self, name: str, *, primary: bool) -> _Route:
        extra = dict(self.spec.extra) if primary else {}
        if name.startswith("local/"):
            return _Route(name=name, model="", extra=extra, local=True, ready=False)
        api_base = self.spec.api_base if primary else None
        api_key = self.spec.api_key if primary else None
        if _prefix(name) in OLLAMA_PROVIDERS:
            extra.setdefault("num_ctx", OLLAMA_DEFAULT_NUM_CTX)
        return _Route(name=name, model=name, api_base=api_base, api_key=api_key, extra=extra)

    def _ready(self, route: _Route) -> _Route:
        """Start the embedded server for a ``local/`` route on first use."""
        if route.ready:
            return route
        from . import local_model

        n_ctx = route.extra.get("n_ctx")
        threads = route.extra.get("n_threads")
        server = local_model.get_server(route.name, on_progress=self.on_progress, n_ctx=n_ctx, threads=threads)
        route.model = f"openai/{server.alias}"
        route.api_base = f"{server.base_url}/v1"
        route.api_key = LOCAL_API_KEY
        route.extra = {k: v for k, v in route.extra.items() if k not in LOCAL_EXTRA_KEYS}
        route.ready = True
        return route

    # capabilities -----------------------------------------------------------------------------------------------------
    def capabilities(self) -> Capabilities:
        """What LiteLLM knows the main model supports (cached). The embedded model reports JSON schema (llama.cpp
        grammar-constrained output) and JSON mode but no native function calling (its tool calls come back as JSON
        text). Unknown models report False for what LiteLLM does not list."""
        if self._caps is None:
            self._caps = _capabilities(self.model)
        return self._caps

    # token counting ---------------------------------------------------------------------------------------------------
    def count_tokens(self, messages: Sequence[Message]) -> int:
        """Tokens of ``messages`` by ``litellm.token_counter`` for the model (its tokenizer when LiteLLM has it,
        else tiktoken cl100k); a rough ``chars / 4 + 4 per message`` estimate if that fails."""
        dicts = [_message_dict(m) for m in messages]
        model = self._routes[0].model or "gpt-3.5-turbo"
        try:
            return int(_litellm().token_counter(model=model, messages=dicts))
        except Exception:
            return sum(len(str(d.get("content") or "")) // 4 + 4 for d in dicts)

    # completion -------------------------------------------------------------------------------------------------------
    def complete(self, messages: Sequence[Message], *, tools: list[dict] | None = None,
                 response_format: dict | None = None, stop: Sequence[str] = (),
                 on_text: Callable[[str], None] | None = None) -> ModelReply:
        """Send one chat completion; return the normalised reply.

        Args:
            messages: the conversation (:class:`Message` or OpenAI message dicts).
            tools: OpenAI tool definitions (``{"type": "function", "function": {...}}``), sent as given; the caller
                decides native tool calling (see :meth:`capabilities`).
            response_format: ``{"type": "json_schema", "json_schema": {"name", "schema"}}``,
                ``{"type": "json_object"}``, or a bare JSON Schema (wrapped as json_schema); adapted to what the
                model supports (see module doc).
            stop: stop sequences added to ``spec.stop``.
            on_text: when given, the reply is streamed and ``on_text(chunk)`` is called as text arrives.
        Returns a :class:`ModelReply` whose ``model`` is the model that answered (main or fallback).
        Raises AuthenticationError, ModelNotFoundError, ProviderUnavailableError, RateLimitError, ModelTimeoutError,
        ContextWindowError, LocalModelError or ModelError (the main model's error when every fallback failed too).
        """
        msgs = [_message_dict(m) for m in messages]
        failures: list[tuple[str, ModelError]] = []
        streamed = [False]
        for route in self._routes:
            try:
                reply = self._with_retries(route, msgs, tools, response_format, stop, on_text, streamed)
            except ModelError as exc:
                failures.append((route.name, exc))
                if streamed[0]:  # text already shown: trying another model would show a second answer
                    break
                continue
            self.usage_total.add(reply.usage)
            return reply
        first_name, first = failures[0]
        if len(failures) == 1:
            raise first
        others = "; ".join(f"{name}: {_bare_message(exc)}" for name, exc in failures[1:])
        raise type(first)(f"{_bare_message(first)}; fallbacks failed too: {others}",
                          model=first.model, hint=first.hint) from first

    def _with_retries(self, route: _Route, msgs: list[dict], tools: list[dict] | None,
                      response_format: dict | None, stop: Sequence[str], on_text: Callable[[str], None] | None,
                      streamed: list[bool]) -> ModelReply:
        attempt = 0
        while True:
            route = self._ready(route)
            try:
                return self._call(route, msgs, tools, response_format, stop, on_text, streamed)
            except ModelError:
                raise
            except Exception as exc:
                if not _is_provider_error(exc):
                    raise
                if streamed[0] or attempt >= self.spec.num_retries or not _retryable(exc):
                    raise self._map_error(exc, route, attempt) from None
                self.sleep(_retry_delay(exc, attempt))
                attempt += 1

    def _kwargs(self, route: _Route, msgs: list[dict], tools: list[dict] | None, response_format: dict | None,
                stop: Sequence[str]) -> dict[str, Any]:
        spec = self.spec
        kwargs: dict[str, Any] = {
            "model": route.model,
            "messages": msgs,
            "timeout": float(spec.timeout),
            "num_retries": 0,
            "max_retries": 0,
            "drop_params": True,
        }
        if route.api_base:
            kwargs["api_base"] = route.api_base
        api_key = route.api_key
        if not api_key and route.api_base and _prefix(route.model) == "openai":
            var = PROVIDER_KEYS["openai"]
            api_key = os.environ.get(var) or "no-key"  # OpenAI-compatible local servers need a key-shaped value
        if api_key:
            kwargs["api_key"] = api_key
        if spec.temperature is not None:
            kwargs["temperature"] = spec.temperature
        if spec.max_tokens is not None:
            kwargs["max_tokens"] = spec.max_tokens
        stops = list(dict.fromkeys([*spec.stop, *stop]))
        if stops:
            kwargs["stop"] = stops
        if tools:
            kwargs["tools"] = tools
        fmt = self._response_format(response_format)
        if fmt is not None:
            kwargs["response_format"] = fmt
        kwargs.update(route.extra)
        return kwargs

    def _response_format(self, response_format: dict | None) -> dict | None:
        if not response_format:
            return None
        fmt = dict(response_format)
        if fmt.get("type") not in ("json_schema", "json_object", "text"):
            fmt = {"type": "json_schema", "json_schema": {"name": "response", "schema": fmt}}
        caps = self.capabilities()
        if fmt["type"] == "json_schema" and not caps.json_schema:
            return {"type": "json_object"} if caps.json_mode else None
        if fmt["type"] == "json_object" and not caps.json_mode:
            return None
        return fmt

    def _call(self, route: _Route, msgs: list[dict], tools: list[dict] | None, response_format: dict | None,
              stop: Sequence[str], on_text: Callable[[str], None] | None, streamed: list[bool]) -> ModelReply:
        litellm = _litellm()
        self._check_key(route)
        kwargs = self._kwargs(route, msgs, tools, response_format, stop)
        t0 = time.perf_counter()
        if on_text is None:
            response = litellm.completion(**kwargs)
        else:
            kwargs["stream"] = True
            kwargs["stream_options"] = {"include_usage": True}
            chunks = []
            deadline = t0 + float(self.spec.timeout)
            stream = litellm.completion(**kwargs)
            try:
                for chunk in stream:
                    chunks.append(chunk)
                    piece = _delta_text(chunk)
                    if piece:
                        streamed[0] = True
                        on_text(piece)
                    if time.perf_counter() > deadline:
                        raise ModelTimeoutError(
                            f"{route.name} timed out after {self.spec.timeout:g} s (streaming)", model=route.name,
                            hint="raise model.timeout (seconds) in the agent spec")
            finally:
                close = getattr(stream, "close", None) or getattr(getattr(stream, "completion_stream", None),
                                                                   "close", None)
                if callable(close):
                    try:
                        close()
                    except Exception:
                        pass
            response = litellm.stream_chunk_builder(chunks, messages=msgs) if chunks else None
        latency = time.perf_counter() - t0
        return _normalise(response, route, latency)

    def _check_key(self, route: _Route) -> None:
        """Fail before any request when the provider needs a key and none is set (LiteLLM would report it as a
        500 for some providers)."""
        if route.local or route.api_key or route.api_base:
            return
        var = key_env_var(route.model)
        if var and not os.environ.get(var, "").strip():
            provider = provider_of(route.model)
            raise AuthenticationError(f"no API key for {provider} (model {route.name})", model=route.name,
                                      hint=f"set {var} in the environment, or model.api_key: ${{{var}}}")

    # errors -----------------------------------------------------------------------------------------------------------
    def _map_error(self, exc: Exception, route: _Route, retries: int) -> ModelError:
        return map_error(exc, model=route.name, provider=provider_of(route.model) if route.model else "local",
                         api_base=route.api_base, timeout=float(self.spec.timeout), retries=retries,
                         secrets=self._secrets(route))

    def _secrets(self, route: _Route) -> list[str]:
        values = [route.api_key or "", self.spec.api_key or ""]
        values += [os.environ.get(v, "") for v in set(PROVIDER_KEYS.values())]
        return [v for v in values if len(v) >= 6 and v != LOCAL_API_KEY]


# --- helpers -------------------------------------------------------------------------------------------------------

def _capabilities(model: str) -> Capabilities:
    if model.startswith("local/"):
        return Capabilities(function_calling=False, json_schema=True, json_mode=True)
    litellm = _litellm()

    def ask(fn: Callable[[], Any]) -> Any:
        try:
            return fn()
        except Exception:
            return None

    params = ask(lambda: litellm.get_supported_openai_params(model=model)) or []
    return Capabilities(
        function_calling=bool(ask(lambda: litellm.supports_function_calling(model=model))),
        json_schema=bool(ask(lambda: litellm.supports_response_schema(model=model))),
        json_mode="response_format" in params,
    )


def _bare_message(exc: ModelError) -> str:
    """The error's message without the " (hint)" that ModelError appends."""
    text = str(exc)
    suffix = f" ({exc.hint})" if exc.hint else ""
    return text[: -len(suffix)] if suffix and text.endswith(suffix) else text


def _message_dict(m: Message | Mapping[str, Any]) -> dict[str, Any]:
    return m.to_dict() if isinstance(m, Message) else dict(m)


def _delta_text(chunk: Any) -> str:
    choices = getattr(chunk, "choices", None) or []
    if not choices:
        return ""
    delta = getattr(choices[0], "delta", None)
    content = getattr(delta, "content", None) if delta is not None else None
    return content if isinstance(content, str) else ""


def content_text(content: Any) -> str:
    """Message content as a string: None -> "", whitespace-only -> "", a list of parts -> their texts joined."""
    if content is None:
        return ""
    if isinstance(content, list):
        texts = []
        for part in content:
            if isinstance(part, str):
                texts.append(part)
            elif isinstance(part, Mapping):
                value = part.get("text")
                if isinstance(value, str):
                    texts.append(value)
        content = "".join(texts)
    text = content if isinstance(content, str) else str(content)
    return text if text.strip() else ""


def normalise_tool_calls(raw_calls: Sequence[Any]) -> tuple[list[ToolCall], dict[str, str]]:
    """Tool calls from a provider reply (objects or dicts in the OpenAI shape) as :class:`ToolCall` with decoded
    arguments and unique ids (missing or repeated ids become ``call_<n>_<hex>``). Arguments that cannot be decoded
    stay ``{}`` and the decoder's message is returned per call id."""
    calls: list[ToolCall] = []
    errors: dict[str, str] = {}
    seen: set[str] = set()
    for n, raw in enumerate(raw_calls):
        get = raw.get if isinstance(raw, Mapping) else (lambda k, r=raw: getattr(r, k, None))
        fn = get("function")
        fget = fn.get if isinstance(fn, Mapping) else (lambda k, f=fn: getattr(f, k, None))
        call_id = get("id")
        if not isinstance(call_id, str) or not call_id.strip() or call_id in seen:
            call_id = f"call_{n}_{secrets.token_hex(4)}"
        seen.add(call_id)
        name = fget("name") if fn is not None else None
        try:
            args = decode_arguments(fget("arguments") if fn is not None else None)
        except ArgumentsError as exc:
            args = {}
            errors[call_id] = str(exc)
        calls.append(ToolCall(id=call_id, name=str(name or ""), arguments=args))
    return calls, errors


def _normalise(response: Any, route: _Route, latency: float) -> ModelReply:
    if response is None:  # an empty stream
        return ModelReply(text="", model=route.name, latency_s=latency, usage=Usage(calls=1))
    choices = getattr(response, "choices", None) or []
    message = getattr(choices[0], "message", None) if choices else None
    text = content_text(getattr(message, "content", None)) if message is not None else ""
    calls, errors = normalise_tool_calls(getattr(message, "tool_calls", None) or []) if message is not None else ([], {})
    finish = getattr(choices[0], "finish_reason", None) if choices else None
    usage = _usage(response, local=route.local)
    try:
        raw = response.model_dump()
    except Exception:
        raw = None
    return ModelReply(text=text, tool_calls=calls, finish_reason=finish, usage=usage, model=route.name, raw=raw,
                      latency_s=latency, argument_errors=errors)


def _usage(response: Any, *, local: bool) -> Usage:
    u = getattr(response, "usage", None)
    prompt = int(getattr(u, "prompt_tokens", 0) or 0)
    completion = int(getattr(u, "completion_tokens", 0) or 0)
    total = int(getattr(u, "total_tokens", 0) or 0) or prompt + completion
    cost: float | None
    hidden = getattr(response, "_hidden_params", None) or {}
    if local:
        cost = 0.0
    elif "response_cost" in hidden:  # LiteLLM already priced the call (None: the model has no price)
        cost = float(hidden["response_cost"]) if hidden["response_cost"] is not None else None
    else:  # e.g. a reply rebuilt from stream chunks
        try:
            cost = float(_litellm().completion_cost(completion_response=response))
        except Exception:  # model not in LiteLLM's price map
            cost = None
    return Usage(prompt_tokens=prompt, completion_tokens=completion, total_tokens=total, cost_usd=cost, calls=1)


def _is_provider_error(exc: Exception) -> bool:
    mod = type(exc).__module__ or ""
    return mod.startswith(("litellm", "openai", "httpx", "httpcore")) or isinstance(exc, (ConnectionError, TimeoutError))


def _is_timeout(exc: Exception) -> bool:
    name = type(exc).__name__
    return name in ("Timeout", "APITimeoutError", "ReadTimeout", "ConnectTimeout", "TimeoutException") or \
        isinstance(exc, TimeoutError)


def _is_connection(exc: Exception) -> bool:
    if _is_timeout(exc):
        return False
    if type(exc).__name__ in ("APIConnectionError", "ConnectError", "ConnectionError") or isinstance(exc, ConnectionError):
        return True
    text = str(exc)
    return "Connection error" in text or "Connection refused" in text or "ConnectError" in text


def _status(exc: Exception) -> int | None:
    status = getattr(exc, "status_code", None)
    return status if isinstance(status, int) else None


def _retryable(exc: Exception) -> bool:
    if _is_timeout(exc) or _is_context_window(exc):
        return False
    name = type(exc).__name__
    if name in ("AuthenticationError", "PermissionDeniedError", "NotFoundError", "BadRequestError",
                "UnprocessableEntityError", "ContentPolicyViolationError", "UnsupportedParamsError"):
        return False
    if name == "RateLimitError" or _is_connection(exc):
        return True
    status = _status(exc)
    return status is not None and (status == 429 or status >= 500)


def _is_context_window(exc: Exception) -> bool:
    return type(exc).__name__ == "ContextWindowExceededError"


def _headers(exc: Exception) -> Mapping[str, str]:
    for source in (getattr(exc, "litellm_response_headers", None),
                   getattr(getattr(exc, "response", None), "headers", None)):
        if source:
            try:
                return {str(k).lower(): str(v) for k, v in dict(source).items()}
            except Exception:
                continue
    return {}


def retry_after(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``retry-after`` (seconds or HTTP date), or None. Keys lower-case."""
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def _retry_delay(exc: Exception, attempt: int) -> float:
    after = retry_after(_headers(exc))
    if after is not None:
        return min(after, MAX_RETRY_AFTER)
    return min(8.0, 0.5 * 2 ** attempt) * random.uniform(1.0, 1.25)


_PREFIX = re.compile(r"^\s*(?:litellm\.)?[A-Za-z_]*(?:Error|Exception)(?::| -)\s*")


def _clean(message: str, secrets_: Sequence[str]) -> str:
    text = str(message)
    for _ in range(5):
        new = _PREFIX.sub("", text, count=1)
        if new == text:
            break
        text = new
    text = text.split("\nReceived Model Group", 1)[0].strip()
    for value in secrets_:
        text = text.replace(value, "***")
    return text[:500]


def map_error(exc: Exception, *, model: str, provider: str, api_base: str | None, timeout: float, retries: int,
              secrets: Sequence[str] = ()) -> ModelError:
    """Turn a LiteLLM/OpenAI/httpx exception into a typed :class:`ModelError` with the fix in ``hint``.

    ``secrets`` are replaced by ``***`` in the message. ``retries`` is how many retries were made before giving up.
    """
    detail = _clean(str(exc), secrets)
    name = type(exc).__name__
    status = _status(exc)
    tried = f" after {retries} retr{'y' if retries == 1 else 'ies'}" if retries else ""
    if _is_context_window(exc):
        hint = "shorten the history (memory.short_term.window or max_tokens) or use a model with a larger context"
        if provider in OLLAMA_PROVIDERS:
            hint += "; for Ollama raise model.extra.num_ctx"
        return ContextWindowError(f"the prompt is longer than {model}'s context window: {detail}", model=model,
                                  hint=hint)
    if _is_timeout(exc):
        return ModelTimeoutError(f"{model} timed out after {timeout:g} s", model=model,
                                 hint="raise model.timeout (seconds) in the agent spec, or use a faster model")
    if name in ("AuthenticationError", "PermissionDeniedError") or status in (401, 403) or \
            "Missing credentials" in detail or "api_key must be set" in detail:
        var = key_env_var(model) if provider != "local" else None
        hint = f"set {var} in the environment, or model.api_key: ${{{var}}}" if var else \
            "check model.api_key and the provider's credentials"
        return AuthenticationError(f"{provider or model} refused the credentials for {model}: {detail}",
                                   model=model, hint=hint)
    if "LLM Provider NOT provided" in detail:
        return ModelNotFoundError(
            f"unknown provider in model {model!r}", model=model,
            hint="prefix the model with a LiteLLM provider, e.g. openai/gpt-4o-mini, ollama_chat/llama3.1, "
                 "anthropic/claude-haiku-4-5, or use local/qwen2.5-coder-1.5b")
    if name == "NotFoundError" or status == 404:
        if provider in OLLAMA_PROVIDERS:
            hint = f"pull it with `ollama pull {model.split('/', 1)[1]}`"
        else:
            hint = "check the model name (LiteLLM model strings: https://docs.litellm.ai/docs/providers)"
        return ModelNotFoundError(f"{provider or 'the provider'} does not know the model {model!r}: {detail}",
                                  model=model, hint=hint)
    if _is_connection(exc):
        if provider in OLLAMA_PROVIDERS:
            address = api_base or os.environ.get("OLLAMA_API_BASE") or OLLAMA_DEFAULT_BASE
            return ProviderUnavailableError(f"Ollama is not running at {address}{tried}", model=model,
                                            hint="start it with `ollama serve` or set model.api_base")
        where = f" at {api_base}" if api_base else ""
        return ProviderUnavailableError(f"could not reach {provider or 'the provider'}{where} for {model}{tried}: "
                                        f"{detail}", model=model,
                                        hint="check the network and model.api_base, or add model.fallbacks")
    if name == "RateLimitError" or status == 429:
        return RateLimitError(f"{provider or model} kept rate-limiting {model}{tried}: {detail}", model=model,
                              hint="wait and run again, raise model.num_retries, or add model.fallbacks")
    if status is not None and status >= 500:
        return ProviderUnavailableError(f"{provider or model} failed with HTTP {status}{tried}: {detail}",
                                        model=model, hint="try again later, or add model.fallbacks")
    return ModelError(f"{model} rejected the request: {detail}", model=model,
                      hint="check the model settings (model.extra, max_tokens, tools) for this provider")
