"""Shared helpers of the benchmarks: statistics, the machine description, the scripted server process.

Standard library only: this module is imported both from the project's ``.venv`` and from the peers' separate
``bench/.venv-peers`` (the peer implementations in ``bench/peers/`` run there).
"""

from __future__ import annotations

import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
# Generated files (git-ignored); tests point THINKFLOW_BENCH_WORK at a temporary directory.
WORK = Path(os.environ.get("THINKFLOW_BENCH_WORK") or BENCH / ".work")
PROJECT_PY = ROOT / ".venv" / "bin" / "python"
PEERS_PY = BENCH / ".venv-peers" / "bin" / "python"

OFFLINE_ENV = {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
               "LITELLM_LOG": "ERROR", "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"}


def offline_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """``os.environ`` plus the offline settings (no model-cost-map fetch, no hub access) and ``extra``, without
    ``PYTHONDONTWRITEBYTECODE``: the commands measured run as a user's do, with the bytecode caches Python writes
    (see :func:`compile_project`)."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.update(OFFLINE_ENV)
    env.update(extra or {})
    return env


def compile_project() -> None:
    """Write the bytecode caches of ``runner/`` (``python -m compileall``), the state ``pip install`` or a user's
    first run leaves. Without them every cold start compiles ThinkFlow's modules from source (0.4 s here), while
    LiteLLM and the peers, installed by pip into site-packages, load compiled: a shell with
    ``PYTHONDONTWRITEBYTECODE=1`` (this project's sandboxes) would otherwise never get them."""
    subprocess.run([project_python(), "-m", "compileall", "-q", str(ROOT / "runner")], check=False,
                   capture_output=True, env=offline_env())


def project_python() -> str:
    """The project's interpreter: ``.venv/bin/python`` when present, else the current one."""
    return str(PROJECT_PY) if PROJECT_PY.exists() else sys.executable


def summary(values: list[float]) -> dict[str, float]:
    """``{"median", "min", "max", "n"}`` of ``values`` (NaN-free; empty -> zeros with n=0)."""
    if not values:
        return {"median": 0.0, "min": 0.0, "max": 0.0, "n": 0}
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "n": len(values)}


def median_ci(values: list[float], confidence: float = 0.95) -> dict[str, float] | None:
    """A distribution-free confidence interval of the median of ``values`` (the sign-test interval): the order
    statistics ``(x(k), x(n+1-k))`` with the largest ``k`` whose coverage ``1 - 2 P(Binomial(n, 1/2) <= k-1)`` is at
    least ``confidence``. Returns ``{"low", "high", "coverage", "n"}``, or None when ``n`` is too small for any
    interval to reach ``confidence`` (fewer than 6 values at 0.95). It assumes nothing about the distribution, so
    one disturbed round on a shared machine widens the interval only as far as the data do.
    """
    xs = sorted(values)
    n = len(xs)
    best = None
    cumulative = 0.0  # P(Binomial(n, 1/2) <= k-1)
    for k in range(1, n // 2 + 1):
        cumulative += math.comb(n, k - 1) / 2 ** n
        coverage = 1 - 2 * cumulative
        if coverage < confidence:
            break
        best = {"low": xs[k - 1], "high": xs[n - k], "coverage": coverage, "n": n}
    return best


def fmt_range(s: dict[str, float], unit: str = "", scale: float = 1.0, digits: int = 1) -> str:
    """``"12.3 (11.9–13.0) ms"`` from a :func:`summary` (values multiplied by ``scale``)."""
    if not s or not s.get("n"):
        return "n/a"
    f = f"{{:.{digits}f}}"
    u = f" {unit}" if unit else ""
    return f"{f.format(s['median'] * scale)} ({f.format(s['min'] * scale)}–{f.format(s['max'] * scale)}){u}"


def machine() -> dict[str, Any]:
    """CPU model, logical cores, RAM (GiB) from /proc, the OS and Python version."""
    cpu = platform.processor() or "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    ram = 0.0
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                ram = int(line.split()[1]) / 1024 / 1024
                break
    except OSError:
        pass
    return {"cpu": cpu, "cores": os.cpu_count() or 0, "ram_gib": round(ram, 1),
            "os": f"{platform.system()} {platform.release()}", "python": platform.python_version()}


def peak_rss_cmd(cmd: list[str], env: dict[str, str] | None = None, cwd: str | None = None,
                 timeout: float = 300) -> tuple[float, float, subprocess.CompletedProcess]:
    """Run ``cmd``; return (wall seconds, peak RSS in MiB, completed process).

    Peak RSS comes from ``/usr/bin/time -v`` ("Maximum resident set size") when present, else from
    ``resource.getrusage(RUSAGE_CHILDREN).ru_maxrss`` around a fresh child (which is the max over all children
    so far, so it is only an upper bound in that case).
    """
    gnu_time = Path("/usr/bin/time")
    if gnu_time.exists():
        import tempfile

        with tempfile.NamedTemporaryFile("r", suffix=".time") as out:
            full = [str(gnu_time), "-v", "-o", out.name, *cmd]
            t0 = time.perf_counter()
            proc = subprocess.run(full, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)
            wall = time.perf_counter() - t0
            report = Path(out.name).read_text()
        rss = 0.0
        for line in report.splitlines():
            if "Maximum resident set size" in line:
                rss = int(line.rsplit(":", 1)[1]) / 1024
        return wall, rss, proc
    import resource

    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    wall = time.perf_counter() - t0
    return wall, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, proc


# --- the scripted server, in its own process -------------------------------------------------------------------
class ServerProcess:
    """``bench/server.py`` in a child process (so its threads never share the GIL with the measured client).

    ``url`` is the OpenAI base URL (``http://127.0.0.1:PORT/v1``). Control calls (not measured):
    :meth:`script` loads the replies for the next run and clears the request log; :meth:`state` returns
    ``{"requests": [bodies], "server_seconds": [per request], "arrived": [epoch seconds per request]}``.
    Replies are dicts: ``{"calls": [[name, args], ...]}`` or ``{"text": "..."}``; optional ``"delay"`` seconds.
    """

    def __init__(self, python: str | None = None) -> None:
        self.python = python or project_python()
        self.proc: subprocess.Popen | None = None
        self.url = ""

    def start(self) -> "ServerProcess":
        self.proc = subprocess.Popen([self.python, str(BENCH / "server.py")], stdout=subprocess.PIPE,
                                     text=True, env=offline_env())
        line = self.proc.stdout.readline().strip() if self.proc.stdout else ""
        if not line.startswith("http://127.0.0.1:"):
            self.stop()
            raise RuntimeError(f"bench server did not start: {line!r}")
        self.url = line
        return self

    @property
    def base(self) -> str:
        return self.url.rsplit("/v1", 1)[0]

    def _call(self, path: str, payload: Any = None) -> Any:
        data = None if payload is None else json.dumps(payload).encode()
        req = urllib.request.Request(self.base + path, data=data, method="POST" if data is not None else "GET",
                                     headers={"Content-Type": "application/json"})
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(req, timeout=30) as resp:
            return json.loads(resp.read())

    def script(self, replies: list[dict]) -> None:
        self._call("/bench/script", {"replies": replies})

    def state(self) -> dict:
        return self._call("/bench/state")

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
            self.proc = None

    def __enter__(self) -> "ServerProcess":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def client_for(url: str) -> ServerProcess:
    """A control handle on an already running server at ``url`` (no process of its own)."""
    s = ServerProcess()
    s.url = url
    return s
