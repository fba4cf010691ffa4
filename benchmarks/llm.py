"""Benchmark of the LLM layer: the embedded model, the completion cache, concurrency.

Measures, in one run:

* (a) the embedded model (SmolLM2-135M-Instruct Q4_1 via llama-cpp-python): load
  time, decode speed (tokens/s), prompt-processing speed, and the time per
  Privacy Checklist DP call (Table 7 prompt, grammar-constrained ``Choice:`` line)
  on real GoldCoin cases (skipped with a note when llama_cpp or the model is
  missing). The answer distribution is printed to show how little a 135M model
  discriminates; it is not an accuracy figure;
* (b) `LLMClient` cache-hit latency with a `ResponseCache` in a temp dir, against
  the miss latency of the same calls;
* (c) concurrency scaling: wall time of N calls through `OpenAICompatibleBackend`
  at concurrency 1, 4 and 16 against a local OpenAI-compatible server (Starlette +
  uvicorn, in a thread of this process, 127.0.0.1) that answers after a fixed
  delay, as a ratio to the ideal ``calls x delay / concurrency``.

Every figure names its backend. Run: ``.venv/bin/python benchmarks/llm.py``
(``--quick`` for a smoke run). The last line of the output is one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import socket
import statistics
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from privacy_ci.errors import PrivacyCIError
from privacy_ci.llm import GenerationSettings, LLMClient, LLMConfig, ResponseCache, user

REPO = Path(__file__).resolve().parents[1]

# Table 7 of the Privacy Checklist paper, "DP" (direct prompt), verbatim; <event> -> {event}.
DP_TEMPLATE = (
    "Determine the relationship between the provided event and HIPAA regulations. "
    "You have three options for your conclusion:\n\n"
    "(A) The event is prohibited by HIPAA.\n\n"
    "(B) The event is permitted by HIPAA.\n\n"
    "(C) The event is not related to HIPAA.\n\n"
    "Event: {event} Output Format: Choice: [A. Prohibited | B. Permitted | C. Not related ]"
)
DP_OPTIONS = ("A. Prohibited", "B. Permitted", "C. Not related")
VERDICT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "verdict": {"type": "string", "enum": ["permitted", "prohibited", "not_related"]}
    },
    "required": ["verdict"],
}


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _pct(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def data_dir() -> Path:
    return Path(os.environ.get("PRIVACY_CI_DATA", REPO.parent / "shared" / "data"))


# -- (a) embedded model ----------------------------------------------------------------
def bench_embedded(quick: bool) -> dict[str, Any]:
    """Load time, decode and prompt speed, and time per DP call of the embedded model."""
    from privacy_ci.llm._embedded import (
        EmbeddedBackend,
        choice_grammar,
        llama_cpp_available,
    )

    if not llama_cpp_available():
        return {
            "backend": "embedded",
            "skipped": "llama_cpp not installed (pip install llama-cpp-python)",
        }
    try:
        backend = EmbeddedBackend()
    except PrivacyCIError as exc:
        return {"backend": "embedded", "skipped": str(exc)}
    load_s = backend.load()
    llama: Any = backend._loaded().llama
    name = (
        f"embedded:{backend.model} (llama-cpp-python {_version('llama-cpp-python')}, "
        f"n_threads={llama.n_threads}, n_threads_batch={llama.n_threads_batch})"
    )
    out: dict[str, Any] = {"backend": name, "load_s": round(load_s, 3)}

    # decode speed: the same prompt at max_tokens=1 and =N; the difference is decoding
    essay = [user("Write a long, detailed essay about patient privacy in hospitals.")]
    n_gen = 64 if quick else 192
    backend.complete_sync(essay, GenerationSettings(max_tokens=8))  # warm-up
    one = min(
        backend.complete_sync(essay, GenerationSettings(max_tokens=1)).latency_s for _ in range(3)
    )
    gen_rates = []
    for _ in range(1 if quick else 3):
        full = backend.complete_sync(essay, GenerationSettings(max_tokens=n_gen))
        gen_rates.append((full.completion_tokens - 1) / max(full.latency_s - one, 1e-9))
        out["decode_end_to_end_tokens_per_s"] = round(full.completion_tokens / full.latency_s, 1)
    out["decode_tokens_per_s"] = round(statistics.median(gen_rates), 1)
    out["decode_tokens"] = n_gen

    # one-enum JSON-schema verdict on a short prompt
    verdict_prompt = [
        user(
            "A hospital emails a patient's lab results to the patient's employer without "
            "consent. Under HIPAA, is this permitted, prohibited, or not related? Answer in JSON."
        )
    ]
    schema_times = []
    for _ in range(2 if quick else 5):
        c = backend.complete_sync(
            verdict_prompt, GenerationSettings(max_tokens=32, json_schema=VERDICT_SCHEMA)
        )
        schema_times.append(c.latency_s)
    out["schema_verdict_s_median"] = round(statistics.median(schema_times), 4)
    out["schema_verdict_prompt_tokens"] = c.prompt_tokens
    out["schema_verdict_answer"] = c.parsed

    # DP calls on real cases
    cases_file = data_dir() / "cases" / "goldcoin" / "real.json"
    if not cases_file.exists():
        out["dp"] = {"skipped": f"{cases_file} not found (set PRIVACY_CI_DATA)"}
        return out
    cases = json.loads(cases_file.read_text("utf-8"))[: 3 if quick else 10]
    grammar = choice_grammar(DP_OPTIONS, prefix="Choice: ")
    settings = GenerationSettings(temperature=0.0, seed=0, max_tokens=16)
    times, prompt_tokens, choices = [], [], []
    for case in cases:
        messages = [user(DP_TEMPLATE.format(event=case["context"]))]
        c = backend.complete_sync(messages, settings, grammar=grammar)
        times.append(c.latency_s)
        prompt_tokens.append(c.prompt_tokens)
        choices.append(c.text.removeprefix("Choice: ")[:1])
    first = [user(DP_TEMPLATE.format(event=cases[0]["context"]))]
    prefill = backend.complete_sync(first, GenerationSettings(max_tokens=1))
    out["dp"] = {
        "backend": name,
        "cases": len(cases),
        "s_per_call_median": round(statistics.median(times), 4),
        "s_per_call_mean": round(statistics.fmean(times), 4),
        "s_per_call_max": round(max(times), 4),
        "prompt_tokens_mean": round(statistics.fmean(prompt_tokens), 1),
        "prompt_tokens_per_s": round(prefill.prompt_tokens / prefill.latency_s, 1),
        "choices": dict(sorted(Counter(choices).items())),
        "labels": dict(sorted(Counter(str(k.get("norm_type")) for k in cases).items())),
    }
    return out


# -- fixed-delay OpenAI-compatible server ------------------------------------------------
def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def delay_server(delay: float) -> Iterator[tuple[str, dict[str, int]]]:
    """A Starlette app (FastAPI's core) answering every chat completion after `delay` s.

    Yields the ``/v1`` URL and a dict with the peak number of requests in flight.
    """
    import uvicorn
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    stats = {"in_flight": 0, "max_in_flight": 0, "requests": 0}

    async def models(request: Request) -> JSONResponse:
        return JSONResponse({"object": "list", "data": [{"id": "fixed-delay", "object": "model"}]})

    async def chat(request: Request) -> JSONResponse:
        body = await request.json()
        stats["requests"] += 1
        stats["in_flight"] += 1
        stats["max_in_flight"] = max(stats["max_in_flight"], stats["in_flight"])
        try:
            await asyncio.sleep(delay)
        finally:
            stats["in_flight"] -= 1
        prompt = body["messages"][-1]["content"]
        n_prompt = len(prompt.split())
        return JSONResponse(
            {
                "id": f"chatcmpl-{stats['requests']}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": body.get("model", "fixed-delay"),
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": f"echo: {prompt}"},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {
                    "prompt_tokens": n_prompt,
                    "completion_tokens": 2,
                    "total_tokens": n_prompt + 2,
                },
            }
        )

    app = Starlette(
        routes=[
            Route("/v1/models", models, methods=["GET"]),
            Route("/v1/chat/completions", chat, methods=["POST"]),
        ]
    )
    port = _free_port()
    config = uvicorn.Config(
        app, host="127.0.0.1", port=port, log_level="warning", access_log=False, backlog=512
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the fixed-delay server did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}/v1", stats
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def _openai_backend(base_url: str) -> Any:
    from privacy_ci.llm._openai import OpenAICompatibleBackend

    return OpenAICompatibleBackend.from_config(
        LLMConfig(provider="openai-compatible", base_url=base_url, model="fixed-delay")
    )


# -- (b) cache ---------------------------------------------------------------------------
def bench_cache(base_url: str, delay: float, quick: bool) -> dict[str, Any]:
    """Miss vs hit latency of `LLMClient.complete` with a SQLite `ResponseCache`."""
    n = 30 if quick else 200
    backend = _openai_backend(base_url)
    with tempfile.TemporaryDirectory() as tmp:
        cache = ResponseCache(Path(tmp) / "cache.sqlite")
        client = LLMClient(backend, cache=cache, concurrency=1)
        prompts = [[user(f"cache probe {i}")] for i in range(n)]

        async def run() -> tuple[list[float], list[float]]:
            misses, hits = [], []
            for p in prompts:
                t = time.perf_counter()
                c = await client.complete(p)
                misses.append(time.perf_counter() - t)
                assert c.ok and not c.cached, c.error
            for p in prompts:
                t = time.perf_counter()
                c = await client.complete(p)
                hits.append(time.perf_counter() - t)
                assert c.cached
            await client.aclose()
            return misses, hits

        misses, hits = asyncio.run(run())
        cache.close()
    return {
        "backend": f"LLMClient+ResponseCache(sqlite) over openai-compatible fixed-delay "
        f"server ({delay * 1000:g} ms)",
        "calls": n,
        "miss_ms_median": round(statistics.median(misses) * 1000, 3),
        "hit_us_median": round(statistics.median(hits) * 1e6, 1),
        "hit_us_p99": round(_pct(hits, 0.99) * 1e6, 1),
        "hit_speedup": round(statistics.median(misses) / statistics.median(hits), 1),
    }


# -- (c) concurrency ---------------------------------------------------------------------
def bench_concurrency(
    base_url: str, stats: dict[str, int], delay: float, calls: int, levels: Sequence[int]
) -> dict[str, Any]:
    """Wall time of `calls` completions at each concurrency vs calls x delay / c."""
    runs = []
    for level in levels:
        backend = _openai_backend(base_url)
        client = LLMClient(backend, cache=None, concurrency=level)
        batch = [[user(f"c{level} call {i}")] for i in range(calls)]

        async def run(client: LLMClient = client, batch: list[Any] = batch) -> float:
            await client.complete(batch[0])  # connection warm-up, not timed
            stats["max_in_flight"] = 0
            t = time.perf_counter()
            results = await client.complete_many(batch)
            wall = time.perf_counter() - t
            assert all(r.ok for r in results)
            await client.aclose()
            return wall

        wall = asyncio.run(run())
        ideal = calls * delay / level
        runs.append(
            {
                "concurrency": level,
                "wall_s": round(wall, 4),
                "ideal_s": round(ideal, 4),
                "ratio": round(wall / ideal, 3),
                "max_in_flight": stats["max_in_flight"],
            }
        )
    return {
        "backend": "openai-compatible (OpenAICompatibleBackend via LLMClient) -> local "
        "Starlette/uvicorn fixed-delay server",
        "delay_s": delay,
        "calls": calls,
        "runs": runs,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="a small smoke run (seconds)")
    parser.add_argument("--delay", type=float, default=None, help="server delay in seconds")
    parser.add_argument("--calls", type=int, default=None, help="calls per concurrency level")
    args = parser.parse_args(argv)
    quick: bool = args.quick
    delay = args.delay if args.delay is not None else (0.05 if quick else 0.2)
    calls = args.calls if args.calls is not None else (32 if quick else 64)

    figures: dict[str, Any] = {
        "benchmark": "llm",
        "quick": quick,
        "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
        "llama_cpp_python": _version("llama-cpp-python"),
        "openai": _version("openai"),
    }
    figures["embedded"] = bench_embedded(quick)
    emb = figures["embedded"]
    if "skipped" in emb:
        print(f"(a) {emb['backend']}: skipped: {emb['skipped']}", flush=True)
    else:
        print(
            f"(a) {emb['backend']}: load {emb['load_s']} s, decode {emb['decode_tokens_per_s']} "
            f"tok/s, one-enum schema verdict {emb['schema_verdict_s_median']} s",
            flush=True,
        )
        dp = emb["dp"]
        if "skipped" in dp:
            print(f"    DP: skipped: {dp['skipped']}", flush=True)
        else:
            print(
                f"    DP on {dp['cases']} real cases: {dp['s_per_call_median']} s/call median "
                f"({dp['prompt_tokens_mean']} prompt tokens, prefill "
                f"{dp['prompt_tokens_per_s']} tok/s); choices {dp['choices']} "
                f"(labels {dp['labels']}; not an accuracy figure)",
                flush=True,
            )

    with delay_server(delay) as (url, stats):
        figures["cache"] = bench_cache(url, delay, quick)
        cache = figures["cache"]
        print(
            f"(b) {cache['backend']}: miss {cache['miss_ms_median']} ms, hit "
            f"{cache['hit_us_median']} us median (p99 {cache['hit_us_p99']} us)",
            flush=True,
        )
        figures["concurrency"] = bench_concurrency(url, stats, delay, calls, (1, 4, 16))
        conc = figures["concurrency"]
        for r in conc["runs"]:
            print(
                f"(c) {conc['backend']}: {calls} calls x {delay} s at concurrency "
                f"{r['concurrency']}: {r['wall_s']} s vs ideal {r['ideal_s']} s -> ratio "
                f"{r['ratio']} (peak in flight {r['max_in_flight']})",
                flush=True,
            )
    print(json.dumps(figures, sort_keys=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
