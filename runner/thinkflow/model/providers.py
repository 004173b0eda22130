"""What LiteLLM knows about providers and models: the one place that imports LiteLLM.

:func:`load_litellm` imports it lazily with the bundled model/price map (no network at import); the rest answers
questions about a model string without calling it: its provider, whether its API key is in the environment and
under which names (LiteLLM's ``validate_environment``, so ThinkFlow checks exactly the names LiteLLM reads:
``GOOGLE_API_KEY`` or ``GEMINI_API_KEY`` for ``gemini/...``), the key values to redact, and its
:class:`Capabilities` (native tool calls, JSON-schema output, JSON mode).
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from thinkflow.model.litellm_patches import skip_file_ids_without_files

OLLAMA_PROVIDERS = ("ollama", "ollama_chat")
OLLAMA_DEFAULT_BASE = "http://127.0.0.1:11434"
#: providers that speak the OpenAI chat API on a server the user runs, which implements ``tools``
OPENAI_COMPATIBLE = ("hosted_vllm", "litellm_proxy", "lm_studio", "llamafile", "openai_like")
OLLAMA_SHOW_TIMEOUT = 5.0  # seconds; /api/show reads the model's metadata, it does not load the model

OPENAI_KEY_VAR = "OPENAI_API_KEY"
"""The key LiteLLM sends to OpenAI-compatible servers (``openai/...`` with ``api_base``)."""

_KEY_SUFFIXES = ("_API_KEY", "_AUTH_TOKEN", "_API_TOKEN", "_KEY", "_TOKEN")
"""Endings of the environment variables that hold credentials (not bases, versions or regions)."""


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
    reason: str = field(default="", compare=False)
    """Where these facts come from, in words (the trace records it as ``run_started.style_reason``)."""


_loaded: Any = None


def load_litellm() -> Any:
    """Import LiteLLM with the bundled model/price map (no network at import) and quiet debug banners, its
    file-id rewrite skipped for requests without files (:mod:`thinkflow.model.litellm_patches`). Called before
    every model request: after the first call it returns the module at once (setting the environment variable
    again would cost a ``putenv`` per request)."""
    global _loaded
    if _loaded is not None:
        return _loaded
    os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    import litellm

    litellm.suppress_debug_info = True
    skip_file_ids_without_files(litellm)
    _loaded = litellm
    return litellm


def provider_of(model: str) -> str:
    """The LiteLLM provider of a model string (``"openai"`` for ``gpt-4o-mini``), or the text before the first
    ``/``, or "" when unknown. ``local/...`` -> ``"local"``."""
    if model.startswith("local/"):
        return "local"
    try:
        return load_litellm().get_llm_provider(model)[1] or ""
    except Exception:  # LiteLLM raises BadRequestError for unknown providers
        return model.split("/", 1)[0] if "/" in model else ""


def _is_key_name(name: str) -> bool:
    return name.endswith(_KEY_SUFFIXES)


def _no_key_needed(provider: str) -> bool:
    return provider in OLLAMA_PROVIDERS or provider == "local" or not provider


def missing_keys(model: str) -> list[str]:
    """The API-key environment variables ``model`` needs and the environment lacks, as LiteLLM's
    ``validate_environment`` names them (several names are alternatives: ``["GOOGLE_API_KEY", "GEMINI_API_KEY"]``
    for ``gemini/...``); ``[]`` when the key is there or the provider needs none (Ollama, local, unknown)."""
    provider = provider_of(model)
    if _no_key_needed(provider):
        return []
    try:
        found = load_litellm().validate_environment(model=model)
    except Exception:  # noqa: BLE001 - LiteLLM could not tell: no check
        return []
    if found.get("keys_in_environment"):
        return []
    return [k for k in found.get("missing_keys") or [] if _is_key_name(k)]


def key_env_var(model: str) -> str | None:
    """The environment variable to name in a hint about ``model``'s API key: the first one LiteLLM reports
    missing; when the key is set, the set variable named ``<PROVIDER>_API_KEY``; else None (Ollama, local, or a
    provider whose key names LiteLLM does not report)."""
    missing = missing_keys(model)
    if missing:
        return missing[0]
    provider = provider_of(model)
    if _no_key_needed(provider):
        return None
    guess = f"{provider.upper()}_API_KEY"
    return guess if os.environ.get(guess) else None


def provider_key(model: str) -> str | None:
    """The API key LiteLLM itself would send for ``model`` when none is given (its provider's ``get_api_key``,
    reading the environment names LiteLLM knows), or None when LiteLLM has no such lookup for the provider."""
    provider = provider_of(model)
    if _no_key_needed(provider):
        return None
    load_litellm()
    try:
        from litellm.types.utils import LlmProviders
        from litellm.utils import ProviderConfigManager

        info = ProviderConfigManager.get_provider_model_info(model, LlmProviders(provider))
        return info.get_api_key() if info is not None else None
    except Exception:  # noqa: BLE001 - an unknown provider or an older LiteLLM: nothing to add
        return None


def key_values(model: str, environ: Mapping[str, str] | None = None) -> list[str]:
    """Every credential value that may appear in ``model``'s provider errors, to redact: the key LiteLLM would send
    (:func:`provider_key`) and the value of every environment variable whose name is a credential name
    (``*_API_KEY``, ``*_AUTH_TOKEN``, ...; e.g. ``GOOGLE_API_KEY``)."""
    env = os.environ if environ is None else environ
    values = [v for k, v in env.items() if _is_key_name(k) and v.strip()]
    key = provider_key(model) if model else None
    if key:
        values.append(key)
    return list(dict.fromkeys(values))


def model_prefix(model: str) -> str:
    """The text before the first ``/`` of a model string; ``"openai"`` for a bare name (LiteLLM's default)."""
    return model.split("/", 1)[0] if "/" in model else "openai"


_OLLAMA_SHOW: dict[tuple[str, str], list[str] | None] = {}
_OLLAMA_LOCK = threading.Lock()


def ollama_capabilities(model: str, api_base: str | None = None) -> list[str] | None:
    """The ``capabilities`` list Ollama's ``POST /api/show`` reports for ``model`` (``["completion", "tools"]``),
    or None when the server does not answer, answers an error or has no such field (Ollama before 0.6).

    Asked once per ``(api_base, model)`` in a process and cached (also a failure). ``model`` may carry the
    ``ollama/`` or ``ollama_chat/`` prefix. Source: Ollama API docs, "Show Model Information".
    """
    name = model.split("/", 1)[1] if model_prefix(model) in OLLAMA_PROVIDERS else model
    base = (api_base or os.environ.get("OLLAMA_API_BASE") or OLLAMA_DEFAULT_BASE).rstrip("/")
    key = (base, name)
    with _OLLAMA_LOCK:
        if key in _OLLAMA_SHOW:
            return _OLLAMA_SHOW[key]
        found: list[str] | None = None
        try:
            import httpx

            response = httpx.post(f"{base}/api/show", json={"model": name}, timeout=OLLAMA_SHOW_TIMEOUT)
            if response.status_code == 200:
                caps = response.json().get("capabilities")
                if isinstance(caps, list):
                    found = [str(c) for c in caps]
        except Exception:  # noqa: BLE001 - no answer: the caller falls back to what LiteLLM knows
            found = None
        _OLLAMA_SHOW[key] = found
        return found


def capabilities_of(model: str, api_base: str | None = None) -> Capabilities:
    """What ``model`` supports, with the reason in :attr:`Capabilities.reason`:

    * ``local/...`` (the embedded llama.cpp server): native tool calls (llama.cpp's Jinja mode renders the tools
      with the model's own chat template and parses its ``<tool_call>`` output; calls the model writes as text
      are recovered by :mod:`thinkflow.reply.parsing`), JSON schema (grammar-constrained) and JSON mode. The
      ``bench/suite.py`` run of bench/RESULTS.md (23 tasks) gave native 12 and constrained json 11, which one run
      does not separate; native completes the main job and sends parallel calls in one step.
    * Ollama (``ollama/``, ``ollama_chat/``): the server's ``/api/show`` ``capabilities`` (see
      :func:`ollama_capabilities`): native tool calls when ``tools`` is listed; JSON schema (LiteLLM sends it as
      Ollama's ``format``). When the server does not say, LiteLLM's model map decides tool calls.
    * A server the user runs that speaks the OpenAI API (``openai/<name>`` with ``api_base``, ``hosted_vllm/``,
      ``litellm_proxy/``, ...): native tool calls, JSON schema and JSON mode, since such servers implement them
      (a malformed reply still switches the style; see :mod:`thinkflow.reply.styles`).
    * Anything else: LiteLLM's model map; False for whatever it does not list.
    No network except Ollama's ``/api/show`` (once per model and server).
    """
    if model.startswith("local/"):
        return Capabilities(function_calling=True, json_schema=True, json_mode=True,
                            reason="embedded llama.cpp server: native tool calls through the model's chat template")
    prefix = model_prefix(model) if "/" in model else ""
    if prefix in OLLAMA_PROVIDERS:
        listed = ollama_capabilities(model, api_base)
        if listed is not None:
            tools = "tools" in listed
            return Capabilities(function_calling=tools, json_schema=True, json_mode=True,
                                reason=f"Ollama /api/show capabilities: {', '.join(listed) or '(none)'}")
        known = _litellm_capabilities(model)
        return Capabilities(function_calling=known.function_calling, json_schema=True, json_mode=True,
                            reason="Ollama /api/show gave no capabilities; tool calls as LiteLLM's model map says")
    if prefix in OPENAI_COMPATIBLE or (prefix == "openai" and api_base):
        return Capabilities(function_calling=True, json_schema=True, json_mode=True,
                            reason=f"OpenAI-compatible server ({prefix}{' at ' + api_base if api_base else ''}) "
                            "implements tools")
    known = _litellm_capabilities(model)
    return known


def _litellm_capabilities(model: str) -> Capabilities:
    """What LiteLLM's bundled model map says about ``model``."""
    litellm = load_litellm()

    def ask(fn: Callable[[], Any]) -> Any:
        try:
            return fn()
        except Exception:
            return None

    params = ask(lambda: litellm.get_supported_openai_params(model=model)) or []
    function_calling = bool(ask(lambda: litellm.supports_function_calling(model=model)))
    json_schema = bool(ask(lambda: litellm.supports_response_schema(model=model)))
    listed = [name for name, ok in (("function calling", function_calling), ("JSON schema", json_schema)) if ok]
    return Capabilities(
        function_calling=function_calling,
        json_schema=json_schema,
        json_mode="response_format" in params,
        reason=f"LiteLLM's model map lists {' and '.join(listed) if listed else 'neither function calling nor JSON schema'}"
        f" for {model}",
    )
