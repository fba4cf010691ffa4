"""The labeler's prompts are the paper's (Appendix C), and they carry only what the
labeler may see: title, document type, subject name and content (section V-C)."""

from __future__ import annotations

from pathlib import Path

import pytest

from privacy_ci.conductor import Corpus, render_document
from privacy_ci.errors import PrivacyCIError
from privacy_ci.labeling import (
    MODEL_FIELDS,
    LabelerPrompt,
    label_schema,
    load_labeler_prompt,
    prompt_from_file,
    subject_name,
)
from privacy_ci.labeling._labeler import ORGANIZATION_SUBJECT, render_user_prompt
from tests._shared import paper as paper_path

PAPER = "privacy-conductor.txt"

# Appendix C, "Labeler system prompt", as printed (line breaks set for column width).
PAPER_SYSTEM_PROMPT = """
You are a records-classification officer at Riverside
Medical Clinic. Your job is to assign each document its
access-control label under the clinic’s fixed policy.
You do NOT decide individual access requests - you label
the document once, and a deterministic gate enforces
your label thereafter.
SENSITIVITY TIERS (choose exactly one):
- public: no private info; freely shareable
(pamphlets, notices).
- internal: org-internal, not private, not public
(schedules, agendas, policy memos).
- pii_basic: identifiers only (name, DOB, address)
with no clinical/financial content.
- clinical_standard: diagnoses, medications,
clinical history.
- clinical_sensitive: mental health, substance use,
HIV/AIDS, reproductive care.
- financial: billing codes, insurance numbers,
salary figures.
- employment: employment contracts, HR records,
performance reviews, credentialing.
ROLES that may be permitted to receive a document
(list ALL that legitimately apply):
- Doctor, Nurse: clinical care staff.
- Billing Specialist: billing/insurance operations only.
- HR Manager: employment/HR records only.
- IT Contractor: no access to protected health
information.
- Patient: the individual; may receive public materials.
Guidance: grant the MINIMUM necessary roles. Clinical
records go to clinical staff; financial records to
billing; employment records to HR. Mental-health /
substance-use / HIV records are extra-sensitive and
restricted to Doctor only. Mark extra_sensitive true
for those categories.
Return the label as structured output.
"""

# Appendix C, "Labeler user prompt".
PAPER_USER_PROMPT = """
Classify this clinic document.
Title : {title}
Document type : {document_type}
Subject : {subject_name}
--- DOCUMENT CONTENT ---
{content}
--- END CONTENT ---
Assign the sensitivity tier, the full set of permitted
receiver roles, whether it is extra-sensitive, and the
governing principle.
"""

# Label fields the labeler must never be shown (everything but title and type).
HIDDEN_FIELD_NAMES = (
    "sensitivity_tier",
    "permitted_receiver_roles",
    "extra_sensitive",
    "extra_sensitive_reason",
    "governing_principle",
    "originating_context",
    "assignment_required",
    "pii_attributes",
    "implied_attributes",
    "subject_type",
)


def norm(text: str) -> str:
    return " ".join(text.split())


def test_system_prompt_is_the_papers_word_for_word() -> None:
    prompt = load_labeler_prompt("labeler_system")
    assert norm(prompt.text) == norm(PAPER_SYSTEM_PROMPT)
    assert "clinic’s" in prompt.text  # the paper's typographic apostrophe, not '
    assert prompt.variables == frozenset()


def test_user_prompt_template_is_the_papers() -> None:
    prompt = load_labeler_prompt("labeler_user")
    assert norm(prompt.text) == norm(PAPER_USER_PROMPT)
    assert prompt.variables == {"title", "document_type", "subject_name", "content"}


def test_the_embedded_constants_are_copied_from_the_paper() -> None:
    """Guards the constants above against a typo of ours: both are in the paper's text."""
    paper = norm(paper_path(PAPER).read_text(encoding="utf-8"))
    system = paper.split("Labeler system prompt. ⬇ ", 1)[1].split(" Labeler user prompt.", 1)[0]
    assert system == norm(PAPER_SYSTEM_PROMPT)
    user = paper.split("organization-level (no individual subject). ⬇ ", 1)[1]
    assert user.startswith(norm(PAPER_USER_PROMPT))


def test_render_fills_title_type_subject_and_content(corpus: Corpus) -> None:
    label = corpus.label("RMC-LAB-001")
    text = render_user_prompt(corpus, "RMC-LAB-001")
    content = render_document(label, corpus)
    expected = load_labeler_prompt("labeler_user").text.format(
        title="Complete blood count - Maria Alvarez",
        document_type="lab report",
        subject_name="Maria Alvarez",
        content=content,
    )
    assert text == expected
    assert "Title : Complete blood count - Maria Alvarez\n" in text
    assert "Document type : lab report\n" in text
    assert "Subject : Maria Alvarez\n" in text
    assert f"--- DOCUMENT CONTENT ---\n{content}\n--- END CONTENT ---" in text
    assert "{" not in text.replace(content, "")  # every variable filled


