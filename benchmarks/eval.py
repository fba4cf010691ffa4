"""Benchmark of `privacy-ci eval`'s runner: concurrency against the ideal, then the cache.

Against a local OpenAI-compatible test server (``tests/llm/fake_openai_server.py``
served by uvicorn in a child process on 127.0.0.1, so that it does not share this
process's interpreter lock with the client) that answers every request after a
fixed delay:

1. a full run of the 214 real cases at concurrency 16, timed, compared with the
   ideal ``calls x delay / concurrency`` (target: within 1.2x);
2. the same number of bare calls straight through `LLMClient` (no runner, no
   method), for the floor that the client and server set on this machine;
3. a second run of the same cases into a new folder with the same completion
   cache: it must make no server call at all (asserted on the server's request
   count) and produce the same metrics.

The method is the real ``bm25-content`` (explain + law filter x k + decide per
case) when it can be built and judges a probe case without error, else ``dp``
(one call per case); the JSON names the method, why, and the backend. The
answers are the test server's (deterministic, prompt-hashed): the accuracy is
not a model's and is not reported.

Run: ``.venv/bin/python benchmarks/eval.py`` (``--quick``: 0.1 s delay instead of
0.2 s). The last line of the output is one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import platform
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from privacy_ci.cases import load_dataset  # noqa: E402
from privacy_ci.evaluation import run_eval  # noqa: E402
from privacy_ci.judging import build_method, event_from_case  # noqa: E402
from privacy_ci.llm import LLMClient, LLMConfig, make_client  # noqa: E402

TARGET_RATIO = 1.2


def answer(prompt: str) -> str:
    """Deterministic answers to the judging prompts (by their opening words)."""
    if prompt.startswith("Given a regulation"):
        return "Yes. The regulation is relevant to the event."
    if prompt.startswith("I will provide you with an event"):
        return "A covered entity discloses protected health information to a health plan."
    if prompt.startswith("Read the event described below"):
        return "1. 164.502\n2. 164.506"
    h = int(hashlib.sha256(prompt.encode()).hexdigest(), 16) % 3
    return ["Choice: A. Prohibited", "Choice: B. Permitted", "Choice: C. Not related"][h]


# -- the server, in a child process -----------------------------------------------------
def serve(delay: float) -> None:
    """Child process: the fake server with a ``/stats`` endpoint; prints its port first.

    The fixed delay is one ``asyncio.sleep`` per chat request in an ASGI wrapper
    (the fake server's own delay polls for a disconnect every 50 ms, which adds
    scheduler overshoot on a loaded machine).
    """
    import uvicorn
    from tests.llm.fake_openai_server import FakeLLMServer

    fake = FakeLLMServer(answer=answer)
    peak = {"now": 0, "max": 0}

    @fake.app.app.get("/stats")
    async def stats() -> dict[str, int]:
        return {"requests": len(fake.requests), "max_in_flight": peak["max"]}

    async def app(scope: Any, receive: Any, send: Any) -> None:
        chat = scope.get("type") == "http" and scope.get("path") == "/v1/chat/completions"
        if not chat:
            await fake.app(scope, receive, send)
            return
        peak["now"] += 1
        peak["max"] = max(peak["max"], peak["now"])
        try:
            await asyncio.sleep(delay)
            await fake.app(scope, receive, send)
        finally:
            peak["now"] -= 1

    # proto IPPROTO_TCP, so that asyncio sets TCP_NODELAY on accepted connections
    # (with proto 0 each response waits ~40 ms for a delayed ACK: Nagle)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    print(sock.getsockname()[1], flush=True)
    config = uvicorn.Config(app, http="h11", loop="asyncio", lifespan="off", log_level="warning")
    uvicorn.Server(config).run(sockets=[sock])


@contextmanager
def server_process(delay: float) -> Iterator[str]:
    """Start `serve` in a child process; yields its root URL."""
    import httpx

    proc = subprocess.Popen(
        [sys.executable, __file__, "--serve", "--delay", str(delay)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        root = f"http://127.0.0.1:{int(proc.stdout.readline())}"
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(root + "/stats", timeout=1).raise_for_status()
                break
            except httpx.HTTPError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        yield root
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def server_stats(root: str) -> dict[str, int]:
    """The server's request count and peak concurrency."""
    import httpx

    data: dict[str, int] = httpx.get(root + "/stats", timeout=5).json()
    return data


# -- the runs ---------------------------------------------------------------------------
def client_for(url: str, concurrency: int, cache: Path | None) -> LLMClient:
    config = LLMConfig(
        provider="openai-compatible",
        model="bench-model",
        base_url=url,
        concurrency=concurrency,
        retries=0,
        cache=cache is not None,
        cache_path=None if cache is None else str(cache),
    )
    return make_client(config)


async def pick_method(url: str, case: Any, wanted: str) -> tuple[str, str]:
    """The method to time: `wanted` if it builds and judges a probe case, else dp."""
    if wanted == "dp":
        return "dp", "asked for"
    probe = client_for(url, 4, None)
    try:
        judgment = await build_method(wanted, probe).judge(event_from_case(case))
    except Exception as exc:  # the method is not usable in this checkout
        return "dp", f"{wanted} unavailable ({type(exc).__name__}: {exc})"
    finally:
        await probe.aclose()
    if judgment.error:
        return "dp", f"{wanted} failed on a probe case ({judgment.error})"
    return wanted, "real method"


