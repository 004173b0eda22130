#!/usr/bin/env bash
# Create bench/.venv-peers: a separate virtualenv holding the peer frameworks the benchmarks compare against
# (LangChain's agent, smolagents' ToolCallingAgent). The project's own .venv and pyproject are never touched.
# Usage: bash bench/setup_peers.sh            (PYTHON=python3.11 by default; re-running is cheap)
set -euo pipefail
cd "$(dirname "$0")"
PYTHON="${PYTHON:-python3.11}"
command -v "$PYTHON" >/dev/null || PYTHON=python3
VENV=.venv-peers
test -x "$VENV/bin/python" || "$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -r requirements-peers.txt
"$VENV/bin/python" - <<'PY'
import importlib.metadata as md
for name in ("langchain", "langchain-openai", "langgraph", "smolagents", "litellm", "openai"):
    print(f"{name}=={md.version(name)}")
PY
echo "peers venv ready: bench/$VENV"
