"""Model slots are fair, and a job that is abandoned stops the model (issue 24).

An outside tester found that one requester's four judge requests made another's
wait for all of them (global FIFO), and that a dropped client freed its slot while
the model went on computing for about 80 s. Here: slots go round robin across
requesters and one requester holds at most its share of the places; a job stopped
by a disconnect or a deadline stops its model thread at the next check, and its
slot frees only once that thread has returned.
"""

from __future__ import annotations

import asyncio
import json
import re
import socket
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from privacy_ci.llm import Completion, GenerationSettings, LLMClient, LLMError, Message, user
from privacy_ci.llm._cancel import CANCELLED, cancel_requested
from privacy_ci.llm._threads import run_model_thread
from privacy_ci.llm.testing import TEST_DOUBLE_PROVIDER, ScriptedTestBackend
from privacy_ci.service import ServiceSettings, create_app, issue_token
from privacy_ci.service._limits import (
    Busy,
    ClientGone,
    OverShare,
    Rate,
    RateLimited,
    TimedOut,
    WorkPool,
    run_bounded,
)
from privacy_ci.store import DocumentStore
from tests.service._serving import serving, wait_for

KEY = b"fair-slots-test-key-0123456789abcdef-0123456789"
ANSWER = "Choice: B. Permitted"