async def timed_run(
    method_name: str, url: str, data: Any, out: Path, concurrency: int, cache: Path
) -> tuple[float, dict[str, Any], dict[str, Any]]:
    """One `run_eval` of every case; returns (wall seconds, metrics, client usage)."""
    client = client_for(url, concurrency, cache)
    kb = None
    if method_name != "dp":
        from privacy_ci.knowledge import load_knowledge_base

        kb = load_knowledge_base("hipaa")
    method = build_method(method_name, client, kb)
    start, cpu = time.perf_counter(), time.process_time()
    try:
        result = await run_eval(
            method, data, out, concurrency=concurrency, progress=False, client=client
        )
    finally:
        await client.aclose()
    usage = client.usage.as_dict()
    usage["client_cpu_s"] = round(time.process_time() - cpu, 3)
    return time.perf_counter() - start, result.metrics, usage


async def raw_client(url: str, calls: int, concurrency: int) -> float:
    """Wall time of `calls` bare completions through `LLMClient` (no runner, no method)."""
    from privacy_ci.llm import user

    client = client_for(url, concurrency, None)
    start = time.perf_counter()
    try:
        await asyncio.gather(*(client.complete([user(f"raw call {i}")]) for i in range(calls)))
    finally:
        await client.aclose()
    return time.perf_counter() - start


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="0.1 s server delay (faster)")
    parser.add_argument("--delay", type=float, default=None, help="server delay in seconds")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--method", default="bm25-content", help="bm25-content (default) or dp")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    delay: float = args.delay if args.delay is not None else (0.1 if args.quick else 0.2)
    if args.serve:
        serve(delay)
        return 0
    concurrency: int = args.concurrency
    os.environ.setdefault("PRIVACY_CI_DATA", str(REPO.parent / "shared" / "data"))
    data = load_dataset("real")

    with server_process(delay) as root, tempfile.TemporaryDirectory() as tmp:
        url = root + "/v1"
        method_name, why = asyncio.run(pick_method(url, data[0], args.method))
        print(f"method {method_name} ({why}); server delay {delay} s", flush=True)
        cache = Path(tmp) / "cache.sqlite"

        before = server_stats(root)["requests"]
        wall, metrics, usage = asyncio.run(
            timed_run(method_name, url, data, Path(tmp) / "run1", concurrency, cache)
        )
        stats = server_stats(root)
        calls = stats["requests"] - before
        ideal = calls * delay / concurrency
        ratio = wall / ideal if ideal else float("inf")
        print(
            f"run 1: {len(data)} cases, {calls} calls ({calls / len(data):.2f}/case) in "
            f"{wall:.2f} s; ideal {ideal:.2f} s; ratio {ratio:.3f} (target <= {TARGET_RATIO}); "
            f"peak in flight {stats['max_in_flight']}; client CPU {usage['client_cpu_s']} s",
            flush=True,
        )

        raw = asyncio.run(raw_client(url, calls, concurrency))
        print(
            f"the same {calls} calls straight through LLMClient (no runner): {raw:.2f} s "
            f"(ratio {raw / ideal:.3f}); runner / raw client {wall / raw:.3f}",
            flush=True,
        )

        before = server_stats(root)["requests"]
        wall2, metrics2, usage2 = asyncio.run(
            timed_run(method_name, url, data, Path(tmp) / "run2", concurrency, cache)
        )
        calls2 = server_stats(root)["requests"] - before
        same = metrics2["scores"] == metrics["scores"]
        print(
            f"run 2 (cached): {calls2} server calls, {usage2['cache_hits']} cache hits, "
            f"{wall2:.2f} s; same metrics: {same}",
            flush=True,
        )
        assert calls2 == 0, f"the cached run made {calls2} server call(s)"
        assert same, "the cached run scored differently"

    figures = {
        "benchmark": "eval",
        "quick": bool(args.quick),
        "method": method_name,
        "method_note": why,
        "backend": (
            "openai-compatible:bench-model on the fake OpenAI-compatible test server "
            f"(tests/llm/fake_openai_server.py in a child process, 127.0.0.1, fixed delay "
            f"{delay} s)"
        ),
        "dataset": "real",
        "cases": len(data),
        "concurrency": concurrency,
        "delay_s": delay,
        "calls": calls,
        "calls_per_case": round(calls / len(data), 3),
        "wall_s": round(wall, 3),
        "ideal_s": round(ideal, 3),
        "ratio_to_ideal": round(ratio, 3),
        "target_ratio": TARGET_RATIO,
        "within_target": ratio <= TARGET_RATIO,
        "peak_in_flight": stats["max_in_flight"],
        "raw_client_wall_s": round(raw, 3),
        "raw_client_ratio_to_ideal": round(raw / ideal, 3),
        "runner_over_raw_client": round(wall / raw, 3),
        "client_cpu_s": usage["client_cpu_s"],
        "client_usage": {k: usage[k] for k in ("calls", "cache_hits", "failures", "retries")},
        "cached_run": {
            "server_calls": calls2,
            "cache_hits": usage2["cache_hits"],
            "wall_s": round(wall2, 3),
            "same_metrics": same,
        },
        "load_average_1m": round(os.getloadavg()[0], 2),
        "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
    }
    print(json.dumps(figures), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
