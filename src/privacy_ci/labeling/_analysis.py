"""What substituted labels do to the enforced policy (sections V-E, V-F, VI-B to VI-D).

Every figure compares decisions of the same deterministic gate over the same
agents and assignments, changing only the labels: the authored policy against one
draw (Table VII), the draws against one another (Tables VIII and IX), counterfactual
flip-back of each field (attribution), and the three controls (generation cue,
inert field, five-draw majority vote).

A document whose labeling failed has no label, and the gate denies every request
for it (an explicit failure is never replaced by the authored label).

A document of a user's corpus with no authored label (`Corpus.unlabelled`) has
nothing to be compared with: its model labels are listed as drafted (or failed),
never counted as agreement or disagreement.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from privacy_ci.conductor import Corpus, Gate, Label, LabelSet, Requester, validate_corpus
from privacy_ci.errors import PrivacyCIError
from privacy_ci.labeling._labeler import LabelingRun
from privacy_ci.labeling._schema import (
    MODEL_FIELDS,
    LabelOutputError,
    ProposedLabel,
    draft_label,
    substitute,
)
from privacy_ci.llm._scripted import is_test_double

FlowKey = tuple[str, str]
"""One Conductor flow by its keys: (agent id, document id); the gate decides it from
the agent's role and assignments and the document's label, never a `privacy_ci.ci.Flow`."""

FAILED = "label failed"
DRAFTED = "drafted, no authored label"
DRAFT_FAILED = "label failed, no authored label"


class Adjudicator:
    """Decides every (agent, document) flow of a corpus under a set of labels.

    Args:
        corpus: agents, assignments and policy; its own labels are the authored policy.
    """

    def __init__(self, corpus: Corpus) -> None:
        self.corpus = corpus
        self.gate = Gate(corpus.policy)
        self.requesters: list[Requester] = corpus.requesters()
        self.authored: dict[str, Label] = {label.doc_id: label for label in corpus.labels}
        self.authored_decisions = self.decide_all(self.authored)

    def label_of(self, doc_id: str, proposed: ProposedLabel | None) -> Label | None:
        """The authored label with `proposed`'s fields, or None for a failed labeling
        or one that is no valid label (a tier the policy lacks: the gate denies it)."""
        if proposed is None:
            return None
        try:
            return substitute(self.authored[doc_id], proposed, self.corpus.policy)
        except LabelOutputError:
            return None

    def decide_doc(self, label: Label | None, doc_id: str) -> dict[FlowKey, bool]:
        """Every agent's decision for one document (all Deny when it has no label)."""
        if label is None:
            return {(r.id, doc_id): False for r in self.requesters}
        return {(r.id, doc_id): self.gate.decide(r, label).permitted for r in self.requesters}

    def decide_all(self, labels: Mapping[str, Label | None]) -> dict[FlowKey, bool]:
        out: dict[FlowKey, bool] = {}
        for doc_id in self.authored:
            out.update(self.decide_doc(labels.get(doc_id), doc_id))
        return out

    def decisions(self, proposed: Mapping[str, ProposedLabel | None]) -> dict[FlowKey, bool]:
        """Decisions with every document's label replaced by `proposed` (None = failed)."""
        return self.decide_all({d: self.label_of(d, proposed.get(d)) for d in self.authored})

    def induced(self, decisions: Mapping[FlowKey, bool]) -> tuple[list[FlowKey], list[FlowKey]]:
        """(privacy violations, over-blocks) against the authored policy."""
        pv = [f for f, ok in decisions.items() if ok and not self.authored_decisions[f]]
        ob = [f for f, ok in decisions.items() if not ok and self.authored_decisions[f]]
        return pv, ob


