"""``thinkflow tools list [AGENT]`` and ``thinkflow tools call NAME --arg k=v ... | --json '{...}'``.

Without ``--agent`` a tool is looked up in ``./tools.d``, then among the built-ins, the tools registered with
``@tool`` and the ``thinkflow.tools`` entry points. ``call`` goes through the same Toolbox as an agent run
(validation, the agent's allow/deny rules, approval of confirm tools), prints the observation and the
structured result, and exits 0 when the status is ok, 1 otherwise (2 for a usage or config error).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from thinkflow.text import closest

EXIT_TOOL_FAILED = 1
EXIT_USAGE = 2


def _console(stderr: bool = False) -> Any:
    from rich.console import Console

    return Console(stderr=stderr, highlight=False, soft_wrap=True)


def _fail(message: str, code: int = EXIT_USAGE) -> None:
    from rich.markup import escape

    from thinkflow.redaction import Redactor

    _console(stderr=True).print(f"[bold red]error:[/bold red] {escape(Redactor.for_run().text(message))}")
    raise SystemExit(code)


def _load_agent(path: str) -> Any:
    from thinkflow.errors import SpecError
    from thinkflow.config.loader import load_agent

    try:
        return load_agent(Path(path))
    except SpecError as exc:
        _fail(str(exc))


def _tools_dir_specs(directory: Path) -> tuple[dict[str, Any], list[str]]:
    """Tool specs from every YAML file under ``directory`` (``./tools.d``) through the config loader, and the
    loader's error for each file that does not load (such a file is skipped, so one broken file does not hide
    the tools of the others). ``({}, [])`` when the directory does not exist."""
    if not directory.is_dir():
        return {}, []
    from thinkflow.errors import SpecError
    from thinkflow.config.loader import load_tools
    from thinkflow.config.locate import yaml_files

    specs: dict[str, Any] = {}
    broken: list[str] = []
    for path in yaml_files(directory):
        try:
            for spec in load_tools(path):
                specs.setdefault(spec.name, spec)
        except SpecError as exc:
            broken.append(str(exc))
    return specs, broken


def _standalone_specs(workspace: Path) -> tuple[dict[str, Any], list[str]]:
    """Every tool usable without an agent: ./tools.d, built-ins, @tool registrations, entry points (by name;
    the first found wins); and the errors of the ./tools.d files that were skipped."""
    from thinkflow.tools.builtin import builtin_specs
    from thinkflow.tools.registry import entry_point_names, registered_specs

    specs, broken = _tools_dir_specs(Path.cwd() / "tools.d")
    for name, spec in builtin_specs(workspace).items():
        specs.setdefault(name, spec)
    for name, spec in registered_specs().items():
        specs.setdefault(name, spec)
    for name in entry_point_names():
        if name not in specs:
            from thinkflow.config.spec import ToolSpec

            specs[name] = ToolSpec(name=name, description=f"entry point {name}", kind="python")
    return specs, broken


def _toolbox(agent_path: str | None, names: list[str] | None, workspace: Path, approver: Any) -> Any:
    """The Toolbox of an agent, or of the standalone tools (``names``, or all). An MCP server in ./tools.d is
    started when every tool is listed, or when a wanted name is none of the specs' names (it may be one of the
    server's tools); a server that does not start is then a warning."""
    from thinkflow.errors import ToolError
    from thinkflow.tools import Toolbox
    from thinkflow.tools.toolbox import build_tools

    try:
        if agent_path:
            agent = _load_agent(agent_path)
            return Toolbox.from_agent(agent, approver=approver)
        specs, broken = _standalone_specs(workspace)
        servers = [n for n, spec in specs.items() if spec.kind == "mcp"]
        missing = [name for name in names or () if name not in specs]
        wanted = list(specs) if names is None else [n for n in names if n in specs] + (servers if missing else [])
        if broken:
            _fail_or_warn_broken(broken, [m for m in missing if not servers])
        tools = {}
        for name in dict.fromkeys(wanted):
            try:
                built = build_tools(specs[name], workspace)
            except ToolError as exc:
                if names is not None and name in names:  # the tool asked for cannot be built: the command fails
                    raise
                _warn(f"skipped tool {name!r}: {exc}")
                continue
            for tool in built:
                tools.setdefault(tool.spec.name, tool)
        return Toolbox(tools, approver=approver)
    except ToolError as exc:
        _fail(str(exc))


