"""Progress off a terminal: a line when each step starts and a heartbeat with the elapsed time while the model
works, and nothing more once it has replied."""

from __future__ import annotations

import io
import time

from rich.console import Console

from thinkflow.cli.render import LiveView
from thinkflow.run import events as ev


def wait_for(predicate, seconds: float = 10.0) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.01)
    return False


def test_off_a_terminal_steps_print_a_start_line_and_heartbeats():
    out = io.StringIO()
    view = LiveView(Console(file=out, force_terminal=False, width=120), heartbeat_s=0.05)
    view(ev.ModelRequest(step=1, style="json"))
    assert out.getvalue().splitlines()[0] == "step 1: thinking…"
    assert wait_for(lambda: "step 1: thinking · " in out.getvalue())
    view(ev.ModelReplied(step=1, text="x", usage={"prompt_tokens": 5, "completion_tokens": 2}, latency_s=1.0))
    after = out.getvalue()
    beats = [line for line in after.splitlines() if line.startswith("step 1: thinking · ")]
    assert beats and all(line.endswith(" s") for line in beats)
    time.sleep(0.2)
    assert out.getvalue() == after  # the heartbeat stopped with the reply
    view.close()


def test_on_a_terminal_there_is_a_spinner_and_no_heartbeat_lines():
    out = io.StringIO()
    view = LiveView(Console(file=out, force_terminal=True, width=120), heartbeat_s=0.01)
    view(ev.ModelRequest(step=1, style="json"))
    time.sleep(0.1)
    view.close()
    assert "thinking · " not in out.getvalue()