@dataclass(frozen=True)
class Conformance:
    """One draw against the authored policy (a row of Table VII)."""

    documents: int
    failures: int
    tier_conforming: int
    acl_conforming: int
    privacy_violations: int
    over_blocks: int
    roles_added: int
    roles_omitted: int
    permits: int

    @property
    def tier_rate(self) -> float:
        return self.tier_conforming / self.documents if self.documents else 0.0

    @property
    def acl_rate(self) -> float:
        return self.acl_conforming / self.documents if self.documents else 0.0

    @property
    def over_under(self) -> float | None:
        """O:U, roles granted beyond the authored ACLs per role omitted (None: none omitted)."""
        return self.roles_added / self.roles_omitted if self.roles_omitted else None

    def as_dict(self) -> dict[str, Any]:
        return {
            "documents": self.documents,
            "failures": self.failures,
            "tier_conformance": round(self.tier_rate, 4),
            "acl_conformance": round(self.acl_rate, 4),
            "tier_conforming": self.tier_conforming,
            "acl_conforming": self.acl_conforming,
            "privacy_violations": self.privacy_violations,
            "over_blocks": self.over_blocks,
            "roles_added": self.roles_added,
            "roles_omitted": self.roles_omitted,
            "over_under": None if self.over_under is None else round(self.over_under, 2),
            "permits": self.permits,
        }


@dataclass(frozen=True)
class Stability:
    """The draws against one another (Table VIII and IX)."""

    draws: int
    documents: int
    tier_unanimous: int
    acl_unanimous: int
    all_unanimous: int
    unstable_flows: int
    unstable_denied: int
    violations_per_draw: tuple[int, ...]
    over_blocks_per_draw: tuple[int, ...]

    def as_dict(self) -> dict[str, Any]:
        pv = self.violations_per_draw
        n = self.documents or 1
        return {
            "draws": self.draws,
            "tier_stability": round(self.tier_unanimous / n, 4),
            "acl_stability": round(self.acl_unanimous / n, 4),
            "all_stability": round(self.all_unanimous / n, 4),
            "tier_unanimous": self.tier_unanimous,
            "acl_unanimous": self.acl_unanimous,
            "all_unanimous": self.all_unanimous,
            "unstable_flows": self.unstable_flows,
            "unstable_unauthorized_disclosures": self.unstable_denied,
            "violations_per_draw": list(pv),
            "over_blocks_per_draw": list(self.over_blocks_per_draw),
            "violations_min": min(pv),
            "violations_max": max(pv),
            "violations_range": max(pv) - min(pv),
        }


@dataclass
class LabelingReport:
    """Everything measured for one labeler configuration (one run)."""

    name: str
    backend: str
    draws: int
    flows: int
    authored_permits: int
    authored_denies: int
    conformance: Conformance
    per_draw: list[Conformance]
    stability: Stability | None
    attribution: dict[str, dict[str, int]]
    tier_cue: dict[str, dict[str, Any]]
    inert_field: dict[str, Any]
    ensemble: Conformance | None
    failures: list[dict[str, Any]] = field(default_factory=list)
    test_double: bool = False
    unlabelled: list[dict[str, Any]] = field(default_factory=list)
    """Documents the run labeled that have no authored label: per document its status
    (`DRAFTED` or `DRAFT_FAILED`) and each draw's label (None: failed or missing)."""

    def as_dict(self) -> dict[str, Any]:
        out = {
            "name": self.name,
            "backend": self.backend,
            "test_double": self.test_double,
            "draws": self.draws,
            "flows": self.flows,
            "authored": {"permit": self.authored_permits, "deny": self.authored_denies},
            "table_vii": self.conformance.as_dict(),
            "per_draw": [c.as_dict() for c in self.per_draw],
            "stability": None if self.stability is None else self.stability.as_dict(),
            "attribution": self.attribution,
            "controls": {
                "tier_cue": self.tier_cue,
                "inert_field": self.inert_field,
                "ensemble": None if self.ensemble is None else self.ensemble.as_dict(),
            },
            "failures": self.failures,
        }
        if self.unlabelled:  # absent otherwise: the packaged corpus's report is unchanged
            out["no_authored_label"] = self.unlabelled
        return out


def conformance(
    adj: Adjudicator, proposed: Mapping[str, ProposedLabel | None]
) -> tuple[Conformance, dict[FlowKey, bool]]:
    """Tier and ACL conformance, induced violations and over-blocks, and O:U of one draw."""
    tier = acl = added = omitted = failures = 0
    for doc_id, authored in adj.authored.items():
        p = proposed.get(doc_id)
        if p is None:
            failures += 1
            continue
        tier += p.sensitivity_tier == authored.sensitivity_tier
        acl += p.permitted_receiver_roles == authored.permitted_receiver_roles
        added += len(p.permitted_receiver_roles - authored.permitted_receiver_roles)
        omitted += len(authored.permitted_receiver_roles - p.permitted_receiver_roles)
    decisions = adj.decisions(proposed)
    pv, ob = adj.induced(decisions)
    result = Conformance(
        len(adj.authored),
        failures,
        tier,
        acl,
        len(pv),
        len(ob),
        added,
        omitted,
        sum(decisions.values()),
    )
    return result, decisions