def test_organization_level_document_subject(corpus: Corpus) -> None:
    org = [label for label in corpus.labels if label.subject is None]
    assert len(org) == 10
    for label in org:
        assert subject_name(label, corpus) == ORGANIZATION_SUBJECT
        text = render_user_prompt(corpus, label.doc_id)
        assert "Subject : organization-level (no individual subject)\n" in text
    assert ORGANIZATION_SUBJECT == "organization-level (no individual subject)"


def test_a_value_containing_braces_is_not_rendered_again() -> None:
    template = LabelerPrompt("t", "A {title} B {content}")
    assert template.render(title="{content}", content="x") == "A {content} B x"
    with pytest.raises(PrivacyCIError, match="missing"):
        template.render(title="x")
    with pytest.raises(PrivacyCIError, match="unknown"):
        template.render(title="x", content="y", other="z")


def _split(text: str) -> tuple[str, str]:
    """(the prompt with its content replaced by ``{content}``, the content)."""
    start, end = "--- DOCUMENT CONTENT ---\n", "\n--- END CONTENT ---"
    head, rest = text.split(start, 1)
    content, tail = rest.rsplit(end, 1)
    return head + start + "{content}" + end + tail, content


def test_every_prompt_carries_only_title_type_subject_and_content(corpus: Corpus) -> None:
    people = {a.name for a in corpus.agents} | set(corpus.directory.subjects.values())
    template = load_labeler_prompt("labeler_user").text
    for label in corpus.labels:
        text = render_user_prompt(corpus, label.doc_id)
        around, content = _split(text)
        assert content == render_document(label, corpus), label.doc_id
        # around the content: the template with exactly title, type and subject filled
        filled = (
            around.replace(f"Title : {label.title}\n", "Title : {title}\n")
            .replace(
                f"Document type : {label.document_type}\n", "Document type : {document_type}\n"
            )
            .replace(f"Subject : {subject_name(label, corpus)}\n", "Subject : {subject_name}\n")
        )
        assert filled == template, label.doc_id
        # no label field by name, anywhere (a model could read it as the answer)
        for name in HIDDEN_FIELD_NAMES:
            assert name not in text, (label.doc_id, name)
        # the authored ACL and principle are not written down as such
        assert label.governing_principle not in text, label.doc_id
        acl = sorted(label.permitted_receiver_roles)
        for written in (", ".join(acl), str(acl), "[" + ", ".join(acl) + "]"):
            if len(acl) > 1:
                assert written not in text, (label.doc_id, written)
        # no requester named outside the content except the subject (in title/subject)
        subject = subject_name(label, corpus)
        for person in people:
            if person in around:
                assert person == subject or person in label.title, (label.doc_id, person)


def test_prompt_does_not_depend_on_the_acl_principle_or_assignment_flag(corpus: Corpus) -> None:
    """The prompt is the same whatever the authored ACL, principle, assignment flag or
    the policy say: none of them reach the labeler."""
    original = {label.doc_id: render_user_prompt(corpus, label.doc_id) for label in corpus.labels}
    changed_labels = [
        label.model_copy(
            update={
                "permitted_receiver_roles": frozenset({"IT Contractor", "Patient"}),
                "governing_principle": "SENTINEL-PRINCIPLE",
                "assignment_required": not label.assignment_required,
            }
        )
        for label in corpus.labels
    ]
    from privacy_ci.conductor import LabelSet

    other = Corpus(
        corpus.policy, corpus.directory, LabelSet(changed_labels), corpus.assignments, corpus.source
    )
    for doc_id, text in original.items():
        assert render_user_prompt(other, doc_id) == text, doc_id


def test_schema_is_the_papers_vocabulary(corpus: Corpus) -> None:
    schema = label_schema(corpus.policy)
    assert list(schema["properties"]) == list(MODEL_FIELDS) == schema["required"]
    assert schema["additionalProperties"] is False
    props = schema["properties"]
    assert props["sensitivity_tier"]["enum"] == [
        "public",
        "internal",
        "pii_basic",
        "clinical_standard",
        "clinical_sensitive",
        "financial",
        "employment",
    ]
    assert props["permitted_receiver_roles"]["items"]["enum"] == [
        "Doctor",
        "Nurse",
        "Billing Specialist",
        "HR Manager",
        "IT Contractor",
        "Patient",
    ]
    assert props["extra_sensitive"] == {"type": "boolean"}
    assert props["governing_principle"] == {"type": "string"}


def test_prompt_from_file(tmp_path: Path) -> None:
    good = tmp_path / "system.txt"
    good.write_text("You label documents of Example Corp.\n", encoding="utf-8")
    prompt = prompt_from_file(good)
    assert prompt.text == "You label documents of Example Corp." and prompt.name == str(good)
    empty = tmp_path / "empty.txt"
    empty.write_text("  \n", encoding="utf-8")
    with pytest.raises(PrivacyCIError, match="empty"):
        prompt_from_file(empty)
    with pytest.raises(PrivacyCIError, match="cannot read"):
        prompt_from_file(tmp_path / "missing.txt")
    with pytest.raises(PrivacyCIError, match="no labeling prompt"):
        load_labeler_prompt("nope")
