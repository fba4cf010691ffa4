"""Resumable model runs: ask a model about each item once, into a run folder.

A run folder holds ``manifest.json`` (the run's identity and one entry per session,
with the session's LLM usage) and ``records.jsonl`` (one line per finished item: the
parsed answer or an explicit failure, with every attempt's raw output), appended and
fsynced as each item finishes, so a killed run resumes without asking again or losing
a finished item. A folder holding another run (a different identity) is refused.

Shared by the knowledge base build (`privacy_ci.annotation`) and the labeling
experiment (`privacy_ci.labeling`): opening a folder, asking about the items still to
do, the attempts loop with its bounded re-asks, and reading a folder back.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

from privacy_ci._durable import (
    RecordWriter,
    code_version,
    differences,
    now_iso,
    read_json,
    read_records,
    resume_records,
    write_json_atomic,
)
from privacy_ci.errors import PrivacyCIError
from privacy_ci.llm import Completion, ContextOverflowError, GenerationSettings, LLMClient, Message

MANIFEST_FILE = "manifest.json"
RECORDS_FILE = "records.jsonl"
RECORD_KEY = "key"

T = TypeVar("T")
Item = TypeVar("Item")


class Record(Protocol):
    """A finished item's record: one line of ``records.jsonl``."""

    def as_dict(self) -> dict[str, Any]: ...


R = TypeVar("R", bound=Record)


@dataclass
class RunFolder:
    """A run folder opened for a session (`open_run_folder`).

    Args:
        folder: where it lives.
        manifest: the manifest as written (this session appended).
        session: this session's entry in ``manifest["sessions"]``.
        records: the finished records already there, in file order.
    """

    folder: Path
    manifest: dict[str, Any]
    session: dict[str, Any]
    records: list[dict[str, Any]]

    @property
    def manifest_path(self) -> Path:
        return self.folder / MANIFEST_FILE

    @property
    def records_path(self) -> Path:
        return self.folder / RECORDS_FILE


def open_run_folder(
    out_dir: Path | str,
    identity: Mapping[str, Any],
    *,
    fresh: Callable[[], dict[str, Any]],
    mismatch: Callable[[Mapping[str, Any], list[str]], PrivacyCIError],
) -> RunFolder:
    """Create or resume a run folder and start a session in its manifest.

    A last record cut short by a kill is cut off the records file (its item is asked
    about again).

    Args:
        out_dir: the folder (created).
        identity: the run's identity; an existing manifest must hold the same.
        fresh: the new manifest when there is none (with ``identity`` and ``sessions``).
        mismatch: the error for a folder holding another run, from the old identity and
            the differences (`differences`, old first).

    Raises:
        PrivacyCIError: the manifest is not JSON, or (`mismatch`) another run's.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    manifest_path = out / MANIFEST_FILE
    if manifest_path.exists():
        manifest = read_json(manifest_path, f"{manifest_path}: no such file")
        old = manifest.get("identity", {})
        if manifest.get("identity") != identity:
            raise mismatch(old, differences(old, identity))
    else:
        manifest = fresh()
    session: dict[str, Any] = {"started_at": now_iso(), "code": code_version()}
    manifest["sessions"].append(session)
    write_json_atomic(manifest_path, manifest)
    read = resume_records(out / RECORDS_FILE, key=RECORD_KEY)
    return RunFolder(out, manifest, session, read.records)


def usage_delta(before: Mapping[str, Any], after: Mapping[str, Any]) -> dict[str, Any]:
    """The client's usage during a session: every numeric field of `after` less `before`."""
    return {
        k: after[k] - before.get(k, 0)
        for k in after
        if isinstance(after[k], int | float) and not isinstance(after[k], bool)
    }


async def ask_each(
    run: RunFolder,
    client: LLMClient,
    items: Sequence[Item],
    ask: Callable[[Item], Awaitable[R]],
    *,
    concurrency: int,
    counted: str,
    on_record: Callable[[R], object] | None = None,
) -> None:
    """Ask about every item, `concurrency` at once, appending each record as it finishes.

    However it ends (finished, failed or cancelled), the session records its end, how
    many items it asked about (under `counted`) and the client's usage, in the manifest.

    Args:
        run: the open folder.
        client: the client `ask` uses (its usage is recorded).
        items: what to ask about.
        ask: one item's record (a failure is a record, not an exception).
        concurrency: items in flight.
        counted: the session's key for the number of items.
        on_record: called with each new record (progress).
    """
    usage_before = client.usage.as_dict()
    semaphore = asyncio.Semaphore(concurrency)
    writer = RecordWriter(run.records_path)

    async def one(item: Item) -> None:
        async with semaphore:
            rec = await ask(item)
        await writer.write(rec.as_dict())
        if on_record is not None:
            on_record(rec)

    try:
        await asyncio.gather(*(one(item) for item in items))
    finally:
        writer.close()
        after = client.usage.as_dict()
        run.session["ended_at"] = now_iso()
        run.session[counted] = len(items)
        run.session["usage"] = usage_delta(usage_before, after)
        write_json_atomic(run.manifest_path, run.manifest)


