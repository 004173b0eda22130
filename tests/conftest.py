"""Shared test setup. Keep additive: test modules' helpers add fixtures here.

The environment variables are set at import, before anything imports litellm or Hugging Face libraries, so tests
never reach the network for the model cost map or model files, and the record of configs that passed their schema
(thinkflow.config.validated) is off, so every test checks its configs.
"""

from __future__ import annotations

import os

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
os.environ["HF_HUB_OFFLINE"] = "1"
# every test checks its configs for real; tests/test_config_validated.py turns the record of valid configs on
os.environ["THINKFLOW_VALIDATION_CACHE"] = "0"

import pytest  # noqa: E402


@pytest.fixture
def openai_server():
    """A scripted OpenAI-compatible server on 127.0.0.1 (see scripted_servers.py), stopped after the test."""
    from scripted_servers import OpenAIServer

    with OpenAIServer() as server:
        yield server


@pytest.fixture
def ollama_server():
    """A scripted Ollama-compatible server on 127.0.0.1 (see scripted_servers.py), stopped after the test."""
    from scripted_servers import OllamaServer

    with OllamaServer() as server:
        yield server
