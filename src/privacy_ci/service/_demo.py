"""`demo_assistant`: the whole Conductor path on the Riverside corpus, in one screen.

Loads Riverside into a temporary SQLite store, mints and verifies a token for a
doctor, asks the assistant a question (embedded model by default), and prints the
answer with its citations, the admitted and withheld documents with their rules,
and this request's audit records with the verified hash chain.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from privacy_ci.assistant import Answer, Assistant, DenialMode
from privacy_ci.llm import GenerationSettings, LLMClient
from privacy_ci.service._auth import generate_key, issue_token, requester_from_claims, verify_token

DEMO_AGENT = "D01"
DEMO_QUESTION = "What did Aiko Tanaka's lipid panel show?"


def _client_or_reason(client: LLMClient | None) -> tuple[LLMClient | None, str | None]:
    if client is not None:
        return client, None
    from privacy_ci.llm import load_llm_config, make_client, unavailable_reason

    config = load_llm_config()
    reason = unavailable_reason(config)
    return (None, reason) if reason else (make_client(config), None)


def demo_assistant(
    out: Console | None = None,
    *,
    client: LLMClient | None = None,
    question: str = DEMO_QUESTION,
    agent_id: str = DEMO_AGENT,
    k: int = 2,
) -> dict[str, Any]:
    """Run the demo and print it.

    Args:
        out: where to print (default: a new rich console).
        client: the model client (default: the configured model, the embedded
            SmolLM2 unless privacy-ci.toml says otherwise).
        question: what the doctor asks.
        agent_id: the Riverside agent who asks.
        k: documents to retrieve.

    Returns:
        What was shown, as JSON-ready data (answer, admitted, withheld, audit).
    """
    from privacy_ci.conductor import load_corpus
    from privacy_ci.store import DocumentStore, load_corpus_into, retrieve_for

    console = out or Console()
    corpus = load_corpus()
    agent = corpus.agent(agent_id)
    with tempfile.TemporaryDirectory(prefix="privacy-ci-demo-") as tmp:
        store = DocumentStore(Path(tmp) / "riverside.db")
        try:
            load_corpus_into(store, corpus)
            key = generate_key()
            token = issue_token(key, agent.id, agent.role, agent.context, ttl=300)
            claims = verify_token(token, key)
            requester = requester_from_claims(store.snapshot(), claims)
            console.rule("Privacy Conductor: gated retrieval and the assistant")
            console.print(
                f"Store: temporary SQLite with {len(corpus.labels)} Riverside documents"
                f" (approved labels). Token verified for {agent.name} ({agent.id}),"
                f" {claims.role} in the {claims.context} context; assignments from the store:"
                f" {', '.join(sorted(requester.assignments)) or 'none'}.",
                highlight=False,
            )
            console.print(f"[bold]Question:[/] {question}", highlight=False)
            retrieval = retrieve_for(store, requester, question, k, action="ask")
            model_client, reason = _client_or_reason(client)
            answer: Answer | None = None
            if model_client is not None:
                assistant = Assistant(
                    model_client,
                    denial_mode=DenialMode.EXPLAIN,
                    settings=GenerationSettings(max_tokens=120),
                    max_doc_chars=700,
                )
                answer = assistant.answer_sync(question, retrieval)
            _print_answer(console, answer, reason)
            _print_documents(console, retrieval)
            records = [r for r in store.audit.records() if r.request_id == retrieval.request_id]
            report = store.audit.verify()
            _print_audit(console, records, report.ok, report.records, report.head_hash)
            return {
                "answer": answer.as_dict() if answer else None,
                "retrieval": retrieval.as_dict(withheld_ids=True),
                "audit": [r.as_dict() for r in records],
                "audit_ok": report.ok,
            }
        finally:
            store.close()


def _print_answer(console: Console, answer: Answer | None, reason: str | None) -> None:
    if answer is None:
        console.print(f"[yellow]No model available ({reason}); showing the retrieval only.[/]")
        return
    console.print(
        f"\n[bold]Answer[/] ({answer.provider}:{answer.model}, denial mode"
        f" {answer.denial_mode.value}):",
        highlight=False,
    )
    console.print(
        answer.text.strip() or f"(no answer: {answer.error})", highlight=False, markup=False
    )
    cited = ", ".join(answer.cited) if answer.cited else f"none ({answer.note})"
    console.print(f"[bold]Cited admitted documents:[/] {cited}", highlight=False)
    if answer.rejected_citations:
        console.print(
            "[bold]Citations dropped (not admitted):[/] " + ", ".join(answer.rejected_citations),
            highlight=False,
        )


def _print_documents(console: Console, retrieval: Any) -> None:
    table = Table(title=f"Admitted (ranked within the {retrieval.authorized_count} authorized)")
    for col in ("document", "title", "BM25", "decision"):
        table.add_column(col)
    for doc, flow in zip(retrieval.admitted, retrieval.decisions, strict=False):
        table.add_row(doc.doc_id, doc.title, f"{doc.score:.3f}", flow.decision.rule.key)
    console.print(table)
    rules = ", ".join(f"{rule} x{n}" for rule, n in retrieval.withheld_rules().items())
    console.print(
        f"[bold]Withheld:[/] {retrieval.withheld_count} documents ({rules});"
        " never ranked, never fetched. For example:",
        highlight=False,
    )
    console.print(
        "  (the operator's view, as with serve --explain-denials: a requester of the"
        " service learns only that a document is not available, never a count or a rule)",
        highlight=False,
    )
    shown: set[str] = set()
    for w in retrieval.withheld:
        if w.rule.key not in shown:
            shown.add(w.rule.key)
            console.print(f"  {w.doc_id}: {w.rule.key} - {w.rule.explanation}", highlight=False)


def _print_audit(console: Console, records: list[Any], ok: bool, total: int, head: str) -> None:
    table = Table(title="Audit records of this request (no content, no titles)")
    for col in ("seq", "document", "decision", "rule", "label v", "hash"):
        table.add_column(col)
    for r in records:
        rule = r.rule or ""
        if r.decision == "scope":
            d = json.loads(r.detail)
            rule = f"{d['authorized']} authorized, {d['denied'] + d['not_approved']} withheld"
        version = "" if r.label_version is None else str(r.label_version)
        table.add_row(str(r.seq), r.doc_id or "(scope)", r.decision, rule, version, r.hash[:12])
    console.print(table)
    verdict = "[green]verified[/]" if ok else "[red]BROKEN[/]"
    console.print(f"Audit chain: {verdict} over {total} records; head {head[:16]}...")