def attribute(
    adj: Adjudicator, proposed: Mapping[str, ProposedLabel | None], flows: Sequence[FlowKey]
) -> dict[str, int]:
    """Counterfactual flip-back (section V-F) for flows whose decision changed.

    Each of the labeler's fields is restored to its authored value alone and the flow
    decided again; a field is credited when restoring it alone gives back the
    authored decision. A flow no single field explains counts under
    ``"no single field"``; a failed labeling under ``"label failed"``.
    """
    out: Counter[str] = Counter()
    requesters = {r.id: r for r in adj.requesters}
    for agent_id, doc_id in flows:
        p = proposed.get(doc_id)
        if p is None:
            out[FAILED] += 1
            continue
        authored = ProposedLabel.of(adj.authored[doc_id])
        want = adj.authored_decisions[(agent_id, doc_id)]
        credited = False
        for name in MODEL_FIELDS:
            restored = replace(p, **{name: getattr(authored, name)})
            label = adj.label_of(doc_id, restored)
            permitted = label is not None and adj.gate.decide(requesters[agent_id], label).permitted
            if permitted == want:
                out[name] += 1
                credited = True
        if not credited:
            out["no single field"] += 1
    return dict(out)


def majority_label(draws: Sequence[ProposedLabel | None]) -> ProposedLabel | None:
    """Field-wise majority of the successful draws (ties: the earliest draw's value)."""
    ok = [p for p in draws if p is not None]
    if not ok:
        return None

    def vote(values: list[Any]) -> Any:
        counts = Counter(values)
        best = max(counts.values())
        return next(v for v in values if counts[v] == best)

    tier = vote([p.sensitivity_tier for p in ok])
    acl = vote([p.permitted_receiver_roles for p in ok])
    extra = vote([p.extra_sensitive for p in ok])
    principle = next(
        (
            p.governing_principle
            for p in ok
            if (p.sensitivity_tier, p.permitted_receiver_roles) == (tier, acl)
        ),
        ok[0].governing_principle,
    )
    return ProposedLabel(tier, acl, extra, principle)


def _stability(
    adj: Adjudicator,
    draws: Sequence[Mapping[str, ProposedLabel | None]],
    decisions: Sequence[Mapping[FlowKey, bool]],
    per_draw: Sequence[Conformance],
) -> Stability:
    tier = acl = everything = 0
    for doc_id in adj.authored:
        values = [d.get(doc_id) for d in draws]
        if any(v is None for v in values):
            continue  # a failed draw breaks unanimity
        got = [v for v in values if v is not None]
        tier += len({v.sensitivity_tier for v in got}) == 1
        acl += len({v.permitted_receiver_roles for v in got}) == 1
        everything += len({v.categorical for v in got}) == 1
    unstable = [f for f in adj.authored_decisions if len({d[f] for d in decisions}) > 1]
    denied = sum(not adj.authored_decisions[f] for f in unstable)
    return Stability(
        len(draws),
        len(adj.authored),
        tier,
        acl,
        everything,
        len(unstable),
        denied,
        tuple(c.privacy_violations for c in per_draw),
        tuple(c.over_blocks for c in per_draw),
    )


