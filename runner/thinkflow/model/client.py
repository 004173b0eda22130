"""Model clients: every model call goes through LiteLLM (imported only by :mod:`thinkflow.model.providers`).

* :func:`build_client` (after :func:`thinkflow.model.resolution.resolve_model`, which picks the effective model)
  returns a :class:`LiteLLMClient` for any LiteLLM model string (``openai/gpt-4o-mini``, ``ollama_chat/qwen2.5:7b``)
  or for ``local/...`` (the embedded llama.cpp server from :mod:`thinkflow.model.local`, started on first use and
  reached as ``openai/<alias>`` with ``api_base``).
* :meth:`LiteLLMClient.complete` sends one chat completion and returns a normalised
  :class:`~thinkflow.model.messages.ModelReply`; provider failures become the typed errors of :mod:`thinkflow.errors`,
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
  the in-process llama.cpp server and are not sent with requests; its cost is recorded as 0.0. Without
  ``max_tokens`` a call generates at most :data:`LOCAL_MAX_TOKENS`.
* ``response_format``: a JSON-schema format is sent when LiteLLM says the model supports response schemas (always
  for the embedded model: llama.cpp constrains output with a grammar), downgraded to ``{"type": "json_object"}``
  when only JSON mode is supported, dropped otherwise.
* ``cache`` (``model.cache`` or ``--cache``): LiteLLM's response cache answers a request it has seen (disk by
  default, Redis when configured; :mod:`thinkflow.model.cache`); the reply says ``cached=True``.
* ``LITELLM_LOCAL_MODEL_COST_MAP=True`` is set before LiteLLM is imported, so importing it makes no network call.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, Sequence

from thinkflow.errors import AuthenticationError, ModelError, ModelTimeoutError
from thinkflow.model.deadlines import bounded_request, request_seconds, run_over
from thinkflow.model.litellm_patches import completion
from thinkflow.model.messages import Message, ModelReply, Usage
from thinkflow.model.error_map import (MAX_RETRY_AFTER, bare_message, is_provider_error, map_error, retry_delay,
                                       retryable)
from thinkflow.model.replies import message_dict, normalise_reply, wire_messages
from thinkflow.model.streaming import read_stream
from thinkflow.model.providers import (
    OLLAMA_PROVIDERS,
    OPENAI_KEY_VAR,
    Capabilities,
    capabilities_of,
    key_values,
    load_litellm,
    missing_keys,
    model_prefix,
    provider_of,
)
from thinkflow.config.spec import DEFAULT_LOCAL_MODEL, ModelSpec
from thinkflow.model.resolution import resolve_model

Progress = Callable[[str], None]

OLLAMA_DEFAULT_NUM_CTX = 8192
LOCAL_MAX_TOKENS = 1024
"""Generated tokens per call on the embedded model when ``model.max_tokens`` is not set. A small model that
starts repeating itself would otherwise generate until its context is full: at about 8 tokens a second on 2
cores, past any step timeout. 1,024 tokens is several times the longest useful step seen in the suite."""
LOCAL_API_KEY = "thinkflow-local"  # the in-process llama.cpp server checks no key; the OpenAI client needs one
LOCAL_EXTRA_KEYS = ("n_ctx", "n_threads")  # consumed by the embedded server, not sent with requests


class ModelClient(Protocol):
    """What the loop needs from a model. ``model`` is the effective model string (for example the fallback that
    answered is reported in :attr:`ModelReply.model`, not here)."""

    model: str

    def capabilities(self) -> Capabilities: ...

    def complete(self, messages: Sequence[Message], *, tools: list[dict] | None = None,
                 response_format: dict | None = None, stop: Sequence[str] = (),
                 on_text: Callable[[str], None] | None = None, deadline: float | None = None,
                 tool_choice: str | None = None) -> ModelReply: ...

    def count_tokens(self, messages: Sequence[Message]) -> int: ...

    # optional: ``call_limit() -> float | None``, the most seconds one ``complete`` may take (see call_limit_of)


def call_limit_of(client: Any) -> float | None:
    """``client.call_limit()`` (:meth:`LiteLLMClient.call_limit`: the most seconds one ``complete`` may take), or
    None for a client without one: the method is optional in a :class:`ModelClient`."""
    call_limit = getattr(client, "call_limit", None)
    return call_limit() if callable(call_limit) else None


# --- building -------------------------------------------------------------------------------------------------------

def build_client(spec: ModelSpec, *, override: str | None = None,
                 on_progress: Progress | None = None) -> "LiteLLMClient":
    """Build the client for ``spec`` (after :func:`~thinkflow.model.resolution.resolve_model` with ``override``).

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
        self._providers: dict[str, str] = {}
        self._routes = [self._route(self.model, primary=True)] + [self._route(m, primary=False) for m in spec.fallbacks]

    # routes ---------------------------------------------------------------------------------------------------------
    def _route(self, name: str, *, primary: bool) -> _Route:
        extra = dict(self.spec.extra) if primary else {}
        if name.startswith("local/"):
            return _Route(name=name, model="", extra=extra, local=True, ready=False)
        api_base = self.spec.api_base if primary else None
        api_key = self.spec.api_key if primary else None
        if model_prefix(name) in OLLAMA_PROVIDERS:
            extra.setdefault("num_ctx", OLLAMA_DEFAULT_NUM_CTX)
        return _Route(name=name, model=name, api_base=api_base, api_key=api_key, extra=extra)

    def _ready(self, route: _Route) -> _Route:
        """Start the embedded server for a ``local/`` route on first use."""
        if route.ready:
            return route
        from thinkflow.model import local as local_model

        n_ctx = route.extra.get("n_ctx")
        threads = route.extra.get("n_threads")
        server = local_model.get_server(route.name, on_progress=self.on_progress, n_ctx=n_ctx, threads=threads)
        route.model = f"openai/{server.alias}"
        route.api_base = f"{server.base_url}/v1"
        route.api_key = LOCAL_API_KEY
        route.extra = {k: v for k, v in route.extra.items() if k not in LOCAL_EXTRA_KEYS}
        route.ready = True
        return route

    @property
    def local(self) -> bool:
        """True when the main model is the embedded one (``local/...``)."""
        return self._routes[0].local

    def _provider(self, model: str) -> str:
        """LiteLLM's provider of ``model`` (cached per model string)."""
        known = self._providers.get(model)
        if known is None:
            known = self._providers[model] = provider_of(model)
        return known

    def warm_up(self) -> None:
        """Do the one-time set-up of this client now rather than in the first call: start the embedded model
        when the main model is ``local/...``, then import LiteLLM (waiting for :func:`preload_litellm`'s import
        when one is under way). A run calls this before its clock starts, so ``loop.timeout`` does not count it.

        Raises:
            ModelError: the embedded model cannot start (the first call raises it again).
        """
        primary = self._routes[0]
        if primary.local:
            self._ready(primary)
        load_litellm()

    def call_limit(self) -> float | None:
        """The most seconds one :meth:`complete` may take by this client's settings, or None when it cannot tell.

        For each route (the model, then each fallback): ``1 + num_retries`` requests of at most ``timeout`` seconds
        and the waits between them (at most :data:`~thinkflow.model.error_map.MAX_RETRY_AFTER` seconds each). A
        run abandons a call that takes longer (:meth:`thinkflow.run.base.RunBase._call_model`): httpx's timeout
        bounds each read, not the request, so a server that trickles its reply a few bytes at a time would
        otherwise hold a run with no ``loop.timeout`` forever. None while an embedded model has still to start
        (its start-up has its own limit, :attr:`thinkflow.model.local.LocalModelServer.startup_timeout`)."""
        if any(route.local and not route.ready for route in self._routes):
            return None
        retries = max(int(self.spec.num_retries), 0)
        per_route = (retries + 1) * float(self.spec.timeout) + retries * MAX_RETRY_AFTER
        return len(self._routes) * per_route

    # capabilities -----------------------------------------------------------------------------------------------------
    def capabilities(self) -> Capabilities:
        """What the main model supports (cached for the client's life, so once per run; see
        :func:`~thinkflow.model.providers.capabilities_of`): Ollama's ``/api/show``, native tool calls on
        OpenAI-compatible servers the user runs, LiteLLM's model map otherwise. The embedded model reports JSON
        schema (llama.cpp grammar-constrained output) and JSON mode but no native function calling."""
        if self._caps is None:
            self._caps = capabilities_of(self.model, self.spec.api_base)
        return self._caps

    # token counting ---------------------------------------------------------------------------------------------------
    def count_tokens(self, messages: Sequence[Message]) -> int:
        """Tokens of ``messages`` by ``litellm.token_counter`` for the model (its tokenizer when LiteLLM has it,
        else tiktoken cl100k); a rough ``chars / 4 + 4 per message`` estimate if that fails."""
        dicts = [message_dict(m) for m in messages]
        model = self._routes[0].model or "gpt-3.5-turbo"
        try:
            return int(load_litellm().token_counter(model=model, messages=dicts))
        except Exception:
            return sum(len(str(d.get("content") or "")) // 4 + 4 for d in dicts)

    # completion -------------------------------------------------------------------------------------------------------
    def complete(self, messages: Sequence[Message], *, tools: list[dict] | None = None,
                 response_format: dict | None = None, stop: Sequence[str] = (),
                 on_text: Callable[[str], None] | None = None, deadline: float | None = None,
                 tool_choice: str | None = None) -> ModelReply:
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
            deadline: a :func:`time.monotonic` instant no retry wait, fallback or streamed text may pass (the
                run's timeout): each request's timeout is cut to the time left, rounded up by at most a tenth
                (:mod:`thinkflow.model.deadlines`; a run's caller abandons the call at the deadline itself); once
                it has passed the call raises ModelTimeoutError ("the run's time is up"). None: only
                ``spec.timeout`` per request.
            tool_choice: OpenAI's ``tool_choice`` ("auto", "required", "none"), sent with ``tools``; None: not
                sent (the provider's default, "auto"). "required" is not sent to the embedded model: its llama.cpp
                server (xllamacpp) then lets Qwen2.5-Coder write the call as text and generate fences until
                ``max_tokens`` (400 tokens for a 22-token call, measured), where "auto" stops after the call.
        Returns a :class:`ModelReply` whose ``model`` is the model that answered (main or fallback).
        Raises AuthenticationError, ModelNotFoundError, ProviderUnavailableError, RateLimitError, ModelTimeoutError,
        ContextWindowError, LocalModelError or ModelError (the main model's error when every fallback failed too).
        """
        msgs = [message_dict(m) for m in messages]
        failures: list[tuple[str, ModelError]] = []
        streamed = [False]
        for route in self._routes:
            try:
                reply = self._with_retries(route, msgs, tools, response_format, stop, on_text, streamed, deadline,
                                           tool_choice)
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
        others = "; ".join(f"{name}: {bare_message(exc)}" for name, exc in failures[1:])
        raise type(first)(f"{bare_message(first)}; fallbacks failed too: {others}",
                          model=first.model, hint=first.hint) from first

    def _with_retries(self, route: _Route, msgs: list[dict], tools: list[dict] | None,
                      response_format: dict | None, stop: Sequence[str], on_text: Callable[[str], None] | None,
                      streamed: list[bool], deadline: float | None, tool_choice: str | None = None) -> ModelReply:
        attempt = 0
        while True:
            route = self._ready(route)
            timeout = request_seconds(route.name, self.spec.timeout, deadline)
            try:
                return self._call(route, msgs, tools, response_format, stop, on_text, streamed, timeout, tool_choice,
                                  deadline)
            except ModelError:
                raise
            except Exception as exc:
                if not is_provider_error(exc):
                    raise
                delay = retry_delay(exc, attempt)
                past_deadline = deadline is not None and time.monotonic() + delay >= deadline
                if streamed[0] or attempt >= self.spec.num_retries or not retryable(exc) or past_deadline:
                    error = self._map_error(exc, route, attempt)
                    if isinstance(error, ModelTimeoutError) and \
                            timeout < request_seconds(route.name, self.spec.timeout, None):
                        error = run_over(route.name)  # the request's timeout was the run's time left
                    raise error from None
                self.sleep(delay)
                attempt += 1

    def _kwargs(self, route: _Route, msgs: list[dict], tools: list[dict] | None, response_format: dict | None,
                stop: Sequence[str], timeout: float) -> dict[str, Any]:
        spec = self.spec
        kwargs: dict[str, Any] = {
            "model": route.model,
            "messages": wire_messages(msgs, self._provider(route.model)),
            "timeout": timeout,
            "num_retries": 0,
            "max_retries": 0,
            "drop_params": True,
        }
        if route.api_base:
            kwargs["api_base"] = route.api_base
        api_key = route.api_key
        if not api_key and route.api_base and model_prefix(route.model) == "openai":
            api_key = os.environ.get(OPENAI_KEY_VAR) or "no-key"  # OpenAI-compatible local servers need a key-shaped value
        if api_key:
            kwargs["api_key"] = api_key
        if spec.temperature is not None:
            kwargs["temperature"] = spec.temperature
        if spec.max_tokens is not None:
            kwargs["max_tokens"] = spec.max_tokens
        elif route.local:
            kwargs["max_tokens"] = LOCAL_MAX_TOKENS
        stops = list(dict.fromkeys([*spec.stop, *stop]))
        if stops:
            kwargs["stop"] = stops
        if tools:
            kwargs["tools"] = tools
        fmt = self._response_format(response_format)
        if fmt is not None:
            kwargs["response_format"] = fmt
        kwargs.update(route.extra)
        if spec.cache:
            from thinkflow.model.cache import request_options

            kwargs.update(request_options(spec.cache))
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
              stop: Sequence[str], on_text: Callable[[str], None] | None, streamed: list[bool],
              timeout: float, tool_choice: str | None = None, deadline: float | None = None) -> ModelReply:
        litellm = load_litellm()
        self._check_key(route)
        kwargs = self._kwargs(route, msgs, tools, response_format, stop, timeout)
        if tool_choice and tools and not (route.local and tool_choice == "required"):
            kwargs["tool_choice"] = tool_choice  # the embedded server: see the docstring of complete()
        t0 = time.perf_counter()
        if on_text is None:
            response = bounded_request(lambda: completion(litellm, **kwargs), timeout)
        else:
            kwargs["stream"] = True
            kwargs["stream_options"] = {"include_usage": True}

            def on_piece(piece: str) -> None:
                streamed[0] = True  # text reached the user: a failure after this is not retried
                on_text(piece)

            # reading stops at the run's deadline itself, not at the request's timeout (rounded up, see
            # request_timeout): no text may reach on_text after it
            left = timeout if deadline is None else deadline - time.monotonic()
            if left <= 0:  # LiteLLM's first use (its import) took the rest of the run's time
                raise run_over(route.name)

            def streamed_request() -> list:
                stream = completion(litellm, **kwargs)
                return read_stream(stream, on_piece, deadline=t0 + min(timeout, left), model=route.name,
                                   timeout=timeout)
            try:
                chunks = bounded_request(streamed_request, timeout)
            except ModelTimeoutError:
                if left >= timeout:
                    raise
                raise run_over(route.name) from None
            response = litellm.stream_chunk_builder(chunks, messages=msgs) if chunks else None
        latency = time.perf_counter() - t0
        return normalise_reply(response, model=route.name, local=route.local, latency=latency)

    def _check_key(self, route: _Route) -> None:
        """Fail before any request when the provider needs a key and none is set (LiteLLM would report it as a
        500 for some providers). The names checked are LiteLLM's own (``validate_environment``)."""
        if route.local or route.api_key or route.api_base:
            return
        missing = missing_keys(route.model)
        if missing:
            var = missing[0]
            provider = provider_of(route.model)
            raise AuthenticationError(f"no API key for {provider} (model {route.name})", model=route.name,
                                      hint=f"set {var} in the environment, or model.api_key: ${{{var}}}")

    # errors -----------------------------------------------------------------------------------------------------------
    def _map_error(self, exc: Exception, route: _Route, retries: int) -> ModelError:
        return map_error(exc, model=route.name, provider=provider_of(route.model) if route.model else "local",
                         api_base=route.api_base, timeout=float(self.spec.timeout), retries=retries,
                         secrets=self._secrets(route), key_given=bool(route.api_key))

    def _secrets(self, route: _Route) -> list[str]:
        values = [route.api_key or "", self.spec.api_key or ""]
        values += key_values(route.model) if route.model and not route.local else []
        return [v for v in values if len(v) >= 6 and v != LOCAL_API_KEY]
