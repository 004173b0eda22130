"""Python tools run in a worker process: a timeout holds even for code that never releases the GIL."""

from __future__ import annotations

import os
import textwrap
import time

import pytest

from thinkflow.config.spec import ToolSpec
from thinkflow.tools import Toolbox, tool
from thinkflow.tools.process import live_count
from thinkflow.tools.python import PythonTool
from thinkflow.tools.registry import unregister


@pytest.fixture
def module(tmp_path, monkeypatch):
    (tmp_path / "gil_tools.py").write_text(textwrap.dedent('''
        import os

        CALLS = 0

        def spin():
            """Holds the GIL in one C call for minutes."""
            return sum(range(10 ** 11))

        def huge_pow():
            return 7 ** (10 ** 9)

        def count() -> int:
            global CALLS
            CALLS += 1
            return CALLS

        def noisy() -> str:
            print("to stdout, not into the protocol")
            return "fine"

        def where() -> dict:
            return {"cwd": os.getcwd(), "flag": os.environ.get("GIL_TOOLS_FLAG"), "pid": os.getpid()}
    '''))
    monkeypatch.syspath_prepend(str(tmp_path))
    return "gil_tools"


def ptool(module, func, **kw):
    return PythonTool(ToolSpec(name=func, description="", kind="python", entrypoint=f"{module}:{func}", **kw))


@pytest.mark.parametrize("func", ["spin", "huge_pow"])
def test_a_call_that_never_releases_the_gil_is_stopped_at_its_timeout(module, func):
    python = ptool(module, func, timeout=1)
    before = live_count()
    started = time.monotonic()
    result = python.run({})
    elapsed = time.monotonic() - started
    assert (result.status, result.text) == ("timeout", "timed out after 1 s")
    assert result.data["isolation"] == "process"
    assert elapsed < 10  # the computation alone takes minutes
    assert live_count() == before  # the worker was killed, not left computing


def test_the_worker_is_kept_between_calls_and_replaced_after_a_timeout(module):
    counter = ptool(module, "count", timeout=5)
    assert [counter.run({}).text for _ in range(3)] == ["1", "2", "3"]
    spinner = ptool(module, "spin", timeout=0.5)
    assert spinner.run({}).status == "timeout"
    assert spinner.run({}).status == "timeout"  # a fresh worker each time, the previous one is gone
    where = ptool(module, "where").run({})
    assert where.status == "ok" and f'"pid": {os.getpid()}' not in where.text


def test_prints_do_not_break_the_protocol_and_cwd_and_environment_follow_the_runner(module, tmp_path, monkeypatch):
    assert ptool(module, "noisy").run({}).text == "fine"
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GIL_TOOLS_FLAG", "on")
    text = ptool(module, "where").run({}).text
    assert f'"cwd": "{tmp_path}"' in text and '"flag": "on"' in text


def test_quick_tools_run_inline_and_functions_defined_inside_functions_in_a_thread(module):
    quick = ptool(module, "count", quick=True)
    assert quick.isolation == "inline"
    assert quick.run({}).data["isolation"] == "inline"

    @tool(name="local_echo", timeout=5)
    def local_echo(text: str) -> str:
        return text

    try:
        box = Toolbox({"local_echo": PythonTool(ToolSpec(name="local_echo", description="", kind="python"))})
        result = box.call("local_echo", {"text": "hi"})
        assert (result.status, result.text, result.data["isolation"]) == ("ok", "hi", "thread")
    finally:
        unregister("local_echo")


def test_a_process_the_tool_leaves_running_ends_with_the_call(tmp_path, monkeypatch):
    (tmp_path / "spawning_tools.py").write_text(textwrap.dedent('''
        import subprocess

        def detach(pidfile: str) -> str:
            subprocess.Popen(["setsid", "sh", "-c", f"echo $$ > {pidfile}; exec sleep 300"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            import time
            for _ in range(200):
                try:
                    if open(pidfile).read().strip():
                        return "started"
                except OSError:
                    pass
                time.sleep(0.02)
            return "no pid"
    '''))
    monkeypatch.syspath_prepend(str(tmp_path))
    from test_tools_shell_containment import gone, reap

    pidfile = tmp_path / "pid"
    result = ptool("spawning_tools", "detach", timeout=10).run({"pidfile": str(pidfile)})
    pid = int(pidfile.read_text())
    try:
        assert result.text == "started"
        assert gone(pid)
    finally:
        reap(pid)


def test_ctrl_c_during_a_call_kills_the_worker(module, tmp_path):
    import signal
    import subprocess
    import sys
    from pathlib import Path

    script = textwrap.dedent(f'''
        import sys
        sys.path.insert(0, {str(tmp_path)!r})
        from thinkflow.config.spec import ToolSpec
        from thinkflow.tools.python import PythonTool
        tool = PythonTool(ToolSpec(name="spin", description="", kind="python", entrypoint="gil_tools:spin",
                                   timeout=120))
        worker = tool._worker()  # started first, so the test knows its pid
        tool._idle.append(worker)
        print(worker.tree.pid, flush=True)
        tool.run({{}})
    ''')
    root = Path(__file__).resolve().parents[1] / "runner"
    runner = subprocess.Popen([sys.executable, "-c", script], env={**os.environ, "PYTHONPATH": str(root)},
                              stdout=subprocess.PIPE, text=True,
                              preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    launcher_pid = int(runner.stdout.readline())
    time.sleep(1.0)  # the call is computing
    runner.send_signal(signal.SIGINT)
    runner.wait(20)
    from test_tools_shell_containment import gone

    assert gone(launcher_pid)
