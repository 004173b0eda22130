"""What LiteLLM knows about providers and models: the one place that imports LiteLLM.

:func:`load_litellm` imports it lazily with the bundled model/price map (no network at import); the rest answers
questions about a model string without calling it: its provider, the environment variable of its API key, and
its :class:`Capabilities` (native tool calls, JSON-schema output, JSON mode).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Callable

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

OLLAMA_PROVIDERS = ("ollama", "ollama_chat")


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



def load_litellm() -> Any:
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
        return load_litellm().get_llm_provider(model)[1] or ""
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
        missing = load_litellm().validate_environment(model=model).get("missing_keys") or []
    except Exception:
        return None
    keys = [k for k in missing if k.endswith("_KEY")]
    return keys[0] if keys else None


def model_prefix(model: str) -> str:
    """The text before the first ``/`` of a model string; ``"openai"`` for a bare name (LiteLLM's default)."""
    return model.split("/", 1)[0] if "/" in model else "openai"


def capabilities_of(model: str) -> Capabilities:
    """What LiteLLM's model map says ``model`` supports (``local/...``: JSON schema and JSON mode, no native tool
    calls); False for whatever it does not list."""
    if model.startswith("local/"):
        return Capabilities(function_calling=False, json_schema=True, json_mode=True)
    litellm = load_litellm()

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
