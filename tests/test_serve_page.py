"""The web page in a real headless browser (Debian's chromium, driven over the DevTools protocol): it loads, lists
the agents, a message gets an answer from the scripted model, the steps (thought, tool call, observation) appear,
and a past run opens from the list."""

from __future__ import annotations

import itertools
import json
import re
import subprocess
import threading
import time

import pytest
from browser import FLAGS as BROWSER_FLAGS
from browser import chromium
from scripted_servers import OpenAIServer, text, tool_calls
from serve_support import LiveServer, agent_yaml

FLAGS = [*BROWSER_FLAGS, "--disable-extensions", "--remote-debugging-port=0"]


class Page:
    """One browser tab over the DevTools protocol (https://chromedevtools.github.io/devtools-protocol/)."""

    def __init__(self, ws):
        self.ws = ws
        self.ids = itertools.count(1)

    def call(self, method: str, **params):
        call_id = next(self.ids)
        self.ws.send(json.dumps({"id": call_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv(timeout=30))
            if message.get("id") == call_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})

    def js(self, expression: str):
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait(self, expression: str, timeout: float = 20.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = self.js(expression)
            if value:
                return value
            time.sleep(0.1)
        raise AssertionError(f"timed out waiting for {expression}; page: {self.js('document.body.innerText')!r}")


def _devtools_url(proc: subprocess.Popen, timeout: float = 30.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            if proc.poll() is not None:
                break
            continue
        match = re.search(r"DevTools listening on (ws://\S+)", line)
        if match:
            threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()  # keep the pipe drained
            return match.group(1)
    raise RuntimeError("chromium did not start its DevTools endpoint")


@pytest.fixture
def browser(tmp_path):
    proc = subprocess.Popen([chromium(), *FLAGS, f"--user-data-dir={tmp_path / 'profile'}", "about:blank"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        ws = _devtools_url(proc)
        yield re.match(r"ws://([^/]+)/", ws).group(1)
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


def _page_url(devtools_host: str) -> str:
    import httpx

    for _ in range(100):
        pages = [t for t in httpx.get(f"http://{devtools_host}/json/list").json() if t.get("type") == "page"]
        if pages:
            return pages[0]["webSocketDebuggerUrl"]
        time.sleep(0.1)
    raise RuntimeError("no page target")


def test_the_page_chats_with_an_agent_and_shows_its_steps_live(tmp_path, browser):
    with OpenAIServer() as model:
        agent_yaml(tmp_path / "agents.d", model.url)
        agent_yaml(tmp_path / "agents.d", model.url, name="other", description="Another agent.")
        with LiveServer(tmp_path / "agents.d", tmp_path) as server:
            model.push(tool_calls([("calculator", {"expression": "6*7"}, "c1")], "I will multiply."),
                       text("The answer is 42.", delay=2.0))
            from websockets.sync.client import connect

            with connect(_page_url(browser), max_size=None, open_timeout=20) as ws:
                page = Page(ws)
                page.call("Page.enable")
                page.call("Page.navigate", url=server.url + "/")
                page.wait("document.querySelectorAll('#agent option').length === 2")
                assert page.js("Array.from(document.querySelectorAll('#agent option'), o => o.value)") == [
                    "helper", "other"]
                assert "calculator" in page.js("document.getElementById('agent-info').textContent")
                page.js("document.getElementById('message').value = 'What is 6*7?'")
                page.js("document.getElementById('send').click()")
                # live: the tool call and its observation show while the model still works on the answer
                page.wait("document.querySelectorAll('#steps li.observation').length === 1")
                assert page.js("document.querySelector('#chat .msg.agent')") is None
                assert page.js("document.getElementById('cancel').disabled") is False
                answer = page.wait("(document.querySelector('#chat .msg.agent') || {}).textContent")
                assert answer.startswith("The answer is 42.")
                steps = page.js("Array.from(document.querySelectorAll('#steps li'), li => [li.className, li.textContent])")
                kinds = [cls for cls, _ in steps]
                assert kinds[:3] == ["thought", "tool-call", "observation"]
                assert "I will multiply." in steps[0][1]
                assert steps[1][1].startswith("→ calculator") and '"6*7"' in steps[1][1]
                assert steps[2][1].startswith("← calculator ok") and steps[2][1].endswith("42")
                assert "answer" in kinds
                assert page.js("document.querySelector('#chat .msg.user').textContent") == "What is 6*7?"
                run_id = page.wait("(document.querySelector('#runs li') || {dataset: {}}).dataset.runId")
                page.js("document.getElementById('steps').replaceChildren()")
                page.js("document.querySelector('#runs li').click()")
                page.wait("document.querySelectorAll('#steps li.observation').length === 1")
                assert page.js("document.getElementById('steps-run').textContent").startswith(run_id)
                assert page.js("document.querySelectorAll('script[src^=\"http\"], link[href^=\"http\"]').length") == 0
            assert len(model.requests) == 2
            assert model.requests[1]["messages"][-1]["content"] == "42"
