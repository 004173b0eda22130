"""``thinkflow run AGENT.yaml [TASK]`` (also installed as ``thinkflow-run``): run an agent, or chat with it.

Exit codes (also in the command's help):
    0 completed; 1 the run ended without completing (max_steps, timeout, budget_exceeded, loop_detected,
    invalid_output); 2 usage error; 3 config error (invalid agent file, prompt template, tool or memory set-up);
    4 model error (provider failure after retries, empty output); 130 interrupted (Ctrl-C; session and trace saved).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from thinkflow import jsonout

EXIT_OK = 0
EXIT_INCOMPLETE = 1
EXIT_USAGE = 2
EXIT_CONFIG = 3
EXIT_MODEL = 4
EXIT_INTERRUPTED = 130

EXIT_BY_STATUS = {
    "completed": EXIT_OK,
    "max_steps": EXIT_INCOMPLETE,
    "timeout": EXIT_INCOMPLETE,
    "budget_exceeded": EXIT_INCOMPLETE,
    "loop_detected": EXIT_INCOMPLETE,
    "invalid_output": EXIT_INCOMPLETE,
    "model_error": EXIT_MODEL,
    "interrupted": EXIT_INTERRUPTED,
}

EXIT_HELP = """\b
Exit codes:
  0    completed
  1    ended without completing (max_steps, timeout, budget_exceeded, loop_detected, invalid_output)
  2    usage error
  3    config error (agent file, prompt template, tool or memory set-up)
  4    model error (provider failure after retries, empty output)
  130  interrupted (Ctrl-C; the session and the trace are saved)
