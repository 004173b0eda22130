"""Headless Chromium (Debian's ``chromium`` package) for tests that look at a page as a person would.

``dump_dom(url)`` loads a page, lets its scripts run, and returns the DOM as HTML with Chromium's console log;
``screenshot(url, path)`` writes a PNG. Both run Chromium with a fresh profile and no background networking (the
machine has no network but loopback). Tests skip with the install command when Chromium is missing.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--hide-scrollbars"]


def chromium() -> str:
    """The Chromium binary, or skip the test (``apt-get install chromium`` installs it)."""
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        pytest.skip("headless Chromium is not installed: apt-get install -y chromium")
    return path


def _run(args: list[str], timeout: float) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory() as profile:
        return subprocess.run([chromium(), *FLAGS, f"--user-data-dir={profile}", *args], capture_output=True,
                              text=True, timeout=timeout)


def dump_dom(url: str, *, budget_ms: int = 5000, timeout: float = 60) -> tuple[str, str]:
    """``(dom, console log)`` of ``url`` after its scripts ran (at most ``budget_ms`` of virtual time)."""
    done = _run(["--enable-logging=stderr", "--v=0", f"--virtual-time-budget={budget_ms}", "--dump-dom", url],
                timeout)
    return done.stdout, done.stderr


def screenshot(url: str, path: Path, *, size: str = "1280,1600", timeout: float = 60) -> Path:
    """Write a PNG of ``url`` at ``size`` (pixels, "width,height") to ``path``."""
    _run([f"--window-size={size}", "--virtual-time-budget=3000", f"--screenshot={path}", url], timeout)
    return path
