"""`run_eval`: judge a dataset's cases with a method, durably and resumably.

A run lives in one folder:

* ``manifest.json``: what was run (dataset name, protocol and sha256, the case
  set, the method, the model, provider and base URL, generation settings, prompt
  hashes, the knowledge-base hash: together the run's *identity*), with which
  code (``privacy_ci.__version__``, git commit), when (one entry per session) and
  the LLM usage of each session. Written atomically (temp file + rename).
* ``records.jsonl``: ONE line per judged case (case id, the case's text, gold,
  verdict, parsed, error, cited ids, backend, rationale, every step record: prompt,
  raw output, parsed result, retrieved ids, tokens, latency), appended, flushed and fsynced
  as each case finishes, so a killed run loses at most the cases in flight.
* ``metrics.json``: the scores (`score_run`) with the model-free baselines on the
  same cases, written when every case is judged; on cases with gold facts or pair
  ids also the law from gold facts, reading per fact and the pair scores
  (`privacy_ci.evaluation._gold_facts`).

Running again with the same folder resumes: finished case ids are read back and
skipped; a last line cut short by a kill (no newline, or not JSON) is discarded
and its case judged again, so no case is lost or recorded twice. A folder whose
manifest has a different identity is refused (`RunMismatch`), naming what
differs.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import json
import os
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from privacy_ci._durable import (
    RecordWriter,
    code_version,
    differences,
    fsync_dir,
    now_iso,
    read_records,
    resume_records,
    write_json_atomic,
)
from privacy_ci._progress import CounterBar
from privacy_ci.cases import Case, Dataset, load_dataset
from privacy_ci.errors import PrivacyCIError
from privacy_ci.evaluation._baselines import baseline_scores, compute_baselines
from privacy_ci.evaluation._cross_check import cross_check_metrics
from privacy_ci.evaluation._gold_facts import gold_fact_metrics
from privacy_ci.evaluation._metrics import score_run
from privacy_ci.judging._cross_check import CrossChecker
from privacy_ci.judging._methods import event_from_case
from privacy_ci.judging._types import Event, Judgment, Method
from privacy_ci.llm import GenerationSettings, LLMClient
from privacy_ci.llm._scripted import TEST_DOUBLE_PROVIDER, is_test_double

__all__ = [
    "MANIFEST_FILE",
    "METRICS_FILE",
    "RECORDS_FILE",
    "TEST_DOUBLE_PROVIDER",
    "RunMismatch",
    "RunResult",
    "case_event",
    "compute_metrics",
    "is_test_double",
    "read_records",
    "run_eval",
    "run_eval_sync",
]

MANIFEST_FILE = "manifest.json"
RECORDS_FILE = "records.jsonl"
METRICS_FILE = "metrics.json"
MANIFEST_VERSION = 1


class RunMismatch(PrivacyCIError):
    """An output folder holds a different run than the one asked for."""


def case_event(case: Case) -> Event:
    """The `Event` a method judges for a case: its narrative, CI fields and party names."""
    return event_from_case(case)


# ---------------------------------------------------------------------------------
# small helpers
# ---------------------------------------------------------------------------------
def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _record(
    case: Case, judgment: Judgment, dataset: Dataset, elapsed: float, index: int
) -> dict[str, Any]:
    gold_class = dataset.protocol.target(case.label)
    predicted = None if judgment.verdict is None else dataset.protocol.target(judgment.verdict)
    data = judgment.as_dict()
    record: dict[str, Any] = {
        "case_id": case.id,
        "index": index,
        "text": case.text,  # for the report's drill-down (older records lack it)
        "gold": case.label.value,
        "verdict": data["verdict"],
        "parsed": judgment.verdict is not None,
        "gold_class": gold_class,
        "predicted_class": predicted,
        "correct": predicted is not None and predicted == gold_class,
        "error": judgment.error,
        "abstained": judgment.abstained,
        "cited_ids": data["cited_ids"],
        "method": judgment.method,
        "backend": judgment.backend,
        "rationale": judgment.rationale,
        "steps": data["steps"],
        "elapsed_s": round(elapsed, 4),
        "finished_at": now_iso(),
    }
    # the gold the reading is scored against, for the report (keys only when present)
    if case.gold_facts is not None:
        record["gold_facts"] = dict(case.gold_facts)
    if case.pair_id is not None:
        record["pair_id"] = case.pair_id
    return record


def _usage_from_records(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    calls = cached = retries = prompt_tokens = completion_tokens = failed = 0
    for rec in records:
        for step in rec.get("steps") or []:
            if not step.get("prompt_name") and not step.get("raw_output"):
                continue
            calls += 1
            cached += bool(step.get("cached"))
            retries += int(step.get("retries") or 0)
            prompt_tokens += int(step.get("prompt_tokens") or 0)
            completion_tokens += int(step.get("completion_tokens") or 0)
            failed += step.get("error") is not None
    return {
        "model_steps": calls,
        "cached_steps": cached,
        "retries": retries,
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "failed_steps": failed,
    }


def compute_metrics(
    records: Sequence[Mapping[str, Any]],
    dataset: Dataset,
    cases: Sequence[Case],
    *,
    bootstrap: int = 1000,
    seed: int = 0,
) -> dict[str, Any]:
    """The metrics document of a run: scores, baselines on the same cases, usage.

    Args:
        records: the run's records (any order; one per case id).
        dataset: the dataset (its protocol decides the task).
        cases: the run's cases, in order (baselines are computed on these).
        bootstrap / seed: macro-F1 bootstrap settings.

    Returns:
        A JSON-ready dict (what ``metrics.json`` holds). Cases with gold facts add
        ``gold_facts`` (law from gold facts, reading per fact), cases with pair ids
        ``pairs`` (pair accuracy, flip rate, beside the baselines'); either adds the
        ``always-permit`` baseline.
    """
    by_id = {r["case_id"]: r for r in records}
    scored = [c for c in cases if c.id in by_id]
    pairs = [(c.label.value, by_id[c.id].get("verdict")) for c in scored]
    task = dataset.protocol.task.value
    backends = Counter(str(by_id[c.id].get("backend") or "") for c in scored)
    backend = backends.most_common(1)[0][0] if backends else ""
    extra: dict[str, Any] = {}
    abstained = [c for c in scored if by_id[c.id].get("abstained")]
    if abstained:  # a method that may decline: coverage and accuracy on what it answered
        answered = [c for c in scored if not by_id[c.id].get("abstained")]
        right = sum(1 for c in answered if by_id[c.id].get("correct"))
        extra["abstentions"] = {
            "count": len(abstained),
            "coverage": round(len(answered) / len(scored), 4) if scored else None,
            "accuracy_on_answered": round(right / len(answered), 4) if answered else None,
        }
    checked = cross_check_metrics([by_id[c.id] for c in scored])
    if checked is not None:  # only runs made with --cross-check have the block
        extra["cross_check"] = checked
    # blocks only for cases with gold facts or pairs: other runs' metrics stay as recorded
    annotated = any(c.gold_facts is not None or c.pair_id is not None for c in scored)
    if annotated:
        extra.update(
            gold_fact_metrics(
                scored,
                by_id,
                dataset.protocol,
                compute_baselines(scored, dataset.protocol, always_permit=True),
                bootstrap=bootstrap,
                seed=seed,
            )
        )
    return {
        "dataset": {
            "name": dataset.name,
            "task": task,
            "classes": list(dataset.protocol.classes),
            "subset": dataset.protocol.subset,
            "sha256": dataset.sha256,
        },
        "method": next((str(r.get("method")) for r in records if r.get("method")), ""),
        "backend": backend,
        "backends": dict(backends),
        "test_double": any(is_test_double(b) for b in backends),
        "cases": len(cases),
        "judged": len(scored),
        "complete": len(scored) == len(cases),
        "errors": sum(1 for c in scored if by_id[c.id].get("error")),
        "unparsed": sum(
            1
            for c in scored
            if by_id[c.id].get("verdict") is None and not by_id[c.id].get("abstained")
        ),
        **extra,
        "scores": score_run(pairs, task, bootstrap=bootstrap, seed=seed).as_dict(),
        "baselines": baseline_scores(
            scored, dataset.protocol, bootstrap=bootstrap, seed=seed, always_permit=annotated
        ),
        "usage": _usage_from_records([by_id[c.id] for c in scored]),
        "generated_at": now_iso(),
    }


# ---------------------------------------------------------------------------------
# identity
# ---------------------------------------------------------------------------------
def _settings_dict(settings: Any) -> dict[str, Any] | None:
    if settings is None:
        return None
    if isinstance(settings, GenerationSettings):
        return settings.cache_key_part()
    if isinstance(settings, Mapping):
        return {str(k): v for k, v in settings.items()}
    if dataclasses.is_dataclass(settings) and not isinstance(settings, type):
        return dataclasses.asdict(settings)
    dump = getattr(settings, "model_dump", None)  # pydantic models
    if callable(dump):
        return dict(dump(mode="json"))
    return {"repr": repr(settings)}


def _prompt_hashes(names: Sequence[str], prompts: Mapping[str, str] | Sequence[str] | None) -> Any:
    from privacy_ci.judging._prompts import prompt_hashes

    if isinstance(prompts, Mapping):
        return dict(prompts)
    chosen = list(prompts) if prompts is not None else list(names)
    return prompt_hashes(chosen) if chosen else {}


def _model_info(client: LLMClient | None) -> dict[str, Any] | None:
    if client is None:
        return None
    backend = client.backend
    return {
        "provider": backend.provider,
        "model": backend.model,
        "base_url": backend.base_url,
    }


def _identity(
    dataset: Dataset,
    cases: Sequence[Case],
    method: Method,
    model: Mapping[str, Any] | None,
    settings: Mapping[str, Any] | None,
    prompts: Mapping[str, str],
    kb_hash: str | None,
    cross_check: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    identity = {
        "dataset": {
            "name": dataset.name,
            "protocol": dataset.protocol.name,
            "task": dataset.protocol.task.value,
            "subset": dataset.protocol.subset,
            "sha256": dataset.sha256,
        },
        "cases": {
            "count": len(cases),
            "ids_sha256": _sha("\n".join(c.id for c in cases)),
        },
        "method": method.name,
        "model": dict(model) if model is not None else None,
        "settings": dict(settings) if settings is not None else None,
        "prompts": dict(prompts),
        "knowledge_base": kb_hash,
    }
    if cross_check is not None:  # a key only when on: runs without it keep their identity
        identity["cross_check"] = dict(cross_check)
    return identity


# ---------------------------------------------------------------------------------
# the run
# ---------------------------------------------------------------------------------
@dataclass
class RunResult:
    """What `run_eval` did.

    Args:
        out_dir: the run folder.
        manifest: the manifest as written.
        metrics: the metrics document (also in ``metrics.json``).
        records: every record of the run, in case order.
        resumed: cases already finished when this call started.
        judged: cases judged by this call.
        discarded_bytes: bytes of a partial last record dropped on resume.
        wall_s: this call's wall time.
        retries: LLM retries seen during this call.
    """

    out_dir: Path
    manifest: dict[str, Any]
    metrics: dict[str, Any]
    records: list[dict[str, Any]] = field(default_factory=list)
    resumed: int = 0
    judged: int = 0
    discarded_bytes: int = 0
    wall_s: float = 0.0
    retries: int = 0


class _Progress:
    """A rich progress bar on stderr (or nothing), with retries/unparsed/errors."""

    def __init__(self, enabled: bool, total: int, done: int, label: str) -> None:
        counters = {"retries": "retries", "unparsed": "unparsed", "errors": "errors"}
        self._bar = CounterBar(enabled, label, total, counters, done=done)

    @property
    def retries(self) -> int:
        return self._bar.counts["retries"]

    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        with self._bar:
            yield

    def retry(self, *_: Any) -> None:
        self._bar.count(retries=1)

    def finished(self, record: Mapping[str, Any], step_retries: int, hooked: bool) -> None:
        self._bar.count(
            1,
            retries=0 if hooked else step_retries,
            unparsed=int(record.get("verdict") is None),
            errors=int(bool(record.get("error"))),
        )


def _select(dataset: Dataset, limit: int | None, seed: int) -> Dataset:
    if limit is None or limit >= len(dataset):
        return dataset
    if limit < 1:
        raise PrivacyCIError(f"limit must be at least 1, not {limit}")
    return dataset.sample(limit, seed=seed)


async def run_eval(
    method: Method,
    dataset: Dataset | str,
    out_dir: Path | str,
    *,
    concurrency: int = 16,
    limit: int | None = None,
    progress: bool = True,
    client: LLMClient | None = None,
    settings: GenerationSettings | Mapping[str, Any] | None = None,
    judge_config: Any = None,
    prompts: Mapping[str, str] | Sequence[str] | None = None,
    knowledge_base: str | None = None,
    retry_errors: bool = False,
    sample_seed: int = 0,
    bootstrap: int = 1000,
    seed: int = 0,
    extra: Mapping[str, Any] | None = None,
    cross_check: CrossChecker | None = None,
) -> RunResult:
    """Judge every case of `dataset` with `method`, resumably, and score the run.

    Args:
        method: the judging method (`privacy_ci.judging.Method`); its `identity()`
            gives the defaults of `client`, `settings`, `judge_config`, `prompts`
            and `knowledge_base`.
        dataset: a `Dataset`, or a name for `load_dataset`.
        out_dir: the run folder (created; an existing run there is resumed).
        concurrency: cases judged at once.
        limit: judge a stratified sample of this many cases
            (``dataset.sample(limit, sample_seed)``); None for all.
        progress: show a progress bar on stderr.
        client: the LLM client: its backend (provider, model, base URL) goes into the
            identity and its retries into the progress bar; default the method's.
        settings: the generation settings (identity); default the method's.
        judge_config: the pipeline configuration (a dataclass or mapping: k, retriever,
            constrained decoding ...; identity); default the method's.
        prompts: prompt names or name -> sha256 (identity); default the method's.
        knowledge_base: the knowledge base's content hash (identity); default the
            method's.
        retry_errors: on resume, judge again the cases whose record has an error
            (a model call that failed after its retries); their old records are
            removed first.
        sample_seed: the seed of the `limit` sample.
        bootstrap / seed: macro-F1 bootstrap settings.
        extra: more JSON-ready facts for the manifest (e.g. the LLM configuration).
        cross_check: run the reasoner beside the method: each record gets a
            ``cross_check`` entry, the metrics a ``cross_check`` block, and the
            identity the checker's (a run with it is another run than one without).

    Returns:
        The `RunResult`.

    Raises:
        RunMismatch: `out_dir` holds a run with a different identity.
        PrivacyCIError: the records file is damaged.
        PrivacyCIError: `concurrency` or `limit` below 1.
    """
    if concurrency < 1:
        raise PrivacyCIError(f"concurrency must be at least 1, not {concurrency}")
    if isinstance(dataset, str):
        dataset = load_dataset(dataset)
    selected = _select(dataset, limit, sample_seed)
    cases = list(selected.cases)
    own = method.identity()
    client = client if client is not None else own.client
    if settings is None:
        settings = own.settings
    if judge_config is None:
        judge_config = own.config
    generation = _settings_dict(settings)
    judging = _settings_dict(judge_config)
    identity = _identity(
        selected,
        cases,
        method,
        _model_info(client),
        None
        if generation is None and judging is None
        else {"generation": generation, "judge": judging},
        _prompt_hashes(own.prompts, prompts),
        knowledge_base if knowledge_base is not None else own.knowledge_base,
        None if cross_check is None else cross_check.identity(),
    )
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    manifest_path = out / MANIFEST_FILE
    records_path = out / RECORDS_FILE
    manifest: dict[str, Any]
    if manifest_path.exists():
        try:
            manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise PrivacyCIError(f"{manifest_path}: not a readable run manifest ({exc})") from None
        old = manifest.get("identity")
        if old != identity:
            diffs = differences(old or {}, identity)
            raise RunMismatch(
                f"refusing to resume {out}: it holds a different run "
                f"({'; '.join(diffs[:8])}{'; ...' if len(diffs) > 8 else ''}). "
                "Use another output folder, or delete this one to start over."
            )
    elif records_path.exists() and records_path.stat().st_size > 0:
        raise RunMismatch(
            f"refusing to write into {out}: it has {RECORDS_FILE} but no {MANIFEST_FILE}, so "
            "what produced those records is unknown. Use another output folder."
        )
    else:
        manifest = {
            "manifest_version": MANIFEST_VERSION,
            "identity": identity,
            "dataset": {
                **identity["dataset"],
                "description": selected.protocol.description,
                "classes": list(selected.protocol.classes),
                "source": selected.protocol.source,
                "paper": selected.protocol.paper,
            },
            "method": method.name,
            "model": identity["model"],
            "settings": identity["settings"],
            "prompts": identity["prompts"],
            "knowledge_base": identity["knowledge_base"],
            "concurrency": concurrency,
            "code": code_version(),
            "started_at": now_iso(),
            "ended_at": None,
            "status": "running",
            "sessions": [],
        }
        if extra:
            manifest["extra"] = dict(extra)

    read = resume_records(records_path)
    kept = read.records
    ids = {c.id for c in cases}
    seen: set[str] = set()
    for rec in kept:
        cid = rec["case_id"]
        if cid not in ids:
            raise RunMismatch(f"{records_path}: case {cid!r} is not one of this run's cases")
        if cid in seen:
            raise PrivacyCIError(f"{records_path}: case {cid!r} is recorded twice")
        seen.add(cid)
    if retry_errors and any(r.get("error") for r in kept):
        kept = [r for r in kept if not r.get("error")]
        _rewrite_records(records_path, kept)
    done = {r["case_id"] for r in kept}
    pending = [(i, c) for i, c in enumerate(cases) if c.id not in done]

    session: dict[str, Any] = {
        "started_at": now_iso(),
        "ended_at": None,
        "resumed": len(done),
        "pending": len(pending),
        "discarded_bytes": read.discarded,
        "concurrency": concurrency,
        "code": code_version(),
    }
    manifest["sessions"].append(session)
    manifest["status"] = "running"
    write_json_atomic(manifest_path, manifest)

    bar = _Progress(progress, len(cases), len(done), f"{method.name} on {selected.name}")
    hooked = client is not None
    previous_hook: Callable[..., None] | None = None
    usage_before = client.usage.as_dict() if client is not None else None
    if client is not None:
        previous_hook = client.on_retry

        def hook(attempt: int, error: Any, delay: float) -> None:
            bar.retry()
            if previous_hook is not None:
                previous_hook(attempt, error, delay)

        client.on_retry = hook
    model_info = identity["model"] or {}
    fallback_backend = (
        f"{model_info.get('provider')}:{model_info.get('model')}" if model_info else ""
    )
    writer = RecordWriter(records_path)
    semaphore = asyncio.Semaphore(concurrency)
    new_records: list[dict[str, Any]] = []
    start = time.perf_counter()

    async def judge(index: int, case: Case) -> None:
        async with semaphore:
            t0 = time.perf_counter()
            try:
                judgment = await method.judge(case_event(case))
            except Exception as exc:  # a bug in a method must not lose the other cases
                judgment = Judgment(
                    method=method.name,
                    verdict=None,
                    backend=fallback_backend,
                    error=f"{type(exc).__name__}: {exc} (raised by the method)",
                )
            elapsed = time.perf_counter() - t0
            checked = None
            if cross_check is not None:  # not in elapsed_s: that is the method's time
                checked = await cross_check.check(case_event(case), judgment.verdict)
        # the slot is free again while the record goes to disk
        record = _record(case, judgment, selected, elapsed, index)
        if checked is not None:
            record["cross_check"] = checked.as_dict()
        await writer.write(record)
        new_records.append(record)
        bar.finished(record, sum(s.retries for s in judgment.steps), hooked)

    try:
        with bar.running():
            await asyncio.gather(*(judge(i, c) for i, c in pending))
    finally:
        writer.close()
        if client is not None:
            client.on_retry = previous_hook
    wall = time.perf_counter() - start

    records = read_records(records_path).records
    order = {c.id: i for i, c in enumerate(cases)}
    records.sort(key=lambda r: order[r["case_id"]])
    metrics = compute_metrics(records, selected, cases, bootstrap=bootstrap, seed=seed)
    metrics["run"] = str(out)
    metrics["model"] = identity["model"]
    if not metrics["backend"] and fallback_backend:
        metrics["backend"] = fallback_backend
        metrics["test_double"] = metrics["test_double"] or is_test_double(fallback_backend)
    write_json_atomic(out / METRICS_FILE, metrics)

    session["ended_at"] = now_iso()
    session["judged"] = len(new_records)
    session["wall_s"] = round(wall, 3)
    if client is not None and usage_before is not None:
        session["usage"] = _usage_delta(usage_before, client.usage.as_dict())
    manifest["ended_at"] = session["ended_at"]
    manifest["status"] = "complete" if metrics["complete"] else "incomplete"
    manifest["usage"] = _sum_usage(manifest["sessions"], metrics["usage"])
    write_json_atomic(manifest_path, manifest)
    return RunResult(
        out_dir=out,
        manifest=manifest,
        metrics=metrics,
        records=records,
        resumed=len(done),
        judged=len(new_records),
        discarded_bytes=read.discarded,
        wall_s=wall,
        retries=bar.retries,
    )


def _rewrite_records(path: Path, records: Sequence[Mapping[str, Any]]) -> None:
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    os.fchmod(fd, 0o644)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        for rec in records:
            fh.write(json.dumps(rec, ensure_ascii=False, default=str) + "\n")
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    fsync_dir(path.parent)


_USAGE_KEYS = (
    "calls",
    "cache_hits",
    "failures",
    "retries",
    "prompt_tokens",
    "completion_tokens",
)


def _usage_delta(before: Mapping[str, Any], after: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {k: int(after.get(k, 0)) - int(before.get(k, 0)) for k in _USAGE_KEYS}
    cost_a, cost_b = after.get("cost_usd"), before.get("cost_usd")
    out["cost_usd"] = None if cost_a is None else round(cost_a - (cost_b or 0.0), 6)
    return out


def _sum_usage(
    sessions: Sequence[Mapping[str, Any]], from_records: Mapping[str, Any]
) -> dict[str, Any]:
    client: dict[str, Any] = {k: 0 for k in _USAGE_KEYS}
    cost: float | None = None
    counted = 0
    for s in sessions:
        usage = s.get("usage")
        if not usage:
            continue
        counted += 1
        for k in _USAGE_KEYS:
            client[k] += int(usage.get(k, 0))
        if usage.get("cost_usd") is not None:
            cost = (cost or 0.0) + float(usage["cost_usd"])
    client["cost_usd"] = None if cost is None else round(cost, 6)
    return {
        "client": client if counted else None,
        "client_note": "summed over finished sessions (a killed session's calls are not counted)",
        "records": dict(from_records),
    }


def run_eval_sync(
    method: Method, dataset: Dataset | str, out_dir: Path | str, **kwargs: Any
) -> RunResult:
    """`run_eval` for synchronous callers (runs its own event loop).

    Args:
        method / dataset / out_dir / kwargs: as for `run_eval`.

    Returns:
        The `RunResult`.
    """
    return asyncio.run(run_eval(method, dataset, out_dir, **kwargs))
