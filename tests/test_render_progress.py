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


def test_sub_agent_lines_show_a_field_of_any_type_as_escaped_text():
    """A sub-agent's event read back from a trace may hold anything: numbers, lists, markup."""
    from thinkflow.cli.render import format_usage, subagent_line, subagent_prefix

    assert subagent_line({"type": "warning", "message": 5}) == "[yellow]warning: 5[/]"
    assert subagent_line({"type": "tool_returned", "name": ["t"], "status": "[/]"}) == '[yellow]← ["t"] \\[/][/]'
    assert subagent_line({"type": "run_finished", "status": "[/]", "steps": "2", "usage": [1]}) == \
        "[yellow]\\[/][/] · 0 steps · 0 tokens"
    assert subagent_line({"type": "plan_created", "steps": 3}) == "plan: 0 steps"
    assert subagent_line("not an event") is None
    assert format_usage({"total_tokens": "many", "cost_usd": "x"}) == "0 tokens"
    assert format_usage({"total_tokens": 1234, "cost_usd": 0.5}) == "1,234 tokens · $0.5000"
    assert subagent_prefix({"depth": 10 ** 9, "agent": 3}) == "  " * 20 + "[magenta]3[/] › "
    assert subagent_prefix({"depth": 2, "agent": "helper"}) == "    [magenta]helper[/] › "