def _close_mcp_servers() -> None:
    import sys

    servers = sys.modules.get("thinkflow.tools.mcp.servers")
    if servers is not None:
        servers.close_servers()


def _fail_or_warn_broken(broken: list[str], missing: list[str]) -> None:
    """Report the ./tools.d files that did not load: an error (exit 2) when a wanted tool (``missing``) was not
    found and may be in one of them, else a warning."""
    if missing:
        _fail(f"no tool {missing[0]!r} found, and ./tools.d has files that do not load (it may be in one):\n"
              + "\n".join(broken))
    for error in broken:
        _warn(f"skipped {error}")


def _warn(message: str) -> None:
    from rich.markup import escape

    _console(stderr=True).print(f"[yellow]warning: {escape(message)}[/yellow]")


def parse_arg(pair: str, parameters: dict[str, Any]) -> tuple[str, Any]:
    """``k=v`` -> ``(k, value)``: the text as is for string parameters, else parsed as JSON when it parses
    (``5`` -> 5, ``true`` -> True, ``[1,2]`` -> list; with the bounded decoder, so ``NaN`` stays text), else the
    text. Raises click.BadParameter for a value nested deeper than
    :data:`~thinkflow.model.json_limits.MAX_DEPTH` levels."""
    from thinkflow.model import json_limits

    if "=" not in pair:
        raise click.BadParameter(f"{pair!r} is not KEY=VALUE", param_hint="--arg")
    key, _, text = pair.partition("=")
    key = key.strip()
    schema = (parameters.get("properties") or {}).get(key, {})
    kind = schema.get("type") if isinstance(schema, dict) else None
    if kind == "string" or (isinstance(kind, list) and kind[:1] == ["string"]):
        return key, text
    try:
        return key, json_limits.loads(text)
    except json_limits.NestingError as error:
        raise click.BadParameter(f"the value of {key!r} is {error}", param_hint="--arg") from None
    except json.JSONDecodeError:
        return key, text


@click.group("tools")
def tools_group() -> None:
    """List tools and call one by hand, exactly as an agent would."""


