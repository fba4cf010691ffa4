"""Load benchmark of the Privacy Conductor HTTP service on 127.0.0.1.

Starts the real service (``python -m privacy_ci.service``, uvicorn, one process)
over a temporary SQLite store loaded with the Riverside corpus (or ``--db URL``,
e.g. a PostgreSQL test database, which it then writes to), and sends a bounded,
open-loop load from this process (a lean keep-alive HTTP/1.1 client over asyncio
streams by default, ``--client httpx`` for ``httpx.AsyncClient``):

* ``POST /v1/decide`` at a fixed rate (default 500 requests/s) for a fixed count,
  random (requester, document) pairs over the 24 Riverside agents;
* ``POST /v1/retrieve`` (k=5, generated queries) at a fixed rate (default 100/s);
* the mixed run: decide and retrieve at those rates again, at the same time,
  while ``POST /v1/judge`` is flooded (default 4 requests/s of ~3,000-character
  events from 8 agents, each event unique so the completion cache cannot answer
  it) with the configured model (the embedded one unless ``--judge-server`` runs
  a local OpenAI-compatible test server that answers after a fixed delay). The
  service runs 1 model job at a time with 4 waiting: the flood must be answered
  429/503 with ``Retry-After`` rather than queued without bound, and decide must
  keep its p99. The mixed run is repeated with the model's threads at normal CPU
  priority (``PRIVACY_CI_MODEL_NICE=0``), and the ratio of the two decide p99s is
  printed.

Each request is sent at its scheduled time, whatever happened to earlier ones.
Latency is measured from the send to the full response; ``send_lag_p99_ms``
says how late the client itself sent (a large lag means the load generator, not
the server, was the bottleneck). Reports throughput, p50/p99/max latency, and
the error count (non-2xx or transport errors; must be 0), then checks the audit
chain the run produced. Targets (printed, not asserted): decide p99 under 20 ms
at 500 requests/s, alone and while the judge endpoint is saturated.

Run: ``.venv/bin/python benchmarks/service.py`` (``--quick``: 2 s of decide,
1 s of retrieve). The last line of the output is one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

import httpx

from privacy_ci.conductor import load_corpus
from privacy_ci.llm._threads import NICE_ENV
from privacy_ci.service import generate_key, issue_token
from privacy_ci.store import DocumentStore, load_corpus_into

TARGET_DECIDE_P99_MS = 20.0
TARGET_DECIDE_RATE = 500
MODEL_SLOTS = 1
MODEL_QUEUE = 4
CLIENTS = {"raw": "keep-alive HTTP/1.1 over asyncio streams", "httpx": "httpx.AsyncClient"}
QUERY_WORDS = [
    "lipid",
    "panel",
    "blood",
    "count",
    "prescription",
    "insurance",
    "claim",
    "salary",
    "contract",
    "review",
    "schedule",
    "agenda",
    "discharge",
    "radiology",
    "knee",
    "diabetes",
    "billing",
    "statement",
    "referral",
    "patient",
    "clinic",
    "policy",
    "privacy",
    "results",
]


def _have(module: str) -> str | None:
    """The module's name when it is installed (uvicorn picks uvloop and httptools up)."""
    import importlib.util

    return module if importlib.util.find_spec(module) is not None else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def _server(
    db: str, key_file: Path, port: int, env: dict[str, str] | None = None
) -> Iterator[subprocess.Popen[bytes]]:
    cmd = [
        sys.executable,
        "-m",
        "privacy_ci.service",
        "--db",
        db,
        "--jwt-key-file",
        str(key_file),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--log-level",
        "warning",
        "--model-slots",
        str(MODEL_SLOTS),
        "--model-queue",
        str(MODEL_QUEUE),
    ]
    proc = subprocess.Popen(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env={**os.environ, **(env or {})}
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                err = proc.stderr.read().decode() if proc.stderr else ""
                raise RuntimeError(f"the service exited ({proc.returncode}): {err[-2000:]}")
            try:
                if httpx.get(f"http://127.0.0.1:{port}/v1/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
        else:
            raise RuntimeError("the service did not start within 60 s")
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextlib.contextmanager
def _judge_server(delay: float) -> Iterator[str]:
    """benchmarks/eval.py's OpenAI-compatible test server in a child process (its URL)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from benchmarks.eval import server_process

    with server_process(delay) as root:
        yield root + "/v1"


JUDGE_EVENT = (
    "Event {n}: A hospital's billing office sent a patient's full record, including"
    " psychiatric notes, HIV test results and medication history, to the patient's"
    " employer after the HR manager asked for it by phone to review a disability claim."
    " The patient had not signed any authorization and was not told of the request. "
)


async def _flood_judges(
    port: int, tokens: list[dict[str, str]], rate: float, seconds: float
) -> dict[str, Any]:
    """Open-loop /v1/judge requests (unique ~3,000-character events); what came back."""
    statuses: dict[str, int] = {}
    without_retry_after = 0
    ok_ms: list[float] = []
    other: list[str] = []
    limits = httpx.Limits(max_connections=200, max_keepalive_connections=50)
    async with httpx.AsyncClient(
        base_url=f"http://127.0.0.1:{port}", timeout=600, limits=limits
    ) as client:

        async def one(n: int) -> None:
            nonlocal without_retry_after
            text = (JUDGE_EVENT.format(n=n) * 8)[:3000]
            start = time.perf_counter()
            try:
                r = await client.post(
                    "/v1/judge",
                    json={"event": text, "method": "dp"},
                    headers=tokens[n % len(tokens)],
                )
            except httpx.HTTPError as exc:
                other.append(f"{type(exc).__name__}: {exc}")
                return
            statuses[str(r.status_code)] = statuses.get(str(r.status_code), 0) + 1
            if r.status_code == 200:
                ok_ms.append((time.perf_counter() - start) * 1000)
            elif r.status_code in (429, 503):
                without_retry_after += "retry-after" not in r.headers
            else:
                other.append(f"{r.status_code}: {r.text[:200]}")

        tasks = []
        t0 = time.perf_counter()
        for n in range(int(rate * seconds)):
            delay = t0 + n / rate - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(one(n)))
        await asyncio.gather(*tasks)
    ok_ms.sort()
    return {
        "sent": int(rate * seconds),
        "rate_per_s": rate,
        "statuses": dict(sorted(statuses.items())),
        "refused_without_retry_after": without_retry_after,
        "answered_p50_ms": round(statistics.median(ok_ms), 1) if ok_ms else None,
        "answered_max_ms": round(ok_ms[-1], 1) if ok_ms else None,
        "other_errors": len(other),
        "first_other_errors": other[:3],
    }


class RawClient:
    """A minimal HTTP/1.1 keep-alive client over asyncio streams (requests pre-encoded).

    On a 2-core machine the load generator shares the CPUs with the server; httpx
    spends about a millisecond of CPU per request at this rate, this client a
    small fraction of that, so the figures describe the server.

    Args:
        host / port: the server.
        connections: the most connections it opens (requests wait for a free one).
    """

    def __init__(self, host: str, port: int, connections: int = 64) -> None:
        self.host, self.port, self.size = host, port, connections
        self.opened = 0
        self.idle: asyncio.Queue[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = (
            asyncio.Queue()
        )

    @staticmethod
    def encode(path: str, body: dict[str, Any], headers: dict[str, str]) -> bytes:
        payload = json.dumps(body).encode()
        lines = [
            f"POST {path} HTTP/1.1",
            "Host: 127.0.0.1",
            "Content-Type: application/json",
            f"Content-Length: {len(payload)}",
            *(f"{k}: {v}" for k, v in headers.items()),
        ]
        return ("\r\n".join(lines) + "\r\n\r\n").encode() + payload

    async def _acquire(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        if not self.idle.empty():
            return self.idle.get_nowait()
        if self.opened < self.size:
            self.opened += 1
            return await asyncio.open_connection(self.host, self.port)
        return await self.idle.get()

    async def send(self, request: bytes) -> tuple[int, bytes]:
        conn = await self._acquire()
        reader, writer = conn
        try:
            writer.write(request)
            head = await reader.readuntil(b"\r\n\r\n")
            status = int(head[9:12])
            length = 0
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            body = await reader.readexactly(length)
        except BaseException:
            writer.close()
            self.opened -= 1
            raise
        self.idle.put_nowait(conn)
        return status, body

    async def aclose(self) -> None:
        while not self.idle.empty():
            self.idle.get_nowait()[1].close()


def _cpu_seconds(pid: int) -> float | None:
    """CPU time (user + system) a process has used so far (Linux /proc; None elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


Request = tuple[str, dict[str, Any], dict[str, str]]


async def _load(
    client: httpx.AsyncClient | RawClient,
    requests: list[Request],
    rate: float,
    server_pid: int | None = None,
) -> dict[str, Any]:
    latencies: list[float] = []
    lags: list[float] = []
    errors: list[str] = []
    raw = [RawClient.encode(*r) for r in requests] if isinstance(client, RawClient) else []

    async def one(i: int, due: float) -> None:
        start = time.perf_counter()
        lags.append(start - due)
        try:
            if isinstance(client, RawClient):
                status, data = await client.send(raw[i])
            else:
                path, body, headers = requests[i]
                response = await client.post(path, json=body, headers=headers)
                status, data = response.status_code, response.content
            if status != 200:
                errors.append(f"{status}: {data[:200].decode(errors='replace')}")
        except (httpx.HTTPError, OSError, asyncio.IncompleteReadError, ValueError) as exc:
            errors.append(f"{type(exc).__name__}: {exc}")
        latencies.append(time.perf_counter() - start)

    tasks = []
    cpu0 = _cpu_seconds(server_pid) if server_pid else None
    own0 = time.process_time()
    t0 = time.perf_counter() + 0.05
    for i in range(len(requests)):
        due = t0 + i / rate
        delay = due - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(one(i, due)))
    await asyncio.gather(*tasks)
    wall = time.perf_counter() - t0
    cpu1 = _cpu_seconds(server_pid) if server_pid else None
    client_cpu_ms = round((time.process_time() - own0) * 1000 / len(requests), 3)
    server_cpu_ms = (
        round((cpu1 - cpu0) * 1000 / len(requests), 3)
        if cpu0 is not None and cpu1 is not None
        else None
    )
    ms = sorted(x * 1000 for x in latencies)
    return {
        "requests": len(requests),
        "target_rate_per_s": rate,
        "throughput_per_s": round(len(requests) / wall, 1),
        "p50_ms": round(statistics.median(ms), 2),
        "p99_ms": round(ms[min(len(ms) - 1, int(0.99 * len(ms)))], 2),
        "max_ms": round(ms[-1], 2),
        "send_lag_p99_ms": round(sorted(lags)[int(0.99 * (len(lags) - 1))] * 1000, 2),
        "server_cpu_ms_per_request": server_cpu_ms,
        "client_cpu_ms_per_request": client_cpu_ms,
        "errors": len(errors),
        "first_errors": errors[:3],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="A short smoke run.")
    parser.add_argument("--db", help="Store URL to load and serve (default: temporary SQLite).")
    parser.add_argument("--decide-rate", type=float, default=TARGET_DECIDE_RATE)
    parser.add_argument(
        "--client",
        choices=["raw", "httpx"],
        default="raw",
        help="Load generator: a lean keep-alive HTTP/1.1 client (default) or httpx.AsyncClient.",
    )
    parser.add_argument("--retrieve-rate", type=float, default=100.0)
    parser.add_argument(
        "--seconds",
        type=float,
        default=None,
        help="Seconds of decide load (default 10; --quick 2).",
    )
    parser.add_argument("--judge-rate", type=float, default=4.0, help="Judges per second.")
    parser.add_argument(
        "--judge-server",
        type=float,
        default=None,
        metavar="DELAY",
        help="Judge with a local OpenAI-compatible test server answering after DELAY s"
        " (default: the configured model, the embedded one).",
    )
    parser.add_argument("--no-mixed", action="store_true", help="Skip the mixed run.")
    args = parser.parse_args(argv)
    seconds = args.seconds or (2.0 if args.quick else 10.0)
    n_decide = int(args.decide_rate * seconds)
    n_retrieve = int(args.retrieve_rate * seconds / 2)

    corpus = load_corpus()
    rng = random.Random(11)
    with tempfile.TemporaryDirectory(prefix="privacy-ci-bench-") as tmp:
        db = args.db or f"sqlite:///{Path(tmp) / 'riverside.db'}"
        store = DocumentStore(db)
        load_corpus_into(store, corpus)
        key = generate_key()
        key_file = Path(tmp) / "jwt.key"
        key_file.write_text(key)
        tokens = {
            a.id: {"Authorization": f"Bearer {issue_token(key, a.id, a.role, a.context, 3600)}"}
            for a in corpus.agents
        }
        agents, docs = list(tokens), corpus.labels.ids
        decide_reqs = [
            ("/v1/decide", {"doc_id": rng.choice(docs)}, tokens[rng.choice(agents)])
            for _ in range(n_decide)
        ]
        retrieve_reqs = [
            (
                "/v1/retrieve",
                {"query": " ".join(rng.sample(QUERY_WORDS, rng.randint(1, 4))), "k": 5},
                tokens[rng.choice(agents)],
            )
            for _ in range(n_retrieve)
        ]
        audit_before = store.counts()["audit"]
        port = _free_port()
        env = {"PRIVACY_CI_CACHE": str(Path(tmp) / "cache")}
        judge_backend = "configured model (embedded unless privacy-ci.toml says otherwise)"
        with contextlib.ExitStack() as stack:
            if args.judge_server is not None and not args.no_mixed:
                url = stack.enter_context(_judge_server(args.judge_server))
                config = Path(tmp) / "privacy-ci.toml"
                config.write_text(
                    f'[llm]\nprovider = "openai-compatible"\nmodel = "bench"\n'
                    f'base_url = "{url}"\nretries = 0\ncache = false\n'
                )
                env["PRIVACY_CI_CONFIG"] = str(config)
                judge_backend = f"local OpenAI-compatible test server, {args.judge_server} s delay"
            proc = stack.enter_context(_server(db, key_file, port, env))

            async def run() -> tuple[dict[str, Any], dict[str, Any]]:
                client: httpx.AsyncClient | RawClient
                if args.client == "httpx":
                    limits = httpx.Limits(max_connections=200, max_keepalive_connections=200)
                    client = httpx.AsyncClient(
                        base_url=f"http://127.0.0.1:{port}", timeout=30, limits=limits
                    )
                else:
                    client = RawClient("127.0.0.1", port)
                try:
                    warm = decide_reqs[:50] + retrieve_reqs[:20]
                    await _load(client, warm, 100)  # connections, snapshot, indexes
                    decide = await _load(client, decide_reqs, args.decide_rate, proc.pid)
                    retrieve = await _load(client, retrieve_reqs, args.retrieve_rate, proc.pid)
                finally:
                    await client.aclose()
                return decide, retrieve

            decide, retrieve = asyncio.run(run())

            async def mixed_run(port: int, pid: int) -> dict[str, Any]:
                client = RawClient("127.0.0.1", port)
                judge_tokens = [tokens[a] for a in agents[:8]]
                try:
                    flood = asyncio.create_task(
                        _flood_judges(port, judge_tokens, args.judge_rate, seconds)
                    )
                    await asyncio.sleep(min(2.0, seconds / 4))  # let the queue fill
                    decide_m, retrieve_m = await asyncio.gather(
                        _load(client, decide_reqs, args.decide_rate, pid),
                        _load(client, retrieve_reqs, args.retrieve_rate, pid),
                    )
                    judge = await flood
                finally:
                    await client.aclose()
                return {"decide": decide_m, "retrieve": retrieve_m, "judge": judge}

            mixed = None if args.no_mixed else asyncio.run(mixed_run(port, proc.pid))
        # the same mixed run with the model's threads at normal priority, for the ratio
        normal = None
        if mixed is not None and not args.judge_server:
            port2 = _free_port()
            with _server(db, key_file, port2, {**env, NICE_ENV: "0"}) as proc2:
                normal = asyncio.run(mixed_run(port2, proc2.pid))
        report = store.audit.verify()
        audit_records = store.counts()["audit"] - audit_before
        engine = store.engine
        store.close()

    for name, fig in (("decide", decide), ("retrieve", retrieve)):
        print(
            f"{name:8s}: {fig['requests']} requests at {fig['target_rate_per_s']:.0f}/s ->"
            f" {fig['throughput_per_s']}/s, p50 {fig['p50_ms']} ms, p99 {fig['p99_ms']} ms,"
            f" max {fig['max_ms']} ms, errors {fig['errors']}"
            f" (CPU per request: server {fig['server_cpu_ms_per_request']} ms,"
            f" client {fig['client_cpu_ms_per_request']} ms;"
            f" client send lag p99 {fig['send_lag_p99_ms']} ms)"
        )
        for err in fig["first_errors"]:
            print(f"          error: {err}")
    mixed_met = None
    if mixed is not None:
        md, mr, mj = mixed["decide"], mixed["retrieve"], mixed["judge"]
        refused = mj["statuses"].get("429", 0) + mj["statuses"].get("503", 0)
        mixed_met = (
            md["p99_ms"] < TARGET_DECIDE_P99_MS
            and md["errors"] == mr["errors"] == 0
            and refused > 0
            and mj["refused_without_retry_after"] == 0
            and mj["other_errors"] == 0
        )
        print(
            f"mixed   : decide p99 {md['p99_ms']} ms (p50 {md['p50_ms']}, errors {md['errors']}),"
            f" retrieve p99 {mr['p99_ms']} ms (errors {mr['errors']}) while /v1/judge got"
            f" {mj['sent']} requests at {mj['rate_per_s']}/s: {mj['statuses']}"
            f" ({mj['refused_without_retry_after']} refusals without Retry-After; answered"
            f" p50 {mj['answered_p50_ms']} ms, max {mj['answered_max_ms']} ms;"
            f" other errors {mj['other_errors']}); judge backend: {judge_backend};"
            f" service: {MODEL_SLOTS} model job at a time, {MODEL_QUEUE} waiting"
        )
        for err in mj["first_other_errors"]:
            print(f"          judge error: {err}")
        if normal is not None:
            nd = normal["decide"]
            print(
                f"mixed, model threads at normal priority ({NICE_ENV}=0): decide p99"
                f" {nd['p99_ms']} ms (p50 {nd['p50_ms']}), retrieve p99"
                f" {normal['retrieve']['p99_ms']} ms: the low-priority threads cut decide's"
                f" p99 {nd['p99_ms'] / max(md['p99_ms'], 0.001):.1f}x"
            )
        print(
            f"target: decide p99 < {TARGET_DECIDE_P99_MS} ms while /v1/judge is saturated,"
            f" and its overflow refused with Retry-After: {'met' if mixed_met else 'NOT met'}"
        )
    met = decide["p99_ms"] < TARGET_DECIDE_P99_MS and decide["errors"] == 0
    print(
        f"target: decide p99 < {TARGET_DECIDE_P99_MS} ms at {TARGET_DECIDE_RATE}/s:"
        f" {'met' if met else 'NOT met'} (p99 {decide['p99_ms']} ms at"
        f" {args.decide_rate:.0f}/s)"
    )
    print(
        f"audit: {audit_records} records written by the run, chain"
        f" {'verified' if report.ok else 'BROKEN at ' + str(report.first_bad_seq)}"
    )
    figures = {
        "benchmark": "service",
        "quick": args.quick,
        "store": engine,
        "decide": {k: v for k, v in decide.items() if k != "first_errors"},
        "retrieve": {k: v for k, v in retrieve.items() if k != "first_errors"},
        "errors": decide["errors"] + retrieve["errors"],
        "target_decide_p99_ms": TARGET_DECIDE_P99_MS,
        "target_decide_rate_per_s": TARGET_DECIDE_RATE,
        "target_met": met,
        "mixed": None
        if mixed is None
        else {
            "decide": {k: v for k, v in mixed["decide"].items() if k != "first_errors"},
            "retrieve": {k: v for k, v in mixed["retrieve"].items() if k != "first_errors"},
            "judge": {k: v for k, v in mixed["judge"].items() if k != "first_other_errors"},
            "judge_backend": judge_backend,
            "model_slots": MODEL_SLOTS,
            "model_queue": MODEL_QUEUE,
            "target_met": mixed_met,
            "normal_priority": None
            if normal is None
            else {
                "decide_p50_ms": normal["decide"]["p50_ms"],
                "decide_p99_ms": normal["decide"]["p99_ms"],
                "retrieve_p99_ms": normal["retrieve"]["p99_ms"],
                "judge_statuses": normal["judge"]["statuses"],
                "decide_p99_ratio_normal_to_low": round(
                    normal["decide"]["p99_ms"] / max(mixed["decide"]["p99_ms"], 0.001), 2
                ),
            },
        },
        "audit_records": audit_records,
        "audit_chain_ok": report.ok,
        "load_average_1m": round(os.getloadavg()[0], 2),
        "machine": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "fastapi": metadata.version("fastapi"),
            "uvicorn": metadata.version("uvicorn"),
            "server": f"uvicorn, 1 process, loop {_have('uvloop') or 'asyncio'},"
            f" HTTP {_have('httptools') or 'h11'}; coroutine endpoints",
            "client": CLIENTS[args.client] + " on the same machine, open-loop fixed rate",
        },
    }
    sys.stdout.flush()
    print(json.dumps(figures, sort_keys=False))
    mixed_errors = 0 if mixed is None else mixed["decide"]["errors"] + mixed["retrieve"]["errors"]
    return 0 if figures["errors"] == 0 and mixed_errors == 0 and report.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