def read_run_folder(
    folder: Path | str,
    *,
    experiment: str,
    what: str,
    command: str,
    parse: Callable[[dict[str, Any]], R],
    key: Callable[[R], str],
) -> tuple[dict[str, Any], dict[str, R]]:
    """Read a run folder (finished or not): its manifest and its records by `key`.

    A later record with the same key wins (a failure asked about again).

    Args:
        folder: the folder.
        experiment: what the manifest's ``identity.experiment`` must be.
        what: the run in words (``a labeling run``), for the errors.
        command: the command that makes one, for the error of a folder without one.
        parse: a record from its line (KeyError, TypeError, ValueError: damaged).
        key: a record's identity.

    Raises:
        PrivacyCIError: no manifest, another experiment's, or a damaged records file.
    """
    folder = Path(folder)
    manifest = read_json(
        folder / MANIFEST_FILE, f"{folder}: not {what} (no {MANIFEST_FILE}; `{command}` makes one)"
    )
    if manifest.get("identity", {}).get("experiment") != experiment:
        raise PrivacyCIError(f"{folder}: the manifest is not {what}'s")
    records: dict[str, R] = {}
    for raw in read_records(folder / RECORDS_FILE, key=RECORD_KEY).records:
        try:
            rec = parse(raw)
        except (KeyError, TypeError, ValueError) as exc:
            raise PrivacyCIError(
                f"{folder / RECORDS_FILE}: record {raw.get(RECORD_KEY)!r} is damaged ({exc})"
            ) from None
        records[key(rec)] = rec
    return manifest, records


# -- one item's attempts ------------------------------------------------------------------
@dataclass(frozen=True)
class Answer(Generic[T]):
    """What `ask_with_reasks` got: a parsed value, or why not, and every attempt."""

    value: T | None
    failure: str | None
    attempts: tuple[dict[str, Any], ...]


def attempt_record(completion: Completion) -> dict[str, Any]:
    """One model call as a record keeps it: raw text, errors, tokens, latency, cache."""
    return {
        "text": completion.text,
        "parse_error": completion.parse_error,
        "error": completion.error,
        "finish_reason": completion.finish_reason.value,
        "prompt_tokens": completion.prompt_tokens,
        "completion_tokens": completion.completion_tokens,
        "latency_s": round(completion.latency_s, 4),
        "cached": completion.cached,
        "retries": completion.retries,
    }


async def ask_with_reasks(
    client: LLMClient,
    messages: Sequence[Message],
    settings: GenerationSettings,
    *,
    draw: int,
    parse_retries: int,
    use_cache: bool,
    parse: Callable[[Completion], T],
    output_error: type[Exception],
    unparsed: Callable[[int, Exception], str],
) -> Answer[T]:
    """Ask, re-asking up to `parse_retries` times while the answer does not parse.

    Draw ``d``'s attempt ``a`` is sample ``(d - 1) * (parse_retries + 1) + a`` of the
    client, so every draw and every re-ask is its own call and cache entry. A model
    call that fails (after the client's own retries) or a prompt over the context ends
    the draw with a failure; it is never raised.

    Args:
        client / messages / settings: the call.
        draw: the draw number (from 1).
        parse_retries: re-asks after an answer that does not parse.
        use_cache: read the client's cache.
        parse: the value from a completion; raises `output_error` when it does not fit.
        output_error: the exception `parse` raises for an answer that does not fit.
        unparsed: the failure after attempt number ``n`` (from 1) did not parse.
    """
    attempts: list[dict[str, Any]] = []
    failure = "no attempt"
    for attempt in range(parse_retries + 1):
        sample = (draw - 1) * (parse_retries + 1) + attempt
        try:
            completion = await client.complete(
                messages, settings, sample=sample, use_cache=use_cache
            )
        except ContextOverflowError as exc:  # no re-ask can make the prompt fit
            failure = f"model call failed: {exc}"
            break
        record = attempt_record(completion)
        attempts.append(record)
        if not completion.ok:  # the call failed after the client's own retries
            failure = f"model call failed: {completion.error}"
            break
        try:
            value = parse(completion)
        except output_error as exc:
            failure = unparsed(attempt + 1, exc)
            record["parse_error"] = str(exc)
            continue
        return Answer(value, None, tuple(attempts))
    return Answer(None, failure, tuple(attempts))