@tools_group.command("list")
@click.argument("agent", required=False, type=click.Path(dir_okay=False))
@click.option("--workspace", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Root for the file built-ins (default: the current directory).")
@click.option("--json", "as_json", is_flag=True, help="Print the tool definitions as JSON.")
def list_tools(agent: str | None, workspace: Path | None, as_json: bool) -> None:
    """Show each tool with its kind, description and parameters (an AGENT's tools, or every tool available
    here: ./tools.d, built-ins, registered and entry-point tools). MCP servers are started to list their tools,
    shown with the server's name as kind ("mcp: notes")."""
    from rich.markup import escape
    from rich.table import Table

    from thinkflow.tools.validation import expected_shape

    try:
        box = _toolbox(agent, None, workspace or Path.cwd(), None)
        rows = []
        for name in box.names():
            tool = box.get(name)
            row = {"name": name, "kind": tool.spec.kind, "description": tool.spec.description,
                   "confirm": box.needs_confirm(name), "parameters": tool.parameters()}
            if getattr(tool, "server", None):
                row["server"] = tool.server
            rows.append(row)
    finally:
        _close_mcp_servers()
    if as_json:
        click.echo(json.dumps(rows, indent=2, ensure_ascii=False))
        return
    table = Table(title=f"tools of {agent}" if agent else "tools")
    for column in ("name", "kind", "description", "parameters"):
        table.add_column(column, overflow="fold")
    for row in rows:
        name = row["name"] + (" (confirm)" if row["confirm"] else "")
        shape = expected_shape(row["name"], row["parameters"])
        kind = f"mcp: {row['server']}" if row.get("server") else row["kind"]
        table.add_row(escape(name), escape(kind), escape(row["description"]), escape(shape[len(row["name"]):]))
    _console().print(table)


@tools_group.command("call")
@click.argument("name")
@click.option("--arg", "args", multiple=True, metavar="KEY=VALUE",
              help="An argument (repeatable). Non-string parameters take JSON: --arg top=5.")
@click.option("--json", "json_args", default=None, metavar="'{...}'", help="All arguments as one JSON object.")
@click.option("--agent", "agent_path", type=click.Path(dir_okay=False), default=None,
              help="Take the tool (and the agent's rules and workspace) from this agent file.")
@click.option("--workspace", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Root for the file built-ins when no agent is given (default: the current directory).")
@click.option("--yes", "-y", is_flag=True, help="Approve tools that need confirmation without asking.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              help="text: observation then a summary; json: the whole result as one JSON object.")
def call_tool(name: str, args: tuple[str, ...], json_args: str | None, agent_path: str | None,
              workspace: Path | None, yes: bool, fmt: str) -> None:
    """Run tool NAME once with the given arguments and print the observation and the structured result (NAME may
    be a tool of an MCP server declared in ./tools.d or used by --agent, as the model sees it)."""
    try:
        _call_tool(name, args, json_args, agent_path, workspace, yes, fmt)
    finally:
        _close_mcp_servers()


def _call_tool(name: str, args: tuple[str, ...], json_args: str | None, agent_path: str | None,
               workspace: Path | None, yes: bool, fmt: str) -> None:
    from rich.markup import escape

    from thinkflow.cli.approval import choose_approver

    approver = choose_approver(yes=yes)
    box = _toolbox(agent_path, None if agent_path else [name], workspace or Path.cwd(), approver)
    arguments: Any = {}
    if json_args is not None:
        from thinkflow.model import json_limits

        try:
            arguments = json_limits.loads(json_args)
        except json_limits.NestingError as exc:
            _fail(f"--json is {exc}")
        except json_limits.NumberError as exc:
            _fail(f"--json is not valid JSON: {exc.msg}")
        except json.JSONDecodeError as exc:
            _fail(f"--json is not valid JSON: {exc}")
    if args:
        if not isinstance(arguments, dict):
            _fail("--json must be an object when combined with --arg")
        tool = box.get(name)
        parameters = tool.parameters() if tool is not None else {}
        for pair in args:
            key, value = parse_arg(pair, parameters)
            arguments[key] = value
    if name not in box and not agent_path:
        close = closest(name, [*box.names(), *_standalone_specs(workspace or Path.cwd())[0]])
        hint = f" (did you mean {close!r}?)" if close else ""
        _fail(f"no tool {name!r} in ./tools.d, the built-ins, registered tools or entry points{hint}")
    from thinkflow.redaction import Redactor

    result = box.call(name, arguments)
    redact = Redactor.for_run()  # the tool's own secrets are redacted by the toolbox; these are the environment's
    result = type(result)(result.status, redact.text(result.text), redact(result.data))
    if fmt == "json":
        click.echo(json.dumps({"status": result.status, "text": result.text, "data": result.data},
                              ensure_ascii=False, default=str, indent=2))
    else:
        click.echo(result.text)
        console = _console(stderr=False)
        colour = "green" if result.ok else "red"
        data = {k: v for k, v in result.data.items() if k != "traceback"}
        console.print(f"[{colour}]status: {result.status}[/{colour}]  " + escape(
            json.dumps(data, ensure_ascii=False, default=str)))
        if "traceback" in result.data:
            console.print(escape(result.data["traceback"].rstrip()), style="dim")
    raise SystemExit(0 if result.ok else EXIT_TOOL_FAILED)


COMMANDS = [tools_group]