def _auth(agent: str, role: str, context: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {issue_token(KEY, agent, role, context)}"}


DOCTOR = _auth("D01", "Doctor", "Medical")
NURSE = _auth("N01", "Nurse", "Medical")


def _judge(tag: str) -> dict[str, str]:
    return {
        "event": f"A hospital sends a patient's lab results to her physician (request {tag}).",
        "method": "dp",
    }


# -- the pool itself ------------------------------------------------------------------------
async def _submit(pool: WorkPool, requester: str, job: Callable[[], Awaitable[str]]) -> Any:
    """Submit a job and let it reach its place in the queue before the next one."""
    task = asyncio.ensure_future(pool.run(job, requester))
    await asyncio.sleep(0)
    return task


def _gated_jobs(
    started: list[str],
) -> tuple[Callable[[str], Callable[[], Awaitable[str]]], asyncio.Event]:
    release = asyncio.Event()

    def job(name: str) -> Callable[[], Awaitable[str]]:
        async def run() -> str:
            started.append(name)
            await release.wait()
            return name

        return run

    return job, release


def test_a_slot_goes_to_the_requester_waiting_longest_not_to_a_backlog() -> None:
    async def go() -> list[str]:
        pool = WorkPool("/v1/judge", slots=1, queue=8, share=4)
        started: list[str] = []
        job, release = _gated_jobs(started)
        tasks = [await _submit(pool, "A", job(f"A{i}")) for i in range(1, 5)]
        tasks.append(await _submit(pool, "B", job("B1")))
        assert started == ["A1"] and pool.admitted == 5
        release.set()
        assert await asyncio.gather(*tasks) == ["A1", "A2", "A3", "A4", "B1"]
        assert pool.admitted == 0 and pool.holding("A") == 0
        return started

    # B waits for A's running job only, not for A's three queued ones
    assert asyncio.run(go()) == ["A1", "B1", "A2", "A3", "A4"]


def test_slots_go_round_robin_across_requesters() -> None:
    async def go() -> list[str]:
        pool = WorkPool("/v1/judge", slots=1, queue=8, share=3)
        started: list[str] = []
        job, release = _gated_jobs(started)
        tasks = [await _submit(pool, "A", job(f"A{i}")) for i in range(1, 4)]
        tasks += [await _submit(pool, "B", job(f"B{i}")) for i in range(1, 3)]
        tasks.append(await _submit(pool, "C", job("C1")))
        release.set()
        await asyncio.gather(*tasks)
        return started

    assert asyncio.run(go()) == ["A1", "B1", "C1", "A2", "B2", "A3"]


def test_a_requester_with_nothing_running_goes_before_one_with_a_job_running() -> None:
    async def go() -> list[str]:
        pool = WorkPool("/v1/judge", slots=2, queue=8, share=5)
        started: list[str] = []
        gates: dict[str, asyncio.Event] = {}

        def job(name: str) -> Callable[[], Awaitable[str]]:
            gates[name] = asyncio.Event()

            async def run() -> str:
                started.append(name)
                await gates[name].wait()
                return name

            return run

        tasks = [await _submit(pool, "A", job(f"A{i}")) for i in range(1, 5)]
        tasks.append(await _submit(pool, "B", job("B1")))
        assert started == ["A1", "A2"]
        gates["A1"].set()  # A still runs A2: the free slot is B's
        await tasks[0]
        await asyncio.sleep(0)
        assert started == ["A1", "A2", "B1"]
        for gate in gates.values():
            gate.set()
        await asyncio.gather(*tasks)
        return started

    assert asyncio.run(go()) == ["A1", "A2", "B1", "A3", "A4"]


def test_one_requester_cannot_take_every_queue_place() -> None:
    async def go() -> None:
        pool = WorkPool("/v1/judge", slots=1, queue=3)  # default share: half of 4 places
        assert pool.share == 2
        started: list[str] = []
        job, release = _gated_jobs(started)
        mine = [await _submit(pool, "A", job(f"A{i}")) for i in range(1, 3)]
        with pytest.raises(OverShare) as refused:
            await pool.run(job("A3"), "A")
        assert isinstance(refused.value, RateLimited)  # a 429, like the rate limit
        assert refused.value.retry_after > 0
        assert "you already have 2 jobs running or waiting" in str(refused.value)
        theirs = await _submit(pool, "B", job("B1"))  # B still gets a place
        assert pool.admitted == 3 and pool.holding("A") == 2 and pool.holding("B") == 1
        release.set()
        await asyncio.gather(*mine, theirs)
        assert started == ["A1", "B1", "A2"] and pool.admitted == 0

    asyncio.run(go())


def test_a_full_pool_is_still_busy_and_a_cancelled_waiter_gives_its_place_back() -> None:
    async def go() -> None:
        pool = WorkPool("/v1/judge", slots=1, queue=1, share=2)
        started: list[str] = []
        job, release = _gated_jobs(started)
        first = await _submit(pool, "A", job("A1"))
        waiting = await _submit(pool, "B", job("B1"))
        with pytest.raises(Busy):
            await pool.run(job("C1"), "C")
        waiting.cancel()  # B's client went away while it waited
        with pytest.raises(asyncio.CancelledError):
            await waiting
        assert pool.admitted == 1 and pool.holding("B") == 0
        later = await _submit(pool, "C", job("C1"))
        release.set()
        assert list(await asyncio.gather(first, later)) == ["A1", "C1"]
        assert started == ["A1", "C1"]

    asyncio.run(go())


def test_pool_arguments_are_checked() -> None:
    with pytest.raises(ValueError):
        WorkPool("/v1/judge", slots=1, queue=1, share=0)
    assert WorkPool("/v1/judge", slots=2, queue=8).share == 5
    assert WorkPool("/v1/judge", slots=1, queue=0).share == 1


# -- cancellation reaches the model's thread ------------------------------------------------
class SteppingBackend:
    """A model that computes in a model thread in small steps and checks for
    cancellation between them (as llama.cpp does between tokens and prompt chunks).
    Once it sees the cancel it takes `wind_down_s` more to return, like a token in
    flight, so a slot freed before the thread returns would show as an overlap."""

    provider = TEST_DOUBLE_PROVIDER
    model = "stepping"
    base_url = "stepping://"

    def __init__(
        self, steps: Sequence[int] = (400,), step_s: float = 0.02, wind_down_s: float = 0.2
    ) -> None:
        self.steps = list(steps)  # per call, in order (the last one repeats)
        self.step_s = step_s
        self.wind_down_s = wind_down_s
        self._lock = threading.Lock()
        self.active = 0  # threads computing now
        self.overlap = 0  # the most threads ever computing beside another
        self.done_steps = 0
        self.stopped_after: list[int] = []  # steps a cancelled call had computed
        self.calls = 0

    async def complete(
        self, messages: Sequence[Message], settings: GenerationSettings
    ) -> Completion:
        return await run_model_thread(self._compute)

    def _compute(self) -> Completion:
        with self._lock:
            self.overlap = max(self.overlap, self.active)
            self.active += 1
            steps = self.steps[min(self.calls, len(self.steps) - 1)]
            self.calls += 1
        try:
            for step in range(steps):
                if cancel_requested():
                    time.sleep(self.wind_down_s)
                    self.stopped_after.append(step)
                    raise LLMError("cancelled", retryable=False)
                time.sleep(self.step_s)
                self.done_steps += 1
            return Completion(text=ANSWER, provider=self.provider, model=self.model)
        finally:
            with self._lock:
                self.active -= 1

    async def aclose(self) -> None:
        return None


async def _until(condition: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.005)


def test_a_dropped_client_stops_the_model_thread_before_its_slot_is_reused() -> None:
    backend = SteppingBackend()
    client = LLMClient(backend)

    async def go() -> None:
        pool = WorkPool("/v1/judge", slots=1, queue=1)
        gone = asyncio.Event()

        async def model() -> str:
            return (await client.complete([user("judge this")])).text

        async def next_job() -> int:
            return backend.active  # what still computes when the next job starts

        async def disconnected() -> None:
            await gone.wait()

        dropped = asyncio.ensure_future(
            pool.run(lambda: run_bounded(model, timeout_s=60, disconnected=disconnected), "A")
        )
        await _until(lambda: backend.done_steps >= 3)
        queued = asyncio.ensure_future(pool.run(lambda: run_bounded(next_job, timeout_s=60), "B"))
        await _until(lambda: pool.admitted == 2)
        at_drop = backend.done_steps
        gone.set()
        with pytest.raises(ClientGone):
            await dropped
        assert backend.active == 0  # the slot was held until the thread returned
        assert backend.stopped_after and backend.done_steps - at_drop <= 25
        assert await queued == 0  # nothing computed when the next job started

    asyncio.run(go())
    assert backend.done_steps < 200 and backend.overlap == 0


def test_a_deadline_stops_the_model_thread_before_the_504() -> None:
    backend = SteppingBackend()
    client = LLMClient(backend)

    async def go() -> None:
        async def model() -> str:
            return (await client.complete([user("judge this")])).text

        start = time.monotonic()
        with pytest.raises(TimedOut):
            await run_bounded(model, timeout_s=0.2)
        assert backend.active == 0 and len(backend.stopped_after) == 1
        # the thread's steps end at the deadline, not at the model's own end (8 s)
        assert time.monotonic() - start < 4

    asyncio.run(go())


def test_a_finished_job_leaves_nothing_computing() -> None:
    """A job whose `gather` failed early leaves a sibling call running; it is
    stopped before the slot frees."""
    backend = SteppingBackend()
    client = LLMClient(backend)

    async def go() -> None:
        async def fails() -> None:
            raise ValueError("a step failed")

        async def job() -> object:
            return await asyncio.gather(client.complete([user("slow")]), fails())

        with pytest.raises(ValueError):
            await run_bounded(job, timeout_s=60)
        assert backend.active == 0 and backend.stopped_after

    asyncio.run(go())


# -- the embedded model ---------------------------------------------------------------------
@pytest.fixture(scope="module")
def embedded() -> Any:
    from privacy_ci.llm._embedded import EmbeddedBackend
    from privacy_ci.llm.testing import embedded_unavailable_reason

    reason = embedded_unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    b = EmbeddedBackend()
    b.load()
    return b


LONG_PROMPT = [
    user(
        " ".join(
            ["The hospital shares the patient's records with the insurer under the plan."] * 40
        )
        + "\nSummarise this in one sentence."
    )
]


class CountingEvent(threading.Event):
    """An event that reports itself set from its `after`-th check on."""

    def __init__(self, after: int) -> None:
        super().__init__()
        self.after = after
        self.checks = 0

    def is_set(self) -> bool:
        self.checks += 1
        return self.checks > self.after or super().is_set()


def test_the_embedded_model_stops_between_chunks_of_a_long_prompt(embedded: Any) -> None:
    from privacy_ci.llm._embedded import CANCELLED_MESSAGE, PROMPT_CHUNK

    event = CountingEvent(after=2)  # the check after the lock, then one per prompt chunk

    async def go() -> object:
        CANCELLED.set(event)
        try:
            return await embedded.complete(LONG_PROMPT, GenerationSettings(max_tokens=20))
        except LLMError as exc:
            return exc

    stopped = asyncio.run(go())
    assert isinstance(stopped, LLMError) and str(stopped) == CANCELLED_MESSAGE
    assert event.checks == 3
    llama = embedded._loaded().llama
    assert llama.n_tokens == 2 * PROMPT_CHUNK  # two chunks of a ~600-token prompt
    assert llama.eval.__func__ is type(llama).eval  # the instance's own eval is back


def test_a_deadline_leaves_the_embedded_model_idle_when_it_returns(embedded: Any) -> None:
    client = LLMClient(embedded)
    llama = embedded._loaded().llama
    prompt = len(llama.tokenize(LONG_PROMPT[0].content.encode("utf-8")))

    async def go() -> None:
        with pytest.raises(TimedOut):
            await run_bounded(
                lambda: client.complete(LONG_PROMPT, GenerationSettings(max_tokens=200)),
                timeout_s=0.2,
            )
        lock = embedded._loaded().lock
        assert lock.acquire(blocking=False)  # the model is not computing any more
        lock.release()

    asyncio.run(go())
    assert llama.n_tokens < prompt  # it stopped inside the prompt


# -- an HTTP backend's request is closed ----------------------------------------------------
def test_a_cancelled_http_model_call_closes_its_connection() -> None:
    from privacy_ci.llm._openai import OpenAICompatibleBackend

    async def go() -> None:
        received = asyncio.Event()
        closed = asyncio.Event()

        async def hang(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            head = await reader.readuntil(b"\r\n\r\n")
            length = re.search(rb"(?i)content-length: *(\d+)", head)
            assert length is not None
            await reader.readexactly(int(length[1]))
            received.set()
            while await reader.read(1024):  # a model that never answers
                pass
            closed.set()  # EOF: the client closed the connection
            writer.close()

        server = await asyncio.start_server(hang, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        backend = OpenAICompatibleBackend(model="m", base_url=f"http://127.0.0.1:{port}/v1")
        client = LLMClient(backend)
        async with server:
            with pytest.raises(TimedOut):
                await run_bounded(lambda: client.complete([user("judge this")]), timeout_s=0.5)
            assert received.is_set()
            await asyncio.wait_for(closed.wait(), timeout=5)
            await client.aclose()

    asyncio.run(go())


# -- through the service --------------------------------------------------------------------
class OrderedBackend:
    """Records which request each model call serves; answers once released."""

    provider = TEST_DOUBLE_PROVIDER
    model = "ordered"
    base_url = "ordered://"

    def __init__(self) -> None:
        self.release = threading.Event()
        self.order: list[str] = []
        self.inner = ScriptedTestBackend([ANSWER], cycle=True)

    async def complete(
        self, messages: Sequence[Message], settings: GenerationSettings
    ) -> Completion:
        text = " ".join(m.content for m in messages)
        self.order.append(re.findall(r"\(request (\w+)\)", text)[-1])
        while not self.release.is_set():
            await asyncio.sleep(0.005)
        return await self.inner.complete(messages, settings)

    async def aclose(self) -> None:
        return None


def _admitted(pool: WorkPool, n: int) -> Callable[[], bool]:
    return lambda: pool.admitted == n


def test_a_patients_judge_waits_for_one_of_the_doctors_jobs_not_all(
    riverside: DocumentStore,
) -> None:
    backend = OrderedBackend()
    settings = ServiceSettings(
        jwt_key=KEY,
        llm_client=LLMClient(backend, concurrency=8),
        model_slots=1,
        model_queue=4,
        model_share=4,
        model_rate=Rate(per_s=100, burst=100),
    )
    app = create_app(riverside, settings)
    pool = app.state.pools["/v1/judge"]
    with serving(app) as url, ThreadPoolExecutor(5) as threads:
        http = httpx.Client(base_url=url, timeout=30)
        sent = [threads.submit(http.post, "/v1/judge", json=_judge("D1"), headers=DOCTOR)]
        wait_for(lambda: backend.order == ["D1"], "the doctor's first job to start")
        for n, (tag, who) in enumerate(
            [("D2", DOCTOR), ("D3", DOCTOR), ("D4", DOCTOR), ("N1", NURSE)], start=2
        ):
            sent.append(threads.submit(http.post, "/v1/judge", json=_judge(tag), headers=who))
            wait_for(_admitted(pool, n), f"request {tag} to be admitted")
        assert backend.order == ["D1"]
        backend.release.set()
        assert [r.result().status_code for r in sent] == [200] * 5
    assert backend.order == ["D1", "N1", "D2", "D3", "D4"]


def test_over_its_share_a_requester_gets_429_and_others_still_queue(
    riverside: DocumentStore,
) -> None:
    backend = OrderedBackend()
    settings = ServiceSettings(
        jwt_key=KEY,
        llm_client=LLMClient(backend, concurrency=8),
        model_slots=1,
        model_queue=2,  # default share: 1 of the 3 places
        model_rate=Rate(per_s=100, burst=100),
    )
    app = create_app(riverside, settings)
    pool = app.state.pools["/v1/judge"]
    with serving(app) as url, ThreadPoolExecutor(2) as threads:
        http = httpx.Client(base_url=url, timeout=30)
        first = threads.submit(http.post, "/v1/judge", json=_judge("D1"), headers=DOCTOR)
        wait_for(lambda: backend.order == ["D1"], "the doctor's first job to start")
        over = http.post("/v1/judge", json=_judge("D2"), headers=DOCTOR)
        assert over.status_code == 429 and int(over.headers["retry-after"]) >= 1
        assert "already have 1 job running or waiting" in over.json()["error"]
        other = threads.submit(http.post, "/v1/judge", json=_judge("N1"), headers=NURSE)
        wait_for(lambda: pool.admitted == 2, "the nurse's job to queue")
        backend.release.set()
        assert first.result().status_code == 200 and other.result().status_code == 200
    assert backend.order == ["D1", "N1"]


def _raw_judge(url: str, headers: dict[str, str], tag: str) -> socket.socket:
    """Send a judge request on a raw socket (closing it drops the client)."""
    host, port = url.removeprefix("http://").split(":")
    body = json.dumps(_judge(tag)).encode()
    sock = socket.create_connection((host, int(port)))
    sock.sendall(
        b"POST /v1/judge HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n"
        + f"Authorization: {headers['Authorization']}\r\n".encode()
        + f"Content-Length: {len(body)}\r\n\r\n".encode()
        + body
    )
    return sock


def test_a_dropped_http_client_stops_the_model_before_the_next_job_runs(
    riverside: DocumentStore,
) -> None:
    backend = SteppingBackend(steps=(400, 10))  # the doctor's: 8 s unless stopped
    settings = ServiceSettings(
        jwt_key=KEY,
        llm_client=LLMClient(backend),
        model_slots=1,
        model_queue=1,
        model_rate=Rate(per_s=100, burst=100),
    )
    app = create_app(riverside, settings)
    pool = app.state.pools["/v1/judge"]
    with serving(app) as url, ThreadPoolExecutor(1) as threads:
        dropped = _raw_judge(url, DOCTOR, "D1")
        wait_for(lambda: backend.done_steps >= 2, "the doctor's model call to compute")
        http = httpx.Client(base_url=url, timeout=30)
        queued = threads.submit(http.post, "/v1/judge", json=_judge("N1"), headers=NURSE)
        wait_for(lambda: pool.admitted == 2, "the nurse's job to queue")
        dropped.close()
        wait_for(lambda: len(backend.stopped_after) == 1, "the doctor's model call to stop")
        assert queued.result().status_code == 200
        wait_for(lambda: pool.admitted == 0, "every slot to free")
    assert backend.stopped_after[0] < 200  # it stopped early, not at its last step
    assert backend.calls == 2 and backend.overlap == 0  # never two computing in one slot


def test_serve_takes_the_share_of_one_requester(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    import privacy_ci.service
    from privacy_ci.cli.main import app
    from privacy_ci.service import generate_key

    key = tmp_path / "jwt.key"
    key.write_text(generate_key())
    seen: list[ServiceSettings] = []
    monkeypatch.setattr(
        privacy_ci.service, "serve_forever", lambda db, key, settings, **kw: seen.append(settings)
    )
    args = ["serve", "--db", str(tmp_path / "s.db"), "--jwt-key-file", str(key)]
    runner = CliRunner()
    assert runner.invoke(app, [*args, "--model-share", "3"]).exit_code == 0
    assert runner.invoke(app, args).exit_code == 0
    assert [s.model_share for s in seen] == [3, None]
    refused = runner.invoke(app, [*args, "--model-share", "0"])
    assert refused.exit_code == 2 and not (tmp_path / "s.db").exists()
