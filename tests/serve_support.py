"""Helpers for the serve tests and bench: agent files pointing at a scripted model, and the real server started
in-process on 127.0.0.1 (uvicorn in a background thread on a free port) or as a `thinkflow serve` subprocess."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

KEY = "sk-serve-test-0123456789"
BIN = Path(sys.executable).parent
RUNNER = Path(__file__).resolve().parents[1] / "runner"


def agent_yaml(directory: Path, model_url: str, *, name: str = "helper", tools: str = "[calculator]",
               loop: str = "{style: native, max_steps: 4}", description: str = "A test helper with a calculator.",
               extra: str = "") -> Path:
    """Write ``directory/<name>.yaml``: an agent on the scripted OpenAI server at ``model_url``."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.yaml"
    path.write_text(
        "version: 1\n"
        f"name: {name}\n"
        f"description: {description}\n"
        "model:\n"
        "  name: openai/test\n"
        f"  api_base: {model_url}\n"
        "  api_key: ${TF_SERVE_KEY}\n"
        "  num_retries: 0\n"
        "  timeout: 30\n"
        "prompt:\n"
        "  text: You are {{ agent_name }}, helping {{ who }}.\n"
        "  vars: {who: everyone}\n"
        f"tools: {tools}\n"
        f"loop: {loop}\n" + extra,
        encoding="utf-8",
    )
    return path


class LiveServer:
    """The real app on uvicorn in a background thread, on a free loopback port. ``url`` is its base URL."""

    def __init__(self, agents_dir: Path, work: Path, **options: Any):
        from thinkflow.serve.app import create_app
        from thinkflow.serve.catalog import load_catalog
        from thinkflow.serve.manager import RunManager
        from thinkflow.serve.options import ServeOptions
        from thinkflow.serve.server import bind_socket, make_server
        from thinkflow.tools.approval import auto_approver

        os.environ.setdefault("TF_SERVE_KEY", KEY)
        approve = options.get("approve_tools", False)
        self.options = ServeOptions(host="127.0.0.1", port=0, trace_dir=work / "runs", session_dir=work / "sessions",
                                    **options)
        self.catalog = load_catalog([agents_dir], approver=auto_approver(True) if approve else None)
        self.manager = RunManager(self.catalog, self.options)
        self.app = create_app(self.manager, self.options)
        self.server = make_server(self.app, self.manager, self.options, log_level="warning")
        self.sock = bind_socket("127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)

    def __enter__(self) -> "LiveServer":
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("the server did not start")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.should_exit = True
        self.thread.join(30)
        self.sock.close()


def serve_env() -> dict[str, str]:
    env = dict(os.environ)
    env["TF_SERVE_KEY"] = KEY
    env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    env["PYTHONPATH"] = str(RUNNER) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def start_subprocess(args: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: float = 60.0
                     ) -> tuple[subprocess.Popen, str]:
    """Start ``thinkflow serve ARGS`` and return (process, base URL) once it says it is serving."""
    proc = subprocess.Popen([str(BIN / "thinkflow"), "serve", *args], cwd=cwd, env=env or serve_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + timeout
    lines: list[str] = []
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
        match = re.search(r"serving .* at (http://\S+)", line)
        if match:
            threading.Thread(target=lambda: [lines.append(x) for x in proc.stdout], daemon=True).start()
            proc.output = lines  # type: ignore[attr-defined]
            return proc, match.group(1)
    proc.kill()
    raise RuntimeError("thinkflow serve did not start:\n" + "".join(lines))


__all__ = ["KEY", "agent_yaml", "LiveServer", "serve_env", "start_subprocess", "replace"]
