"""`JudgeConfig`: how the judging pipelines run (everything but the model and the KB)."""

from __future__ import annotations

from dataclasses import dataclass

from privacy_ci.errors import PrivacyCIError

__all__ = ["JudgeConfig"]


@dataclass(frozen=True, slots=True)
class JudgeConfig:
    """How the pipelines run (everything but the model and the knowledge base).

    Args:
        constrain: constrain answers with grammars / length limits (see the module
            docstring). None (auto): on when the backend asks for it
            (`privacy_ci.llm.Capabilities.constrain_by_default`: the embedded model).
        k: how many retrieved regulations the law filter examines (BM25-content,
            CI-ES-content). Default 5: the paper does not print its k; 5 is the
            average number of gold references of a real case rounded up (4.64,
            Table 1), and it bounds the cost at five filter calls per case.
        retriever: the BM25-content retriever, a name of the retriever registry
            (`privacy_ci.retrieval.build_retriever`): ``bm25-paper`` (default, the
            paper-faithful BM25 of section 4.2), ``bm25-plus`` (our improved BM25),
            ``dense``, ``roles``, ``hybrid`` ...
        ci_retriever: the CI-ES-content retriever (default ``roles``, the
            role-keyword retriever: the paper's "matched roles as keywords").
        reference_chars: each regulation shown to the filter and the decision is
            ``ID: text`` with text = the node's full specification, cut to at most
            this many characters (the head, with the part and section headings, and
            the tail, the node's own paragraph; 1500 characters are ~375 tokens, so
            five references fit an 8k context with a long case).
        generated_num: Agent-ID's ``<generated_num>``: how many ids the model may
            propose; at most this many verified ids go to the filter.
        short_max_tokens: the completion limit of free-text steps when constrained.
        ci_field_chars: the ``maxLength`` of each CI field when constrained.
        ci_max_tokens: the completion limit of the CI extraction when constrained.
        regulation: the knowledge base loaded when none is given.
        kb: a knowledge base folder built by ``privacy-ci kb build`` to load instead of
            the regulation's published one (its regulation must be `regulation`).
        no_reference: the ``<reference_regulations>`` text when no regulation was kept.
    """

    constrain: bool | None = None
    k: int = 5
    retriever: str = "bm25-paper"
    ci_retriever: str = "roles"
    reference_chars: int = 1500
    generated_num: int = 5
    short_max_tokens: int = 64
    ci_field_chars: int = 32
    ci_max_tokens: int = 256
    regulation: str = "hipaa"
    no_reference: str = "None"
    kb: str | None = None

    def __post_init__(self) -> None:
        positive = (
            "k",
            "reference_chars",
            "generated_num",
            "short_max_tokens",
            "ci_field_chars",
            "ci_max_tokens",
        )
        for name in positive:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise PrivacyCIError(f"judge config: {name} must be a positive integer")
        from privacy_ci.retrieval import retriever_names

        for name in ("retriever", "ci_retriever"):
            if getattr(self, name) not in retriever_names():
                raise PrivacyCIError(
                    f"judge config: unknown {name} {getattr(self, name)!r}; "
                    f"expected one of {', '.join(retriever_names())}"
                )
        if self.reference_chars < 40:
            raise PrivacyCIError("judge config: reference_chars must be at least 40")