def analyze_run(run: LabelingRun, corpus: Corpus, *, allow_partial: bool = False) -> LabelingReport:
    """Every figure of sections VI-B to VI-D for one labeling run.

    Args:
        run: the run (`load_labeling_run`, or `run_from_labels`).
        corpus: the corpus it labeled; its labels are the authored policy.
        allow_partial: analyse an unfinished run, counting missing labels as failed.

    Returns:
        The `LabelingReport`.

    Raises:
        PrivacyCIError: the run is unfinished (and `allow_partial` is off), or labels
            documents the corpus does not have.
    """
    adj = Adjudicator(corpus)
    unlabelled = set(corpus.unlabelled)
    labeled = {r.doc_id for r in run.records}
    unknown = sorted(labeled - set(adj.authored) - unlabelled)
    if unknown:
        raise PrivacyCIError(
            f"run {run.name!r} labels documents the corpus lacks: {', '.join(unknown[:5])}"
        )
    # documents without an authored label that the run labeled, or was asked to
    asked = labeled | set(run.manifest.get("identity", {}).get("documents") or ())
    drafted = [d for d in corpus.unlabelled if d in asked]
    missing = run.missing([*adj.authored, *drafted])
    if missing and not allow_partial:
        total = run.draws * (len(adj.authored) + len(drafted))
        if run.folder is None:  # label files, not a model run
            raise PrivacyCIError(
                f"{run.name!r} lacks {len(missing)} of {total} labels (e.g. document"
                f" {missing[0].split('#')[0]}); pass --partial to count them as failed"
            )
        raise PrivacyCIError(
            f"run {run.name!r} is unfinished: {len(missing)} of {total} labels missing"
            f" (e.g. {missing[0]}); resume it with the same command, or pass --partial"
        )
    draws = [run.draw(n) for n in range(1, run.draws + 1)]
    per_draw: list[Conformance] = []
    decisions: list[dict[FlowKey, bool]] = []
    for labels in draws:
        result, decided = conformance(adj, labels)
        per_draw.append(result)
        decisions.append(decided)
    first, first_decisions = draws[0], decisions[0]
    pv, ob = adj.induced(first_decisions)
    attribution = {
        "privacy_violations": attribute(adj, first, pv),
        "over_blocks": attribute(adj, first, ob),
    }
    cue: dict[str, dict[str, Any]] = {}
    for doc_id, authored in adj.authored.items():
        row = cue.setdefault(authored.sensitivity_tier.value, {"documents": 0, "conforming": 0})
        row["documents"] += 1
        p = first.get(doc_id)
        row["conforming"] += p is not None and p.sensitivity_tier == authored.sensitivity_tier
    for row in cue.values():
        row["tier_conformance"] = round(row["conforming"] / row["documents"], 4)
    flipped = {
        d: None if p is None else replace(p, extra_sensitive=not p.extra_sensitive)
        for d, p in first.items()
    }
    flipped_decisions = adj.decisions(flipped)
    inert: dict[str, Any] = {
        "field": "extra_sensitive",
        "flows": len(first_decisions),
        "decisions_changed": sum(
            flipped_decisions[f] != first_decisions[f] for f in first_decisions
        ),
        "permits_before": sum(first_decisions.values()),
        "permits_after": sum(flipped_decisions.values()),
    }
    stability = ensemble = None
    if len(draws) > 1:
        stability = _stability(adj, draws, decisions, per_draw)
        voted = {d: majority_label([draw.get(d) for draw in draws]) for d in adj.authored}
        ensemble, _ = conformance(adj, voted)
    return LabelingReport(
        name=run.name,
        backend=run.backend,
        draws=len(draws),
        flows=len(adj.authored_decisions),
        authored_permits=sum(adj.authored_decisions.values()),
        authored_denies=sum(not v for v in adj.authored_decisions.values()),
        conformance=per_draw[0],
        per_draw=per_draw,
        stability=stability,
        attribution=attribution,
        tier_cue=dict(sorted(cue.items())),
        inert_field=inert,
        ensemble=ensemble,
        failures=[
            {"doc_id": r.doc_id, "draw": r.draw, "failure": r.failure} for r in run.failures()
        ],
        test_double=is_test_double(run.backend),
        unlabelled=[_unlabelled_entry(doc_id, draws) for doc_id in drafted],
    )


def _unlabelled_entry(
    doc_id: str, draws: Sequence[Mapping[str, ProposedLabel | None]]
) -> dict[str, Any]:
    labels = [d.get(doc_id) for d in draws]
    return {
        "doc_id": doc_id,
        "status": DRAFTED if any(p is not None for p in labels) else DRAFT_FAILED,
        "labels": [None if p is None else p.as_dict() for p in labels],
    }


