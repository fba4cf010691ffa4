"""The outputs that must not move while the code is reorganised (issue 12).

Each output is what a user gets from a command's ``--json`` (or the public API,
where the CLI cannot select a test double): the Table VI flow table, ``kb stats``
of the three regulations, ``kb agreement``, ``retrieval eval`` on the real cases
with every retriever, ``label report`` on a deterministic scripted labeling run,
and ``eval`` of every judging method with a deterministic scripted backend on a
fixed sample (metrics, per-case verdicts and the sha256 of every prompt sent, so
a prompt that changes by one character shows).

Timings, the data directory's path and temporary folders are normalised away.

Record (only when a change of output is intended, in a commit that says why)::

    PRIVACY_CI_DATA=../shared/data .venv/bin/python -m tests.golden.outputs --record [NAME ...]
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import os
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

HERE = Path(__file__).resolve().parent
TIMING_KEYS = frozenset(
    {
        "wall_s",
        "latency_s",
        "elapsed_s",
        "seconds",
        "started_at",
        "finished_at",
        "created_at",
        "generated_at",
        "updated_at",
        "at",
        "code_version",
        "queue_s",
        "load_s",
        "latency_ms",
        "median_ms",
        "p50_ms",
        "p99_ms",
        "mean_ms",
    }
)


def normalise(value: Any, replace: dict[str, str]) -> Any:
    """`value` with timing keys dropped and machine paths replaced by placeholders."""
    if isinstance(value, dict):
        return {k: normalise(v, replace) for k, v in value.items() if k not in TIMING_KEYS}
    if isinstance(value, list):
        return [normalise(v, replace) for v in value]
    if isinstance(value, str):
        for old, new in replace.items():
            value = value.replace(old, new)
        return value
    if isinstance(value, float):
        return round(value, 9)
    return value


def _data_dir() -> Path:
    from privacy_ci.data import data_dir

    return Path(data_dir()).resolve()


def _data_dir_spellings() -> dict[str, str]:
    """Every way the data folder may be spelled in an output (as given, absolute,
    resolved through links), longest first so one never half-replaces another."""
    from privacy_ci.data import data_dir

    given = Path(data_dir())
    spellings = {str(given), os.path.abspath(given), str(given.resolve())}
    return {s: "$DATA" for s in sorted(spellings, key=len, reverse=True) if s}


def _cli_json(*args: str) -> Any:
    from privacy_ci.cli.main import app

    result = CliRunner().invoke(app, [*args, "--json"])
    if result.exit_code != 0:
        raise RuntimeError(
            f"privacy-ci {' '.join(args)} exited {result.exit_code}: {result.output}"
        )
    return json.loads(result.stdout)


# -- the outputs ----------------------------------------------------------------------------
def conductor_flows() -> Any:
    return _cli_json("conductor", "flows")


def kb_stats() -> Any:
    return {r: _cli_json("kb", "stats", "-r", r) for r in ("hipaa", "gdpr", "ai_act")}


def kb_agreement() -> Any:
    return _cli_json("kb", "agreement")


def retrieval_eval_real() -> Any:
    return _cli_json("retrieval", "eval", "--dataset", "real")


@functools.cache
def _riverside() -> Any:
    from privacy_ci.conductor import load_corpus

    return load_corpus()


def _label_answer(messages: Sequence[Any], settings: Any) -> str:
    """A deterministic 'labeler': the authored label, perturbed by a hash of the
    document and the draw's seed (extra roles, other tiers, dropped roles, junk)."""
    from privacy_ci.labeling import ProposedLabel
    from tests.labeling import doc_id_of

    doc_id = doc_id_of(messages)
    label = ProposedLabel.of(_riverside().label(doc_id)).as_dict()
    h = int(hashlib.sha256(f"{doc_id}:{settings.seed}".encode()).hexdigest(), 16)
    if h % 11 == 0:
        return "{not json"
    roles = list(label["permitted_receiver_roles"])
    if h % 5 == 0 and "Nurse" not in roles:
        roles.append("Nurse")
    if h % 7 == 0 and len(roles) > 1:
        roles = roles[:-1]
    label["permitted_receiver_roles"] = roles
    if h % 13 == 0:
        label["sensitivity_tier"] = "internal"
    if h % 3 == 0:
        label["extra_sensitive"] = not label["extra_sensitive"]
    return json.dumps(label)


def label_report() -> Any:
    from privacy_ci.labeling import Labeler, run_labeling
    from privacy_ci.llm import LLMClient
    from privacy_ci.llm.testing import ScriptedTestBackend

    async def no_sleep(_: float) -> None:
        return None

    with tempfile.TemporaryDirectory() as tmp:
        client = LLMClient(
            ScriptedTestBackend(_label_answer, model="golden-labeler"),
            cache=None,
            sleep=no_sleep,
        )
        run_dir = Path(tmp) / "run"
        asyncio.run(run_labeling(Labeler(client, _riverside()), run_dir, draws=3))
        out = _cli_json("label", "report", str(run_dir))
        return normalise(out, {tmp: "$TMP"})