"""


def exit_code(status: str) -> int:
    """The process exit code for a run status (unknown statuses -> 1)."""
    return EXIT_BY_STATUS.get(status, EXIT_INCOMPLETE)


def ending_line(status: str, error: str | None) -> str:
    """One line saying why a run did not complete: ``"<status>: <error>"`` (the error alone when it starts with the
    status, the status alone when there is no error), its line breaks folded into spaces."""
    why = " ".join((error or "").split())
    if not why:
        return status
    return why if why.startswith(status) else f"{status}: {why}"


def _parse_vars(values: tuple[str, ...]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"{item!r} is not key=value", param_hint="--var")
        out[key.strip()] = value
    return out


class _Output:
    """Where results and errors go: stdout for the answer (or JSON), stderr for everything else. ``redact`` hides
    known secrets in all of it (the environment's credentials; the agent's too once it is built)."""

    def __init__(self, *, quiet: bool, as_json: bool):
        from rich.console import Console

        from thinkflow.redaction import Redactor

        self.quiet = quiet
        self.as_json = as_json
        self.err = Console(stderr=True)
        self.redact = Redactor.for_run()

    def fail(self, code: int, status: str, message: str, lines: list[str] | None = None) -> None:
        message, lines = self.redact.text(message), [self.redact.text(line) for line in lines or []]
        if self.as_json:
            click.echo(json.dumps({"status": status, "error": message, "issues": lines or []}, ensure_ascii=False))
        else:
            from rich.markup import escape

            self.err.print(f"[red]{escape(message)}[/]", soft_wrap=True)
            for line in lines or []:
                self.err.print(escape(line), highlight=False, soft_wrap=True)
        raise SystemExit(code)


@click.command(name="run", epilog=EXIT_HELP, context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("agent_file", metavar="AGENT.yaml", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.argument("task", nargs=-1)
@click.option("--model", "-m", "model", metavar="MODEL",
              help="Use this model for this run, sub-agents included (a LiteLLM model string).")
@click.option("--yes", "-y", is_flag=True, help="Approve every call of a confirm tool without asking.")
@click.option("--session", "-s", "session_name", metavar="NAME",
              help="Continue (or start) the named session; its history is kept across runs.")
@click.option("--quiet", "-q", is_flag=True,
              help="Print only the answer: no live view or progress (errors, and why a run did not complete, still "
                   "go to stderr, one line).")
@click.option("--json", "as_json", is_flag=True,
              help="Print a JSON result (status, answer, run_id, trace, steps, usage) and nothing else.")
@click.option("--stream/--no-stream", default=None, help="Stream the model's text as it arrives.")
@click.option("--trace-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Directory of run traces (default .thinkflow/runs).")
@click.option("--max-steps", type=click.IntRange(min=1), default=None, help="Override loop.max_steps.")
@click.option("--var", "variables", multiple=True, metavar="KEY=VALUE", help="Prompt template variable (repeatable).")
@click.option("--otel", is_flag=True,
              help="Export OpenTelemetry spans over OTLP (endpoint from OTEL_EXPORTER_OTLP_ENDPOINT, default "
                   "localhost:4318); also on with that variable set or the agent's telemetry block.")
@click.option("--cache", is_flag=True, help="Answer repeated model requests from LiteLLM's response cache (as model.cache: true).")
def run(agent_file: Path, task: tuple[str, ...], model: str | None, yes: bool, session_name: str | None,
        quiet: bool, as_json: bool, stream: bool | None, trace_dir: Path | None, max_steps: int | None,
        variables: tuple[str, ...], otel: bool, cache: bool) -> None:
    """Run the agent in AGENT.yaml on TASK, or chat with it when TASK is left out.

    TASK may be several words; "-" reads it from standard input. In chat, each line is a turn of the same
    session (a new one unless --session is given); type /exit (or Ctrl-D) to leave.
    """
    try:
        _run_command(agent_file, task, model, yes, session_name, quiet, as_json, stream, trace_dir, max_steps,
                     variables, otel, cache)
    except KeyboardInterrupt:  # outside a run (the loop itself saves and returns "interrupted")
        raise SystemExit(EXIT_INTERRUPTED) from None


def _run_command(agent_file, task, model, yes, session_name, quiet, as_json, stream, trace_dir, max_steps,
                 variables, otel=False, cache=False) -> None:
    from thinkflow.errors import ModelError, SessionError

    prompt_vars = _parse_vars(variables)
    if model is not None and not model.strip():
        raise click.BadParameter("is empty: give a LiteLLM model string, like openai/gpt-4o-mini", param_hint="--model")
    text = " ".join(task).strip()
    if text == "-":
        text = sys.stdin.read().strip()
        if not text:
            raise click.UsageError("no task on standard input")
    if task and not text:
        raise click.UsageError("the TASK is empty: give a task, or leave TASK out to chat")
    chat = not text
    if chat and as_json:
        raise click.UsageError("--json needs a TASK (chat is interactive)")
    out = _Output(quiet=quiet, as_json=as_json)
    if session_name is not None:
        from thinkflow.run.session import check_name

        try:
            check_name(session_name)
        except SessionError as error:
            raise click.BadParameter(str(error), param_hint="--session") from None
    spec, agent, view = _prepare(agent_file, out, model=model, yes=yes, quiet=quiet or as_json, stream=stream,
                                 prompt_vars=prompt_vars, cache=cache, chat=chat)
    session = None
    if session_name is not None or chat:
        from thinkflow.run.session import Session

        if session_name is None:
            import time

            session_name = "chat-" + time.strftime("%Y%m%d-%H%M%S")
        session = Session(spec.name, session_name, secrets=agent.secrets)
    telemetry = _telemetry(spec, otel, out)
    try:
        if chat:
            code = _chat(agent, session, view, out, telemetry=telemetry, trace_dir=trace_dir, max_steps=max_steps,
                         stream=stream)
        else:
            result = _run_once(agent, text, session, view, out, telemetry=telemetry, trace_dir=trace_dir,
                               max_steps=max_steps, stream=stream)
            code = exit_code(result.status)
    except ModelError as error:  # raised only before the loop could catch it
        out.fail(EXIT_MODEL, "model_error", str(error))
    finally:
        view.close()
        if telemetry is not None:
            telemetry.shutdown()
        _close_mcp_servers()
    raise SystemExit(code)


def _close_mcp_servers() -> None:
    """The run is over: shut down the MCP servers it started (their process groups included)."""
    servers = sys.modules.get("thinkflow.tools.mcp.servers")
    if servers is not None:
        servers.close_servers()


def _telemetry(spec: Any, flag: bool, out: _Output) -> Any:
    """The run's OpenTelemetry exporter, or None when telemetry is off (then the SDK is never imported)."""
    import os

    from thinkflow.run.telemetry import Telemetry, settings_from

    settings = settings_from(os.environ, spec.telemetry, flag=flag)
    if settings is None:
        return None
    try:
        return Telemetry(settings)
    except ImportError:
        out.fail(EXIT_USAGE, "error", "OpenTelemetry is not installed: pip install 'thinkflow[otel]'")


