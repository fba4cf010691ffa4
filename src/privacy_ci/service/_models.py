"""Request and response bodies of the HTTP service (they make its OpenAPI schema)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from privacy_ci.ci import FIELDS, Flow
from privacy_ci.store import MAX_K


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class DecideRequest(_Body):
    """Decide one flow: may this document reach the requester?"""

    doc_id: str = Field(min_length=1, max_length=256, description="The document's id.")


class DecideBatchRequest(_Body):
    """Decide a batch of candidate documents for the requester."""

    doc_ids: list[str] = Field(
        min_length=1, max_length=1000, description="Candidate document ids (1-1000)."
    )


class RetrieveRequest(_Body):
    """Retrieve the best documents the requester may receive for a query."""

    query: str = Field(min_length=1, max_length=4000, description="Ranks documents only.")
    k: int = Field(5, ge=1, le=MAX_K, description=f"How many candidates to rank (1-{MAX_K}).")


class AskRequest(_Body):
    """Ask the assistant; it answers from the documents admitted for the requester."""

    question: str = Field(min_length=1, max_length=4000)
    k: int = Field(3, ge=1, le=20, description="How many documents to retrieve (1-20).")


class JudgeRequest(_Body):
    """Judge an information flow against HIPAA with a Privacy Checklist pipeline.

    The CI fields are the flow's (`privacy_ci.ci.FIELDS`); all optional.
    """

    event: str = Field(
        min_length=1,
        max_length=50_000,
        description="The event or case text (the service may accept less: see its 413).",
    )
    method: str = Field(
        "bm25-content", description="A judging method (GET /v1/methods lists them)."
    )
    sender: str | None = Field(None, max_length=500)
    sender_role: str | None = Field(None, max_length=500)
    recipient: str | None = Field(None, max_length=500)
    recipient_role: str | None = Field(None, max_length=500)
    subject: str | None = Field(None, max_length=500)
    subject_role: str | None = Field(None, max_length=500)
    information_type: str | None = Field(None, max_length=500)
    purpose: str | None = Field(None, max_length=500)
    consent_form: str | None = Field(None, max_length=500)
    facts: dict[str, str] | None = Field(
        None,
        max_length=64,
        description="Facts of the disclosure stated as given (fact -> value; the fact model"
        " is `privacy-ci facts schema`): the ci-reasoner takes them as they are and reads"
        " only the rest; the model methods' prompts do not show them. An unknown fact or"
        " value is a 422 naming it.",
    )

    def flow(self) -> Flow:
        """The request's CI fields as a `Flow` (placeholders cleaned)."""
        return Flow.of(self.model_dump(include=set(FIELDS)))


class MethodOut(BaseModel):
    name: str
    title: str
    steps: list[str]
    needs_kb: bool
    needs_model: bool = Field(True, description="False for a model-free method (ci-reasoner).")


class MethodsResponse(BaseModel):
    methods: list[MethodOut]


class JudgeResponse(BaseModel):
    """The verdict (null when the model's answer could not be parsed, or when the method
    abstains) and its trace."""

    method: str
    verdict: str | None
    cited_ids: list[str]
    rationale: str
    backend: str
    error: str | None
    abstained: bool = Field(
        False, description="The method declined to answer: no verdict, and not a failure."
    )
    steps: list[dict[str, Any]]


class LabelActionRequest(_Body):
    """Revoke a label."""

    note: str = Field("", max_length=2000, description="Why (recorded in the history).")
    version: int | None = Field(
        None, ge=1, description="The label version you saw (refused, 409, if it changed since)."
    )


class VerdictRequest(_Body):
    """Approve or reject a proposal: name the version you reviewed."""

    version: int = Field(
        ge=1,
        description="The label version you reviewed (GET /v1/labels/{doc_id}/review);"
        " refused (409) if the label changed since.",
    )
    note: str = Field("", max_length=2000, description="Why (recorded in the history).")
    accept_widening: bool = Field(
        False,
        description="Approve although someone gains access, now or if assigned to the"
        " subject (without it such an approval is refused, 409, naming who gains).",
    )


class PrincipalOut(BaseModel):
    agent_id: str
    role: str
    context: str


class ReviewOut(BaseModel):
    """A proposal awaiting review and what approving it would change."""

    doc_id: str
    version: int
    in_force_version: int | None
    proposed: dict[str, Any]
    in_force: dict[str, Any] | None
    widens: bool
    gained: list[PrincipalOut]
    lost: list[PrincipalOut]
    kept: list[PrincipalOut]
    if_assigned: list[PrincipalOut] = Field(
        description="Denied now, but would gain access if assigned to the proposal's subject."
    )
    latent_roles: list[str] = Field(
        description="Roles in which any requester (assigned to the subject where the tier"
        " needs it) would gain access."
    )
    policy_version: str


class FlowDecisionOut(BaseModel):
    doc_id: str
    decision: str = Field(description="permit or deny")
    rule: str = Field(
        description="The rule that decided (Algorithm 1); for a denial 'not_available'"
        " unless the service explains denials."
    )
    explanation: str
    policy_version: str
    label_version: int | None
    label_state: str | None
    errors: list[str] = []
    score: float | None = None


class DecideResponse(FlowDecisionOut):
    request_id: str
    requester: str


class DecideBatchResponse(BaseModel):
    request_id: str
    requester: str
    permitted: list[str]
    decisions: list[FlowDecisionOut]


class DocumentOut(BaseModel):
    doc_id: str
    title: str
    content: str
    score: float
    label_version: int


class WithheldOut(BaseModel):
    count: int = Field(description="Documents the policy withholds from this requester.")
    rules: dict[str, int] = Field(description="How many each rule withholds.")


class RetrieveResponse(BaseModel):
    request_id: str
    requester: str
    role: str | None
    context: str | None
    k: int
    policy_version: str
    authorized_count: int
    documents: list[DocumentOut]
    decisions: list[FlowDecisionOut]
    withheld: WithheldOut | None = Field(
        description="Only when the service explains denials (serve --explain-denials)."
    )


class CitedDocument(BaseModel):
    doc_id: str
    title: str
    score: float


class AskResponse(BaseModel):
    request_id: str
    question: str
    answer: str
    cited: list[str]
    rejected_citations: list[str]
    documents: list[CitedDocument]
    withheld: WithheldOut | None = Field(
        description="Only when the service explains denials (serve --explain-denials)."
    )
    denial_mode: str
    provider: str
    model: str
    ok: bool
    error: str | None
    note: str | None
    policy_version: str


class LabelOut(BaseModel):
    doc_id: str
    state: str
    version: int
    updated_by: str
    updated_at: str
    label: dict[str, Any]
    errors: list[str] = []
    in_force: dict[str, Any] | None = Field(
        None, description="The label the gate applies (None: nothing is in force)."
    )
    in_force_version: int | None = None


class LabelsResponse(BaseModel):
    count: int
    labels: list[LabelOut]


class HealthResponse(BaseModel):
    status: str = Field(description="'ok' while the service runs (nothing about the store).")


class StatusResponse(BaseModel):
    status: str
    engine: str
    store_version: int
    policy_version: str | None
    documents: int
    labels: int
    agents: int
    audit_records: int
    explain_denials: bool


class ErrorField(BaseModel):
    field: str
    message: str
    type: str


class ErrorResponse(BaseModel):
    error: str = Field(description="What went wrong, in one sentence.")
    status: int
    fields: list[ErrorField] = []
