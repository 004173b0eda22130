"""Which model a run uses: the ``--model`` override, the spec's model, a default model for the first provider key
found in the environment, or the embedded local model; and the spec with the response cache on. No network, no
LiteLLM import."""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Any, Mapping

from thinkflow.config.spec import DEFAULT_LOCAL_MODEL, ModelSpec
from thinkflow.model.providers import model_prefix

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
        if spec.name and model_prefix(override) != model_prefix(spec.name):
            return replace(spec, name=override, api_base=None, api_key=None), None
        return replace(spec, name=override), None
    if spec.name:
        return spec, None
    for var, default in DEFAULT_MODELS:
        if env.get(var, "").strip():
            return replace(spec, name=default), f"No model configured: using {default} ({var} is set)."
    return (replace(spec, name=DEFAULT_LOCAL_MODEL),
            f"No model configured and no provider key found: using the embedded local model {DEFAULT_LOCAL_MODEL}.")


def with_cache(spec: ModelSpec, settings: dict[str, Any] | None = None) -> ModelSpec:
    """``spec`` with the response cache on (``--cache``): its own settings when it has some, else ``settings`` or
    the disk cache."""
    if spec.cache:
        return spec
    return replace(spec, cache=dict(settings or {"type": "disk"}))