@dataclass(frozen=True)
class LabelDrafts:
    """A run's labels as complete label entries, and what could not be one.

    Args:
        labels: valid labels, authored documents first (label-file order), then the
            documents with no authored label.
        failed: documents with no label in the draw(s) (a label file cannot say
            "failed"), with the run's reason.
        invalid: documents whose label is not valid for the corpus, with the reason.
        without_authored: the documents among `labels` that have no authored label
            (their subject, type and context are placeholders, see `draft_label`).
    """

    labels: list[Label]
    failed: list[tuple[str, str]]
    invalid: list[tuple[str, str]]
    without_authored: list[str]


def label_problems(label: Label, corpus: Corpus) -> list[str]:
    """What `conductor validate` would say about `label` in `corpus`'s label file."""
    where = "draft"
    prefix = f"{where}/labels.yaml: document {label.doc_id!r}: "
    problems = validate_corpus(
        corpus.policy, corpus.directory, LabelSet([label]), corpus.assignments, where
    )
    return [p.removeprefix(prefix) for p in problems if p.startswith(prefix)]


def draft_labels(run: LabelingRun, corpus: Corpus, draw: int | None = 1) -> LabelDrafts:
    """The run's labels as label entries that `conductor validate` and `store propose`
    accept: an authored document's label with the model's four fields in place; a
    document without one, `draft_label`. Nothing is left out without a reason.

    Args:
        run: the labeling run.
        corpus: the corpus it labeled.
        draw: which draw (from 1), or None for the field-wise majority of all draws.

    Raises:
        PrivacyCIError: no such draw.
    """
    if draw is not None and not 1 <= draw <= run.draws:
        raise PrivacyCIError(f"run {run.name!r} has draws 1-{run.draws}, not {draw}")
    numbers = [draw] if draw is not None else list(range(1, run.draws + 1))
    draws = [run.draw(n) for n in numbers]
    why: dict[str, str] = {}
    for record in sorted(run.failures(), key=lambda r: r.draw):
        if record.draw in numbers:
            why.setdefault(record.doc_id, f"draw {record.draw}: {record.failure}")
    labeled = {r.doc_id for r in run.records}
    # the subject a draft named: the most common among the chosen draws' drafts
    named: dict[str, Counter[str | None]] = {}
    for record in run.records:
        if record.draw in numbers and record.ok:
            named.setdefault(record.doc_id, Counter())[record.subject] += 1
    subjects = {d: c.most_common(1)[0][0] for d, c in named.items()}
    labels: list[Label] = []
    failed: list[tuple[str, str]] = []
    invalid: list[tuple[str, str]] = []
    without: list[str] = []
    # authored documents always (a label file lists them all); the others when labeled
    documents = [*corpus.labels.ids, *(d for d in corpus.unlabelled if d in labeled)]
    for doc_id in documents:
        proposed = majority_label([d.get(doc_id) for d in draws])
        if proposed is None:
            failed.append((doc_id, why.get(doc_id, "not labeled in this run")))
            continue
        authored = corpus.labels.get(doc_id)
        try:
            if authored is None:
                label = draft_label(doc_id, proposed, corpus.policy, subjects.get(doc_id))
            else:
                label = substitute(authored, proposed, corpus.policy)
        except LabelOutputError as exc:
            invalid.append((doc_id, str(exc)))
            continue
        problems = label_problems(label, corpus)
        if problems:
            invalid.append((doc_id, "; ".join(problems)))
            continue
        labels.append(label)
        if authored is None:
            without.append(doc_id)
    return LabelDrafts(labels, failed, invalid, without)


def model_labels(
    run: LabelingRun, corpus: Corpus, draw: int | None = 1
) -> tuple[list[Label], list[str]]:
    """The run's labels as complete label entries (authored fields + the model's four).

    Args:
        run: the labeling run.
        corpus: the corpus it labeled.
        draw: which draw (from 1), or None for the field-wise majority of all draws.

    Returns:
        ``(labels, failed)``: labels in corpus order (documents without an authored
        label last, as `draft_labels` writes them), and the ids of documents with no
        valid label in that draw (a label file cannot say "failed"; they are left
        out; `draft_labels` says why).

    Raises:
        PrivacyCIError: no such draw.
    """
    drafts = draft_labels(run, corpus, draw)
    left_out = {d for d, _ in drafts.failed} | {d for d, _ in drafts.invalid}
    documents = [*corpus.labels.ids, *corpus.unlabelled]
    return drafts.labels, [d for d in documents if d in left_out]
