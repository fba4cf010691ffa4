"""Agent-ID's step (Table 8): the model proposes regulation ids, the tree verifies them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from privacy_ci.judging._pipeline import (
    PipelineContext,
    PipelineState,
    call_model,
    free_text_settings,
)
from privacy_ci.judging._prompts import load_prompt
from privacy_ci.llm import gbnf_literal
from privacy_ci.regulations import IdSyntax, syntax_of

if TYPE_CHECKING:
    from privacy_ci.knowledge import KnowledgeBase

__all__ = ["id_list_grammar", "propose_ids"]


def id_list_grammar(count: int, sections: Sequence[str] = ()) -> str:
    """A GBNF grammar for a numbered list of 1..`count` regulation ids.

    Each line is ``<n>. <section><labels>``, e.g. ``1. 164.512(f)(1)``: the section
    is one of ``sections`` (the tree's section or article ids, so a constrained
    model names sections that exist) or, when none are given, any HIPAA-shaped
    section number (``160|162|164.NNN``); up to three paragraph labels follow,
    unconstrained, so an invented paragraph is still caught by `verify_ids`.

    Args:
        count: the most items.
        sections: the allowed section ids (empty: the HIPAA number pattern).

    Returns:
        The grammar.
    """
    if sections:
        section = " | ".join(gbnf_literal(x) for x in dict.fromkeys(sections))
    else:
        section = '("160" | "162" | "164") "." [1-9] [0-9] [0-9] [0-9]?'
    return (
        f"root ::= item{{1,{count}}}\n"
        'item ::= [1-9] ". " section para{0,3} "\\n"\n'
        f"section ::= {section}\n"
        'para ::= "(" [a-z1-9] [a-z0-9]? [a-z0-9]? ")"\n'
    )


def _section_ids(kb: KnowledgeBase) -> list[str]:
    kinds = {"section", "article"}
    return [n.id for n in kb.tree if n.kind.value in kinds and kb.tree.in_tree(n.id)]


async def propose_ids(state: PipelineState, ctx: PipelineContext) -> PipelineState:
    """Agent-ID (Table 8): ask for regulation ids, keep those the tree has.

    At most ``config.generated_num`` verified ids become ``state.candidates``; the
    rejected ones (with reasons) and any over the limit are recorded in the step.

    Args:
        state: the pipeline state.
        ctx: the context.

    Returns:
        The state.
    """
    from privacy_ci.retrieval import verify_ids

    kb = ctx.require_kb()
    n = ctx.config.generated_num
    prompt = load_prompt("agent_id_generate").render(event=state.event.text, generated_num=str(n))
    settings = free_text_settings(ctx)
    if ctx.constrained:
        sections = _section_ids(kb)
        # with no section ids, the grammar falls back to CFR-shaped numbers (HIPAA)
        if sections or syntax_of(kb.regulation) is IdSyntax.CFR:
            grammar = id_list_grammar(n, sections)
            settings = replace(settings, grammar=grammar, json_schema=None, max_tokens=24 * n)
    completion, record = await call_model(ctx, "propose_ids", "agent_id_generate", prompt, settings)
    state.steps.append(record)
    if not completion.ok:
        state.error = completion.error
        return state
    verified = verify_ids(completion.text, kb.tree)
    valid = list(verified.valid)
    state.candidates = valid[:n]
    record.retrieved_ids = list(state.candidates)
    record.parsed = {
        "valid": list(state.candidates),
        "over_limit": valid[n:],
        "rejected": [{"id": r.raw, "reason": r.reason} for r in verified.rejected],
        "coarsened": [list(pair) for pair in verified.coarsened],
    }
    return state