def _prepare(agent_file: Path, out: _Output, *, model, yes, quiet, stream, prompt_vars, cache=False, chat=False):
    from thinkflow.errors import MemoryStoreError, ModelError, PromptError, SpecError, ToolError
    from thinkflow.config.loader import load_agent
    from thinkflow.cli.approval import choose_approver
    from thinkflow.cli.render import LiveView

    try:
        spec = load_agent(agent_file)
    except SpecError as error:
        n = len(error.issues)
        out.fail(EXIT_CONFIG, "config_error", f"{agent_file}: {n} issue{'s' * (n != 1)}",
                 [str(i) for i in error.issues])
    if cache:
        import dataclasses

        from thinkflow.model.resolution import with_cache

        spec = dataclasses.replace(spec, model=with_cache(spec.model))
    view = LiveView(out.err, quiet=quiet, stream=bool(stream if stream is not None else spec.loop.stream))
    try:
        from thinkflow.agent import build

        agent = build(spec, model=model, approver=choose_approver(yes=yes), on_progress=view.progress,
                      prompt_vars=prompt_vars)
    except (ToolError, PromptError, MemoryStoreError) as error:
        _close_mcp_servers()
        out.fail(EXIT_CONFIG, "config_error", str(error))
    except ModelError as error:
        out.fail(EXIT_MODEL, "model_error", str(error))
    from thinkflow.model.preload import preload_litellm
    from thinkflow.redaction import Redactor

    # LiteLLM's seconds of imports with the collector paused, then gc.freeze(), so its first call does not walk its
    # objects in full collections; beside the embedded model's start or while a chat waits for its first line,
    # else right here (thinkflow/model/preload.py)
    preload_litellm(freeze=True, background=bool(getattr(agent.client, "local", False)) or chat)
    out.redact = view.redactor = Redactor(agent.secrets)  # agent.secrets holds the environment's credentials too
    return spec, agent, view


def _run_once(agent: Any, task: str, session: Any, view: Any, out: _Output, *, telemetry: Any = None,
              **options: Any):
    from thinkflow.errors import PromptError, TraceError
    if agent.spec.planner.enabled:  # plan-then-execute
        from thinkflow.run.planner import run as run_loop
    else:
        from thinkflow.run.loop import run as run_loop
    on_event = view
    if telemetry is not None:
        recorder = telemetry.recorder(secrets=agent.secrets)

        def on_event(event: Any) -> None:
            view(event)
            recorder(event)
    try:
        result = run_loop(agent, task, on_event=on_event, session=session, **options)
    except PromptError as error:
        view.close()
        out.fail(EXIT_CONFIG, "config_error", str(error))
    except TraceError as error:  # the trace directory cannot be written: nothing ran
        view.close()
        out.fail(EXIT_USAGE, "error", f"{error} (choose another directory with --trace-dir)")
    view.close()
    if out.as_json:
        click.echo(jsonout.dumps(out.redact(result.to_dict()), ensure_ascii=False))
    elif result.answer:
        click.echo(out.redact.text(result.answer))
    if out.quiet and not out.as_json and result.status != "completed":
        # the live view, which says how a run ended, is off: the reason still goes to stderr
        from rich.markup import escape

        out.err.print(f"[red]{escape(out.redact.text(ending_line(result.status, result.error)))}[/]",
                      highlight=False, soft_wrap=True)
    if session is not None and not out.quiet and not out.as_json:
        out.err.print(f"[dim]session: {session.name} · trace: {result.trace_path}[/]")
    elif not out.quiet and not out.as_json and result.trace_path:
        out.err.print(f"[dim]trace: {result.trace_path}[/]")
    return result


def _chat(agent: Any, session: Any, view: Any, out: _Output, **options: Any) -> int:
    from rich.markup import escape

    console = out.err
    console.print(f"[bold]chat with {escape(agent.name)}[/] · session [bold]{escape(session.name)}[/] "
                  f"(resume with --session {escape(session.name)}) · /exit to leave")
    code = EXIT_OK
    while True:
        try:
            line = console.input("[bold green]you>[/] ")
        except EOFError:
            console.print()
            return code
        except KeyboardInterrupt:
            console.print()
            return EXIT_INTERRUPTED
        line = line.strip()
        if not line:
            continue
        if line in ("/exit", "/quit"):
            return code
        try:
            result = _run_once(agent, line, session, view, out, **options)
        except KeyboardInterrupt:  # outside the turn's run (mostly while the client starts): the chat goes on
            view.close()
            console.print("[yellow](interrupted; /exit to leave)[/]")
            continue
        if result.status == "interrupted":
            console.print("[yellow](interrupted; the turn was saved; /exit to leave)[/]")
        code = exit_code(result.status) if result.status != "interrupted" else EXIT_OK


COMMANDS = [run]