def _judge_answer(messages: Sequence[Any], settings: Any) -> str:
    """Deterministic answers to every judging prompt, varied by a hash of the prompt."""
    prompt = messages[-1].content
    h = int(hashlib.sha256(prompt.encode()).hexdigest(), 16)
    if settings.json_schema is not None:
        return json.dumps(_instance(settings.json_schema, h, prompt))
    if prompt.startswith("Given a regulation"):
        return ["Yes. The regulation is relevant.", "No."][h % 2]
    if prompt.startswith("I will provide you with an event"):
        return "A covered entity discloses protected health information to a health plan."
    if prompt.startswith("Read the event described below"):
        return ["1. 164.502\n2. 164.506", "164.512(e)", "None"][h % 3]
    return ["Choice: A. Prohibited", "Choice: B. Permitted", "Choice: C. Not related"][h % 3]


def _instance(schema: dict[str, Any], h: int, text: str) -> Any:
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        options = schema["enum"]
        return options[h % len(options)]
    kind = schema.get("type", "object")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object":
        props: dict[str, Any] = schema.get("properties", {})
        return {name: _instance(sub, h >> 3, text[:40]) for name, sub in props.items()}
    if kind == "array":
        return [_instance(schema.get("items", {"type": "string"}), h, text)]
    if kind == "integer":
        return h % 100
    if kind == "boolean":
        return bool(h % 2)
    if kind == "null":
        return None
    return text[:40] or "x"


GOLDEN_METHODS = (
    "dp",
    "cot-auto",
    "cot-manual",
    "agent-id",
    "bm25-content",
    "ci-es-content",
    "flow-judge",
)
"""The methods recorded before the renovation (the papers' six and the flow judge);
methods added since are tested by their own tests, not pinned here."""


def eval_scripted() -> Any:
    from privacy_ci.cases import load_dataset
    from privacy_ci.evaluation import run_eval
    from privacy_ci.judging import build_method
    from privacy_ci.llm import LLMClient
    from privacy_ci.llm.testing import ScriptedTestBackend

    dataset = load_dataset("real")
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in GOLDEN_METHODS:
            ds = load_dataset("privaci-hipaa") if name == "flow-judge" else dataset
            client = LLMClient(ScriptedTestBackend(_judge_answer, model="golden"), cache=None)
            method = build_method(name, client)
            result = asyncio.run(
                run_eval(method, ds, Path(tmp) / name, limit=12, progress=False, bootstrap=200)
            )
            cases = []
            for record in result.records:
                steps = record.get("steps") or []
                cases.append(
                    {
                        "case": record.get("case_id"),
                        "verdict": record.get("verdict"),
                        "cited_ids": record.get("cited_ids"),
                        "prompts": [
                            hashlib.sha256(
                                json.dumps(s.get("prompt"), sort_keys=True).encode()
                            ).hexdigest()[:16]
                            for s in steps
                        ],
                    }
                )
            out[name] = {
                "metrics": normalise(result.metrics, {tmp: "$TMP"}),
                "cases": cases,
            }
    return out


OUTPUTS: dict[str, Callable[[], Any]] = {
    "conductor_flows": conductor_flows,
    "kb_stats": kb_stats,
    "kb_agreement": kb_agreement,
    "retrieval_eval_real": retrieval_eval_real,
    "label_report": label_report,
    "eval_scripted": eval_scripted,
}


def compute(name: str) -> Any:
    """The named output now, normalised (timings, data path, temporary folders)."""
    return normalise(OUTPUTS[name](), _data_dir_spellings())


def path(name: str) -> Path:
    return HERE / f"{name}.json"


def record(names: Sequence[str]) -> None:
    for name in names:
        value = compute(name)
        path(name).write_text(json.dumps(value, indent=1, sort_keys=True) + "\n")
        print(f"recorded {path(name).name}", file=sys.stderr)


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--record"]
    if "--record" not in sys.argv[1:]:
        raise SystemExit("usage: python -m tests.golden.outputs --record [NAME ...]")
    if not os.environ.get("PRIVACY_CI_DATA"):
        raise SystemExit("set PRIVACY_CI_DATA (the outputs read the real data)")
    unknown = [a for a in args if a not in OUTPUTS]
    if unknown:
        raise SystemExit(f"unknown output(s) {unknown}; known: {', '.join(OUTPUTS)}")
    record(args or list(OUTPUTS))
