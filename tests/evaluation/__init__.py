"""Helpers of the evaluation tests: a toy dataset, fake methods, a fake-server answer.

Also the entry points of the subprocesses the resume-after-SIGKILL tests start
(``python -c "from tests.evaluation import child_hash_run; child_hash_run(...)"``).
"""

from __future__ import annotations

import asyncio
import hashlib
from collections import Counter
from dataclasses import dataclass, field

from privacy_ci.cases import VERDICT_ORDER, Case, Dataset, DatasetReport, Protocol, Task
from privacy_ci.ci import Flow, Verdict
from privacy_ci.judging import Event, Judgment, Method, MethodIdentity, StepRecord
from privacy_ci.llm import LLMClient

TOY_TYPES = (
    "Medical records",
    "Credit report information",
    "Protected Health Information (PHI)",
    "Voice recording",
    "Mental health treatment records",
    None,
)


def toy_dataset(n: int = 30, name: str = "toy") -> Dataset:
    """A deterministic three-way dataset of `n` cases (labels cycle P, X, N, N, P)."""
    labels = [
        Verdict.PERMIT,
        Verdict.PROHIBIT,
        Verdict.NOT_APPLICABLE,
        Verdict.NOT_APPLICABLE,
        Verdict.PERMIT,
    ]
    cases = tuple(
        Case(
            id=f"{name}-{i:04d}",
            dataset=name,
            regulation="hipaa",
            text=f"Toy event number {i}: a clinic shares records with party {i % 7}.",
            flow=Flow.of(
                sender_role="Doctor",
                recipient_role="Insurer",
                subject_role="Patient",
                information_type=TOY_TYPES[i % len(TOY_TYPES)],
                purpose="billing",
            ),
            label=labels[i % len(labels)],
        )
        for i in range(n)
    )
    protocol = Protocol(
        name=name,
        description=f"{n} toy cases for tests",
        regulation="hipaa",
        task=Task.THREE_WAY,
        labels=VERDICT_ORDER,
        inclusion="all",
        label_field="label",
        gold_field="gold",
        text_field="text",
        source="toy.json",
        sha256=hashlib.sha256(f"{name}:{n}".encode()).hexdigest(),
    )
    return Dataset(name, protocol, cases, protocol.sha256, DatasetReport(source="toy"))


def hashed_verdict(case_id: str, salt: str = "") -> Verdict | None:
    """A deterministic verdict (or None: unparsed) from a case id."""
    h = int(hashlib.sha256(f"{salt}:{case_id}".encode()).hexdigest(), 16) % 5
    return [Verdict.PERMIT, Verdict.PROHIBIT, Verdict.NOT_APPLICABLE, Verdict.PERMIT, None][h]


@dataclass
class HashMethod:
    """A fake `Method`: a verdict hashed from the case id, after an optional delay.

    Args:
        name: the method name.
        salt: changes the verdicts.
        delay: seconds per case.
        backend: the ``provider:model`` it claims.
        raise_for: case ids on which `judge` raises.
        error_for: case ids whose judgment carries an error (a failed model call).
    """

    name: str = "dp"
    salt: str = ""
    delay: float = 0.0
    backend: str = "scripted-test-double:hash"
    raise_for: set[str] = field(default_factory=set)
    error_for: set[str] = field(default_factory=set)
    calls: Counter[str] = field(default_factory=Counter)

    def identity(self) -> MethodIdentity:
        return MethodIdentity(self.name, prompts=("dp",))

    async def judge(self, event: Event) -> Judgment:
        self.calls[event.id] += 1
        if self.delay:
            await asyncio.sleep(self.delay)
        if event.id in self.raise_for:
            raise RuntimeError(f"boom on {event.id}")
        if event.id in self.error_for:
            return Judgment(self.name, None, backend=self.backend, error="model call failed")
        verdict = hashed_verdict(event.id, self.salt)
        raw = "Choice: ?" if verdict is None else f"Choice: {verdict.value}"
        step = StepRecord(
            name="decide",
            prompt_name="dp",
            prompt=f"judge {event.text}",
            raw_output=raw,
            parsed=None if verdict is None else verdict.value,
            retrieved_ids=["164.502"],
            prompt_tokens=12,
            completion_tokens=3,
            latency_s=self.delay,
        )
        return Judgment(
            self.name,
            verdict,
            cited_ids=["164.502"],
            rationale=raw,
            steps=[step],
            backend=self.backend,
        )


def fake_answer(prompt: str) -> str:
    """What the fake OpenAI server answers to the judging prompts (deterministic)."""
    if prompt.startswith("Given a regulation"):
        return "Yes. The regulation is relevant to the event."
    if prompt.startswith("I will provide you with an event"):
        return "A covered entity discloses protected health information to a health plan."
    if prompt.startswith("Read the event described below"):
        return "1. 164.502\n2. 164.506"
    h = int(hashlib.sha256(prompt.encode()).hexdigest(), 16) % 4
    return ["Choice: A. Prohibited", "Choice: B. Permitted", "Choice: C. Not related", "Hmm."][h]


def child_hash_run(out_dir: str, n: int, delay: float, concurrency: int) -> None:
    """Subprocess entry: an eval of `HashMethod` on the toy dataset (to be killed)."""
    from privacy_ci.evaluation import run_eval_sync

    run_eval_sync(
        HashMethod(delay=delay),
        toy_dataset(n),
        out_dir,
        concurrency=concurrency,
        progress=False,
        bootstrap=200,
    )


def child_server_run(out_dir: str, base_url: str, n: int, concurrency: int) -> None:
    """Subprocess entry: the real DP method against a fake server (to be killed)."""
    from privacy_ci.evaluation import run_eval_sync

    method, client = server_dp(base_url, concurrency)
    run_eval_sync(
        method,
        toy_dataset(n),
        out_dir,
        concurrency=concurrency,
        progress=False,
        client=client,
        bootstrap=200,
    )


def server_dp(base_url: str, concurrency: int) -> tuple[Method, LLMClient]:
    """The real DP method over an uncached client of the fake server."""
    from privacy_ci.judging import build_method
    from privacy_ci.llm import LLMConfig, make_client

    config = LLMConfig(
        provider="openai-compatible",
        model="fake-model",
        base_url=base_url,
        cache=False,
        concurrency=concurrency,
        retries=0,
    )
    client = make_client(config)
    return build_method("dp", client), client
