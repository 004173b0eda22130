"""Model benchmarks (issue 3): the embedded model's speed, and the model client's own overhead.

1. Client overhead: the same chat completion against the scripted OpenAI-compatible server
   (``tests/scripted_servers.py``, 127.0.0.1, in this process) made with a bare ``litellm.completion`` and with
   ``thinkflow.model.client.LiteLLMClient.complete`` (request building, retry wrapper, reply normalisation, usage and
   cost), interleaved call by call in the same run. Reported: median wall time per call of each, and the ratio
   client / bare (1.00 = no overhead).
2. Embedded model (``local/qwen2.5-coder-1.5b`` in process with xllamacpp): GGUF check time (assembly on the very
   first run), load time (server start until ``/health`` is ok), and llama.cpp's own timings for a ~1000-token
   prompt (a 40-row CSV) and 64 generated tokens: prompt tokens/s and generation tokens/s; plus the wall time of
   one agent-like step (JSON-schema constrained answer through the client).

Usage::

    .venv-test/bin/python bench/bench_model.py            # full: 200 overhead calls + the embedded model
    .venv-test/bin/python bench/bench_model.py --tiny     # smoke: 20 overhead calls, no real model
    .venv-test/bin/python bench/bench_model.py --tiny --with-model   # smoke size, but run the real model too

Prints a plain-text report on stdout (bench/run.py embeds it in RESULTS.md); ``--json PATH`` also writes the raw
figures. Offline: the scripted server and the in-process llama.cpp server listen on 127.0.0.1 only.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
os.environ.setdefault("HF_HUB_OFFLINE", "1")

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "runner"))

MESSAGES = [{"role": "system", "content": "You are a data analyst. Answer briefly."},
            {"role": "user", "content": "Which product has the highest total sales?"}]

CSV_PROMPT = "Here is a CSV file:\n" + "\n".join(
    ["date,product,region,units,price"] + [f"2024-01-{d % 28 + 1:02d},{['apple', 'pear', 'plum', 'fig'][d % 4]},"
                                            f"{['north', 'south'][d % 2]},{d % 9 + 1},{(d * 37) % 50 + 10}.00"
                                            for d in range(40)]
) + "\nWhich product appears most often? Answer in one sentence."


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def median_ms(values: list[float]) -> float:
    return statistics.median(values) * 1000 if values else 0.0


# --- 1. client overhead ------------------------------------------------------------------------------------------

def client_overhead(calls: int) -> dict[str, Any]:
    """Interleaved bare litellm.completion vs LiteLLMClient.complete against the scripted server."""
    import litellm
    from scripted_servers import OpenAIServer, text

    from thinkflow.model.messages import Message
    from thinkflow.model.client import LiteLLMClient
    from thinkflow.config.spec import ModelSpec

    litellm.suppress_debug_info = True
    msgs = [Message(m["role"], m["content"]) for m in MESSAGES]
    with OpenAIServer() as server:
        client = LiteLLMClient(ModelSpec(name="openai/test", api_base=server.url, api_key="x", timeout=30,
                                         num_retries=0))

        def bare() -> None:
            litellm.completion(model="openai/test", api_base=server.url, api_key="x", messages=MESSAGES,
                               timeout=30, num_retries=0, max_retries=0)

        def ours() -> None:
            client.complete(msgs)

        warm = 5
        server.push(*[text("Apples.", usage=(40, 3)) for _ in range(2 * (calls + warm))])
        for _ in range(warm):
            bare()
            ours()
        t_bare: list[float] = []
        t_ours: list[float] = []
        for i in range(calls):
            order = (bare, ours) if i % 2 == 0 else (ours, bare)
            for fn in order:
                t0 = time.perf_counter()
                fn()
                (t_bare if fn is bare else t_ours).append(time.perf_counter() - t0)
        assert server.remaining == 0
    b, o = median_ms(t_bare), median_ms(t_ours)
    return {"calls": calls, "bare_ms": b, "client_ms": o, "ratio": o / b if b else 0.0,
            "bare_min_ms": min(t_bare) * 1000, "client_min_ms": min(t_ours) * 1000}


# --- 2. embedded model -------------------------------------------------------------------------------------------

def embedded_model(gen_tokens: int) -> dict[str, Any]:
    """GGUF check, load time, llama.cpp prompt/generation speed, one constrained step through the client."""
    import httpx

    from thinkflow.model import local as local_model
    from thinkflow.model.messages import Message
    from thinkflow.model.client import LiteLLMClient
    from thinkflow.config.spec import ModelSpec

    out: dict[str, Any] = {"threads": os.cpu_count(), "n_ctx": local_model.DEFAULT_N_CTX}
    t0 = time.perf_counter()
    local_model.ensure_gguf(on_progress=log)
    out["gguf_check_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    server = local_model.get_server(local_model.LOCAL_PREFIX + local_model.EMBEDDED_NAME, on_progress=log)
    out["load_s"] = time.perf_counter() - t0
    base = server.base_url
    try:
        runs = []
        for i in range(2):  # the first run also warms caches; report the second, keep both
            body = {"messages": [{"role": "user", "content": CSV_PROMPT + ("" if i == 0 else " ")}],
                    "max_tokens": gen_tokens, "temperature": 0.0, "cache_prompt": False,
                    "ignore_eos": True}
            t0 = time.perf_counter()
            r = httpx.post(f"{base}/v1/chat/completions", json=body, timeout=900)
            r.raise_for_status()
            data = r.json()
            tm = data.get("timings", {})
            runs.append({"wall_s": time.perf_counter() - t0, "prompt_n": tm.get("prompt_n"),
                         "prompt_tps": tm.get("prompt_per_second"), "gen_n": tm.get("predicted_n"),
                         "gen_tps": tm.get("predicted_per_second")})
            log(f"run {i + 1}: prompt {tm.get('prompt_n')} tok at {tm.get('prompt_per_second', 0):.1f} tok/s, "
                f"generation {tm.get('predicted_n')} tok at {tm.get('predicted_per_second', 0):.2f} tok/s")
        out["runs"] = runs
        out["prompt_tps"] = runs[-1]["prompt_tps"]
        out["gen_tps"] = runs[-1]["gen_tps"]
        out["prompt_n"] = runs[-1]["prompt_n"]
        out["gen_n"] = runs[-1]["gen_n"]
        # one agent-like step through the client (reuses the running server): JSON-schema constrained action
        client = LiteLLMClient(ModelSpec(name="local/qwen2.5-coder-1.5b", timeout=900, num_retries=0,
                                         temperature=0.0, max_tokens=96))
        schema = {"type": "object", "properties": {"thought": {"type": "string"}, "tool": {"type": "string"},
                                                    "arguments": {"type": "object"}},
                  "required": ["thought", "tool", "arguments"]}
        t0 = time.perf_counter()
        reply = client.complete([Message("system", "You call tools by answering with JSON: thought, tool, "
                                                   "arguments. Tools: read_csv(path), final_answer(text)."),
                                 Message("user", "Which product has the highest total sales in sales.csv?")],
                                response_format=schema)
        out["step_s"] = time.perf_counter() - t0
        try:
            action = json.loads(reply.text)
            out["step_valid_json"] = isinstance(action, dict) and {"thought", "tool", "arguments"} <= set(action)
            out["step_tool"] = action.get("tool") if isinstance(action, dict) else None
        except ValueError:
            out["step_valid_json"] = False
            out["step_tool"] = None
        out["step_tokens"] = (reply.usage.prompt_tokens, reply.usage.completion_tokens)
    finally:
        local_model.stop_all()
    return out


# --- report ------------------------------------------------------------------------------------------------------

def report(res: dict[str, Any]) -> str:
    lines = [f"Machine: {os.cpu_count()} logical cores; load average at start {res['load'][0]:.2f}"
             + (" (other work was running: absolute times are inflated)" if res["load"][0] > 1.0 else ""), ""]
    ov = res["overhead"]
    lines += ["Client overhead vs bare litellm.completion (scripted OpenAI server on 127.0.0.1, same run, "
              f"{ov['calls']} interleaved calls each):",
              f"  bare litellm.completion     median {ov['bare_ms']:7.2f} ms/call (min {ov['bare_min_ms']:.2f})",
              f"  LiteLLMClient.complete      median {ov['client_ms']:7.2f} ms/call (min {ov['client_min_ms']:.2f})",
              f"  ratio client / bare         {ov['ratio']:.2f}x", ""]
    em = res.get("embedded")
    if em is None:
        lines += ["Embedded model: skipped (--tiny without --with-model)."]
    elif "error" in em:
        lines += [f"Embedded model: FAILED: {em['error']}"]
    else:
        lines += [f"Embedded model local/qwen2.5-coder-1.5b (Q4_K_M, xllamacpp, {em['threads']} threads, "
                  f"context {em['n_ctx']}):",
                  f"  GGUF check (cached, sidecar) {em['gguf_check_s']:.2f} s",
                  f"  load time                    {em['load_s']:.1f} s",
                  f"  prompt speed                 {em['prompt_tps']:.1f} tokens/s ({em['prompt_n']} prompt tokens)",
                  f"  generation speed             {em['gen_tps']:.2f} tokens/s ({em['gen_n']} tokens)",
                  f"  one JSON-schema step         {em['step_s']:.1f} s (prompt/completion tokens "
                  f"{em['step_tokens'][0]}/{em['step_tokens'][1]}; valid action JSON: "
                  f"{'yes' if em['step_valid_json'] else 'no'}, tool {em['step_tool']!r})"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tiny", action="store_true", help="smoke size: 20 overhead calls, skip the real model")
    ap.add_argument("--with-model", action="store_true", help="run the embedded model even with --tiny")
    ap.add_argument("--no-model", action="store_true", help="skip the embedded model")
    ap.add_argument("--calls", type=int, default=None, help="overhead calls per side (default 200, tiny 20)")
    ap.add_argument("--gen-tokens", type=int, default=None, help="tokens generated per speed run (default 64)")
    ap.add_argument("--json", type=Path, default=None, help="also write the raw figures as JSON here")
    args = ap.parse_args(argv)
    calls = args.calls or (20 if args.tiny else 200)
    res: dict[str, Any] = {"load": os.getloadavg(), "tiny": args.tiny}
    log(f"client overhead: {calls} calls each ...")
    res["overhead"] = client_overhead(calls)
    run_model = not args.no_model and (args.with_model or not args.tiny)
    if run_model:
        log("embedded model ...")
        try:
            res["embedded"] = embedded_model(args.gen_tokens or (16 if args.tiny else 64))
        except Exception as exc:  # report, don't hide the overhead figures
            res["embedded"] = {"error": f"{type(exc).__name__}: {exc}"}
    text = report(res)
    print(text)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(res, indent=2, default=str))
    failed = run_model and "error" in res.get("embedded", {})
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
