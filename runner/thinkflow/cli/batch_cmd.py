"""``thinkflow batch AGENT.yaml INPUTS -o RESULTS.jsonl``: one agent over many inputs, locally or on Ray.

Exit codes: 0 every input of the file completed (this batch or an earlier one into the same results file);
1 some input did not complete, or the batch stopped early (budget, Ctrl-C); 2 usage error; 3 config error (the
agent file or the inputs file); 4 the model cannot be set up; 130 interrupted twice (finished results are kept).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from thinkflow.cli.run_cmd import EXIT_CONFIG, EXIT_INCOMPLETE, EXIT_INTERRUPTED, EXIT_MODEL, EXIT_OK, _parse_vars

BATCH_HELP = """\b
Exit codes:
  0    every input completed
  1    some input did not complete, or the batch stopped early (budget, Ctrl-C)
  2    usage error
  3    config error (agent file or inputs file)
  4    the model cannot be set up
  130  interrupted twice (finished results are kept)
"""


def _resources(value: str | None) -> dict[str, float] | None:
    if not value:
        return None
    try:
        parsed = json.loads(value)
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict) or not all(isinstance(v, (int, float)) for v in parsed.values()):
        raise click.BadParameter('give a JSON object of numbers, like {"GPU": 1}', param_hint="--ray-resources")
    return {str(k): float(v) for k, v in parsed.items()}


@click.command(name="batch", epilog=BATCH_HELP, context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("agent_file", metavar="AGENT.yaml", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.argument("inputs_file", metavar="INPUTS", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--output", "-o", "output", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="Results file (JSONL, one line per input). Rerunning with the same file skips finished ids.")
@click.option("--task-template", metavar="JINJA",
              help="CSV inputs: the task as a template over the row's columns, e.g. 'Summarise: {{ text }}'.")
@click.option("--concurrency", "-c", type=click.IntRange(min=1), default=None,
              help="Runs in flight (default: 1 for the embedded model on a small machine, 2 for Ollama, 4 else; "
                   "with --ray: the cluster's CPUs).")
@click.option("--rerun-failed", is_flag=True, help="Run again the inputs whose last result did not complete.")
@click.option("--max-cost", type=click.FloatRange(min=0, min_open=True), default=None, metavar="USD",
              help="Stop taking new inputs once the batch has cost this much (US dollars, all runs).")
@click.option("--max-tokens", type=click.IntRange(min=1), default=None,
              help="Stop taking new inputs once the batch has used this many tokens (all runs).")
@click.option("--model", "-m", "model", metavar="MODEL", help="Use this model for every run (a LiteLLM model string).")
@click.option("--max-steps", type=click.IntRange(min=1), default=None, help="Override loop.max_steps.")
@click.option("--trace-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Directory of the runs' traces (default .thinkflow/runs).")
@click.option("--var", "variables", multiple=True, metavar="KEY=VALUE",
              help="Prompt template variable for every run (an input's own vars win).")
@click.option("--ray", "use_ray", is_flag=True, help="Run each input as a Ray task (pip install 'thinkflow[ray]').")
@click.option("--ray-address", metavar="ADDRESS", default=None,
              help="Ray cluster address (default: the local Ray instance).")
@click.option("--ray-retries", type=click.IntRange(min=0), default=2, show_default=True,
              help="Times Ray retries a failed task.")
@click.option("--ray-num-cpus", type=click.FloatRange(min=0, min_open=True), default=1.0, show_default=True,
              help="CPUs each Ray task reserves.")
@click.option("--ray-resources", metavar="JSON", default=None, help='Other resources per Ray task, e.g. {"GPU": 1}.')
@click.option("--ray-working-dir", type=click.Path(exists=True, file_okay=False, path_type=Path), default=None,
              help="Directory Ray ships to every worker (the agent's files, for nodes without this file system).")
@click.option("--otel", is_flag=True, help="Export OpenTelemetry spans of every run (see thinkflow run --otel).")
@click.option("--quiet", "-q", is_flag=True, help="No progress bar; only the summary line.")
def batch(agent_file: Path, inputs_file: Path, output: Path, task_template: str | None, concurrency: int | None,
          rerun_failed: bool, max_cost: float | None, max_tokens: int | None, model: str | None,
          max_steps: int | None, trace_dir: Path | None, variables: tuple[str, ...], use_ray: bool,
          ray_address: str | None, ray_retries: int, ray_num_cpus: float, ray_resources: str | None,
          ray_working_dir: Path | None, otel: bool, quiet: bool) -> None:
    """Run the agent in AGENT.yaml once per input of INPUTS (JSONL or CSV), appending each result to --output.

    \b
    JSONL: one object per line, {"id": "t1", "task": "...", "vars": {...}, "session": "..."}.
    CSV:   a header row; the task is the "task" column or --task-template over the row's columns.
    """
    from rich.console import Console

    from thinkflow.batch.input_checks import input_issues
    from thinkflow.batch.inputs import read_inputs
    from thinkflow.batch.results import ResultLog
    from thinkflow.batch.runner import LocalPool, default_concurrency
    from thinkflow.batch.worker import RunSettings
    from thinkflow.config.loader import load_agent
    from thinkflow.errors import BatchError, ModelError, PromptError, SpecError
    from thinkflow.prompting.templates import check_prompt_vars

    err = Console(stderr=True)
    if model is not None and not model.strip():
        raise click.BadParameter("is empty: give a LiteLLM model string", param_hint="--model")
    extra_vars = _parse_vars(variables)
    resources = _resources(ray_resources)
    if not use_ray and (ray_address or ray_resources or ray_working_dir):
        raise click.UsageError("--ray-address, --ray-resources and --ray-working-dir need --ray")
    from thinkflow.paths import same_file

    for read, what in ((agent_file, "the agent file"), (inputs_file, "the inputs file")):
        if same_file(output, read):
            raise click.UsageError(f"--output {output} is {what}; give another results file")
    _hold_results_lock(err, output)
    try:
        spec = load_agent(agent_file)
        check_prompt_vars(spec.prompt, extra_vars, task_from="each input's 'task'")
        # what each run would refuse (vars, session names) is reported with the file's own problems, all at once
        inputs = read_inputs(inputs_file, task_template=task_template,
                             check=lambda items: input_issues(inputs_file, items, spec.prompt))
        log = ResultLog(output)
    except SpecError as error:
        _fail(err, EXIT_CONFIG, f"{agent_file}: {len(error.issues)} issue(s)", [str(i) for i in error.issues])
    except BatchError as error:
        _fail(err, EXIT_CONFIG, str(error).splitlines()[0], [str(i) for i in error.issues])
    except PromptError as error:
        _fail(err, EXIT_CONFIG, str(error))
    from rich.markup import escape

    for note in log.notes:  # what opening the results file repaired (a line a killed batch cut short)
        err.print(f"[yellow]note: {escape(note)}[/]", highlight=False, soft_wrap=True)
    if extra_vars:
        from dataclasses import replace

        inputs = [replace(i, vars={**extra_vars, **i.vars}) for i in inputs]
    import os

    from thinkflow.run.telemetry import settings_from

    settings = RunSettings(spec=spec, model=model, trace_dir=trace_dir, max_steps=max_steps,
                           telemetry=settings_from(os.environ, spec.telemetry, flag=otel))
    _check_builds(err, settings)
    try:
        if use_ray:
            from thinkflow.batch.ray_pool import RayPool

            pool: Any = RayPool(settings, address=ray_address, retries=ray_retries, num_cpus=ray_num_cpus,
                                resources=resources, working_dir=ray_working_dir)
            width = concurrency or pool.capacity
        else:
            from thinkflow.batch.runner import any_pending
            from thinkflow.model.preload import preload_litellm

            if any_pending(inputs, log, rerun_failed=rerun_failed):
                # every run in this process calls LiteLLM: import it once, with the collector paused, then
                # gc.freeze() (thinkflow/model/preload.py), before the runs' threads start (not when every input
                # is done already: seconds and ~180 MB for nothing)
                preload_litellm(freeze=True, background=False)
            width = concurrency or default_concurrency(model or spec.model.name)
            pool = LocalPool(settings, width)
    except BatchError as error:
        _fail(err, EXIT_CONFIG, str(error))
    except ModelError as error:
        _fail(err, EXIT_MODEL, str(error))
    summary = _run_with_progress(err, pool, inputs, log, width, quiet=quiet, max_tokens=max_tokens,
                                 max_cost=max_cost, rerun_failed=rerun_failed)
    _print_summary(err, summary, output)
    raise SystemExit(EXIT_OK if summary.all_completed and not summary.stopped else EXIT_INCOMPLETE)


def _hold_results_lock(err: Any, output: Path) -> None:
    """Hold ``<output>.lock`` (:mod:`filelock`) until the command ends: a second batch writing the same results
    file ran every input again beside the first and wrote each result twice. Exits with EXIT_CONFIG when another
    process holds it."""
    from filelock import FileLock, Timeout

    lock = FileLock(f"{output}.lock")
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
        lock.acquire(timeout=0)
    except Timeout:
        _fail(err, EXIT_CONFIG, f"another thinkflow batch is writing {output} (it holds {output}.lock): wait for it "
                                "to finish, or give another results file with -o")
    except OSError as error:
        _fail(err, EXIT_CONFIG, f"{output}: cannot lock the results file: {error}")
    click.get_current_context().call_on_close(lock.release)


def _check_builds(err: Any, settings: Any) -> None:
    """Build the agent once before the batch: a tool, prompt or model set-up error stops it with one message
    instead of one error line per input."""
    from thinkflow.agent import build
    from thinkflow.errors import MemoryStoreError, ModelError, PromptError, ToolError

    try:
        build(settings.spec, model=settings.model)
    except (ToolError, PromptError, MemoryStoreError) as error:
        _fail(err, EXIT_CONFIG, str(error))
    except ModelError as error:
        _fail(err, EXIT_MODEL, str(error))


def _run_with_progress(err: Any, pool: Any, inputs: Any, log: Any, width: int, *, quiet: bool, **options: Any):
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    from thinkflow.batch.runner import run_batch

    columns = [TextColumn("[bold]batch[/]"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[counts]}"),
               TimeElapsedColumn(), TextColumn("eta"), TimeRemainingColumn()]
    with Progress(*columns, console=err, disable=quiet, transient=False) as progress:
        done_before = sum(1 for i in inputs if i.id in log.records and log.records[i.id].get("status") == "completed")
        task = progress.add_task("batch", total=len(inputs), completed=done_before, counts="")

        warned = []

        def on_result(record: dict[str, Any], summary: Any) -> None:
            if options.get("max_cost") and record.get("steps") and record.get("cost_usd") is None and not warned:
                warned.append(True)
                progress.console.print("[yellow]warning: the model's price is unknown, so --max-cost cannot be "
                                       "enforced (use --max-tokens)[/]", soft_wrap=True)
            counts = " ".join(f"{status} {n}" for status, n in sorted(summary.counts.items()))
            progress.update(task, advance=1, counts=counts)

        def on_interrupt(in_flight: int) -> None:
            runs = "the run" if in_flight == 1 else f"the {in_flight} runs"
            progress.console.print(f"[yellow]interrupted: waiting for {runs} in progress to finish; Ctrl-C again to "
                                   "stop now[/]", highlight=False, soft_wrap=True)

        try:
            return run_batch(pool, inputs, log, concurrency=width, on_result=on_result, on_interrupt=on_interrupt,
                             **options)
        except KeyboardInterrupt:
            from thinkflow.cli.process_exit import exit_now

            progress.stop()
            err.print("[yellow]interrupted again: leaving now; finished results are in the results file[/]")
            exit_now(EXIT_INTERRUPTED)  # runs still in flight hold worker threads a normal exit would wait for


def _print_summary(err: Any, summary: Any, output: Path) -> None:
    from rich.markup import escape

    counts = ", ".join(f"{n} {status}" for status, n in sorted(summary.counts.items())) or "no new runs"
    cost = f" · ${summary.usage.cost_usd:.4f}" if summary.usage.cost_usd else ""
    err.print(f"{summary.total} inputs · {summary.skipped} already done · {counts} · "
              f"{summary.usage.total_tokens:,} tokens{cost} · {summary.duration_s:.1f} s", highlight=False, soft_wrap=True)
    if summary.stopped:
        err.print(f"[yellow]stopped: {escape(summary.stopped)}; {summary.not_started} inputs not started "
                  "(rerun the same command to go on)[/]", soft_wrap=True)
    unfinished = sorted(i for i, s in summary.final.items() if s != "completed")
    if unfinished:
        shown = ", ".join(unfinished[:10]) + (" ..." if len(unfinished) > 10 else "")
        err.print(f"[red]did not complete: {escape(shown)}[/] (--rerun-failed runs them again)", soft_wrap=True)
    err.print(f"[dim]results: {escape(str(output))}[/]", soft_wrap=True)


def _fail(err: Any, code: int, message: str, lines: list[str] | None = None) -> None:
    from rich.markup import escape

    err.print(f"[red]{escape(message)}[/]", soft_wrap=True)
    for line in lines or []:
        err.print(escape(line), highlight=False, soft_wrap=True)
    raise SystemExit(code)


COMMANDS = [batch]
