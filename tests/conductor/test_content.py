"""Document content written from labels: deterministic, realistic, consistent with the label."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from privacy_ci.conductor import (
    Corpus,
    Label,
    SensitivityTier,
    content_attributes,
    corpus_digest,
    render_corpus,
    render_document,
    write_corpus_documents,
)
from privacy_ci.conductor._content import DOCUMENT_TYPES

CLINIC_NAME = "Riverside Medical Clinic"  # the letterhead of content/clinic.yaml

DOLLARS = re.compile(r"-?\$\d{1,3}(?:,\d{3})*\.\d{2}")
BILLING_CODE = re.compile(r"\b(?:CPT|HCPCS) [A-Z0-9]\d{4}\b")
ICD10 = re.compile(r"\b[A-Z]\d{2}(?:\.[0-9A-Z]{1,4})?\b")
US_DATE = re.compile(r"\b(\d{2})/(\d{2})/(\d{4})\b")
LONG_DATE = re.compile(
    r"\b(?:January|February|March|April|May|June|July|August|September|October|November"
    r"|December) \d{1,2}, (\d{4})\b"
)
BANNER = "CONFIDENTIAL - SENSITIVE HEALTH INFORMATION"

# Care details (not the confidentiality banner) that show what kind of sensitive care it is.
SENSITIVE_CARE = {
    "mental health": re.compile(r"PHQ-9|GAD-7|C-SSRS|[Pp]sychiatric|F3[23]\.\d|F41\.1"),
    "substance use": re.compile(
        r"[Bb]uprenorphine|naltrexone|AUDIT|DAST-10|opioid use disorder|F1[0-9]\.\d\d"
    ),
    "HIV/AIDS": re.compile(r"HIV-1 RNA viral load|CD4 count|[Aa]ntiretroviral|\bB20\b"),
    "reproductive care": re.compile(r"[Pp]renatal|fetal heart|[Ff]ertility|IVF|Z3[14]\.\d"),
}
# Markers that must never appear in a document that is not extra-sensitive.
SENSITIVE_ONLY = re.compile(
    r"PHQ-9|GAD-7|viral load|[Bb]uprenorphine|[Pp]renatal|42 CFR Part 2|[Ff]ertility|" + BANNER
)


@pytest.fixture(scope="module")
def documents(corpus: Corpus) -> dict[str, str]:
    return render_corpus(corpus)


def _labels(corpus: Corpus) -> list[Label]:
    return list(corpus.labels)


def _patient_names(corpus: Corpus) -> dict[str, str]:
    return {a.id: a.name for a in corpus.agents if a.role == "Patient"}


def _assigned(corpus: Corpus, role: str, subject: str) -> str:
    ids = sorted(a.id for a in corpus.agents if a.role == role)
    return next(corpus.agent(i).name for i in ids if subject in corpus.assignments.get(i, ()))


# ------------------------------------------------------------------ determinism


def test_render_twice_is_byte_identical(corpus: Corpus, documents: dict[str, str]) -> None:
    again = render_corpus(corpus)
    assert again == documents
    assert corpus_digest(again) == corpus_digest(documents)
    assert list(again) == [label.doc_id for label in corpus.labels]
    label = corpus.label("RMC-MHA-001")
    assert render_document(label, corpus).encode() == render_document(label, corpus).encode()


def test_render_in_other_processes_is_byte_identical(
    corpus: Corpus, documents: dict[str, str], tmp_path: Path
) -> None:
    script = (
        "import sys; from pathlib import Path\n"
        "from privacy_ci.conductor import load_corpus\n"
        "from privacy_ci.conductor import corpus_digest, render_corpus,"
        " write_corpus_documents\n"
        "c = load_corpus()\n"
        "write_corpus_documents(c, Path(sys.argv[1]))\n"
        "print(corpus_digest(render_corpus(c)))\n"
    )
    digests = []
    for seed in ("0", "4242"):  # different str-hash seeds: hash() must play no part
        env = {**os.environ, "PYTHONHASHSEED": seed}
        out = tmp_path / f"seed{seed}"
        run = subprocess.run(
            [sys.executable, "-c", script, str(out)],
            env=env,
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        )
        digests.append(run.stdout.strip())
        for doc_id, text in documents.items():
            assert (out / f"{doc_id}.txt").read_bytes() == text.encode("utf-8"), doc_id
    assert digests[0] == digests[1] == corpus_digest(documents)
    assert digests[0].startswith("sha256:") and len(digests[0]) == len("sha256:") + 64


def test_digest_ignores_order_but_not_content(documents: dict[str, str]) -> None:
    reordered = dict(reversed(list(documents.items())))
    assert corpus_digest(reordered) == corpus_digest(documents)
    changed = {**documents, "RMC-LAB-001": documents["RMC-LAB-001"] + " "}
    assert corpus_digest(changed) != corpus_digest(documents)


def test_details_are_seeded_by_the_doc_id(corpus: Corpus) -> None:
    label = corpus.label("RMC-LAB-001")
    twin = label.model_copy(update={"doc_id": "RMC-LAB-901"})
    a, b = render_document(label, corpus), render_document(twin, corpus)
    assert a != b
    # ...while person-level identifiers stay those of the subject.
    assert re.search(r"MRN: \d{8}", a)[0] == re.search(r"MRN: \d{8}", b)[0]  # type: ignore[index]


# ------------------------------------------------------------------------ shape


def test_every_document_renders(corpus: Corpus, documents: dict[str, str]) -> None:
    assert len(documents) == 105
    for label in corpus.labels:
        text = documents[label.doc_id]
        words = len(text.split())
        assert 120 <= words <= 400, (label.doc_id, words)
        assert text.startswith(CLINIC_NAME + "\n")
        assert f"Document ID: {label.doc_id}\n" in text
        assert text.endswith("\n") and "\r" not in text and text.isascii()
        assert max(len(line) for line in text.splitlines()) <= 100, label.doc_id


def test_one_template_family_per_document_type(corpus: Corpus, documents: dict[str, str]) -> None:
    types = {label.document_type for label in corpus.labels}
    assert types == set(DOCUMENT_TYPES) and len(types) == 21
    headings: dict[str, set[str]] = defaultdict(set)
    for label in corpus.labels:
        headings[label.document_type].add(documents[label.doc_id].splitlines()[2])
    # Each family has its own department line; none falls back to the generic template.
    assert all(CLINIC_NAME not in h for hs in headings.values() for h in hs)


def test_title_picks_the_specific_content(corpus: Corpus, documents: dict[str, str]) -> None:
    for label in corpus.labels:
        text = documents[label.doc_id].lower()
        focus = label.title.rpartition(" - ")[0].lower()
        if label.document_type in {"lab report", "radiology report", "prescription"}:
            assert focus.split()[0] in text, label.doc_id
        if label.document_type == "prescription" and re.search(r"\d", focus):
            assert focus in text, label.doc_id  # drug and strength, e.g. "lisinopril 10 mg"
    text = documents["RMC-LAB-001"]
    assert "CPT 85025" in text and "Hemoglobin" in text and "g/dL" in text
    assert re.search(r"Hemoglobin\s+\d+\.\d\s+[HL]?\s*g/dL\s+12\.0-17\.5", text)
    rx = documents["RMC-RX-001"]
    assert "Sig: Take 1 tablet by mouth once daily." in rx and "I10" in rx
    assert re.search(r"Refills: \d", rx) and "Dispense:" in rx
    assert "CPT 73721" in documents["RMC-RAD-002"]  # knee MRI
    assert "CPT 44970" in documents["RMC-DS-001"]  # appendectomy


def test_attending_clinician_comes_from_assignments(
    corpus: Corpus, documents: dict[str, str]
) -> None:
    for label in corpus.labels:
        if label.subject_type.value == "patient" and label.originating_context == "Medical":
            doctor = _assigned(corpus, "Doctor", label.subject or "")
            assert doctor in documents[label.doc_id], label.doc_id
        if label.document_type == "billing statement":
            specialist = _assigned(corpus, "Billing Specialist", label.subject or "")
            assert specialist in documents[label.doc_id]
        if label.document_type in {"salary letter", "employment contract"}:
            hr = _assigned(corpus, "HR Manager", label.subject or "")
            assert hr in documents[label.doc_id]


# ------------------------------------------------------------ label consistency


def test_subject_name_and_no_other_patient(corpus: Corpus, documents: dict[str, str]) -> None:
    patients = _patient_names(corpus)
    for label in corpus.labels:
        text = documents[label.doc_id]
        present = {pid for pid, name in patients.items() if name in text}
        if label.subject is None:
            assert present == set(), label.doc_id
        else:
            assert str(corpus.directory.person_name(label.subject)) in text, label.doc_id
            assert present <= {label.subject}, label.doc_id


def test_pii_attributes_are_exactly_those_of_the_label(
    corpus: Corpus, documents: dict[str, str]
) -> None:
    for label in corpus.labels:
        assert content_attributes(documents[label.doc_id]) == set(label.pii_attributes), (
            label.doc_id
        )


def test_internal_and_public_documents_identify_no_one(
    corpus: Corpus, documents: dict[str, str]
) -> None:
    org = [
        label
        for label in corpus.labels
        if label.sensitivity_tier in {SensitivityTier.INTERNAL, SensitivityTier.PUBLIC}
    ]
    assert len(org) == 10
    for label in org:
        text = documents[label.doc_id]
        assert content_attributes(text) == set()
        assert not re.search(r"MRN|Member ID|Date of birth|Employee ID|Account number", text)
        assert not re.search(r"\$\d", text) or label.doc_id == "RMC-PUB-001"


def test_identifiers_belong_to_the_person(corpus: Corpus, documents: dict[str, str]) -> None:
    seen: dict[tuple[str, str], set[str]] = defaultdict(set)
    for label in corpus.labels:
        if label.subject is None:
            continue
        for field in ("MRN", "Date of birth", "Member ID", "Address", "Employee ID"):
            for value in re.findall(rf"^{field}: (.+)$", documents[label.doc_id], re.M):
                seen[(label.subject, field)].add(value)
    assert seen, "no identifiers found"
    assert all(len(values) == 1 for values in seen.values()), {
        k: v for k, v in seen.items() if len(v) > 1
    }
    mrns = [next(iter(v)) for (_, f), v in seen.items() if f == "MRN"]
    assert len(mrns) == len(set(mrns)) == 10


def test_extra_sensitive_documents_read_as_such(corpus: Corpus, documents: dict[str, str]) -> None:
    sensitive = [label for label in corpus.labels if label.extra_sensitive]
    assert len(sensitive) == 10
    for label in corpus.labels:
        text = documents[label.doc_id]
        if label.extra_sensitive:
            reason = label.extra_sensitive_reason or ""
            assert BANNER in text and reason.upper() in text, label.doc_id
            care = "\n".join(line for line in text.splitlines() if BANNER not in line)
            assert SENSITIVE_CARE[reason].search(care), (label.doc_id, reason)
        else:
            assert not SENSITIVE_ONLY.search(text), label.doc_id
    assert "PHQ-9" in documents["RMC-MHA-002"]
    assert "viral load" in documents["RMC-CNS-001"]
    assert "buprenorphine" in documents["RMC-CNS-003"].lower()
    assert "42 CFR Part 2" in documents["RMC-PAS-001"]
    assert "prenatal" in documents["RMC-CNS-002"]


def test_financial_documents_have_amounts_and_codes(
    corpus: Corpus, documents: dict[str, str]
) -> None:
    financial = [
        label for label in corpus.labels if label.sensitivity_tier is SensitivityTier.FINANCIAL
    ]
    assert len(financial) == 25
    for label in financial:
        text = documents[label.doc_id]
        assert DOLLARS.search(text), label.doc_id
        assert BILLING_CODE.search(text), label.doc_id
        if label.document_type in {"insurance claim", "prior authorization"}:
            assert ICD10.search(text) and "ICD-10" in text, label.doc_id
    claim = documents["RMC-CLM-001"]
    assert "Total charge:" in claim and "Place of service: 11" in claim
    assert "THIS IS NOT A BILL" in documents["RMC-EOB-001"]


def test_billing_arithmetic_adds_up(corpus: Corpus, documents: dict[str, str]) -> None:
    def cents(amount: str) -> int:
        return round(float(amount.replace("$", "").replace(",", "")) * 100)

    for label in corpus.labels:
        text = documents[label.doc_id]
        if label.document_type == "billing statement":
            table = text.split("Date  ", 1)[1].split("Amount due:", 1)[0]
            rows = [cents(m) for m in re.findall(r"(-?\$[\d,]+\.\d{2})$", table, re.M)]
            due = cents(re.search(r"Amount due: (-?\$[\d,]+\.\d{2})", text)[1])  # type: ignore[index]
            assert sum(rows) == due >= 0, label.doc_id
        if label.document_type == "insurance claim":
            lines = re.findall(r"^\d{2}/\d{2}/\d{4}\s.*?(\$[\d,]+\.\d{2})$", text, re.M)
            total = re.search(r"Total charge: (\$[\d,]+\.\d{2})", text)[1]  # type: ignore[index]
            assert sum(cents(x) for x in lines) == cents(total), label.doc_id
        if label.document_type == "explanation of benefits":
            row = re.search(r"^Total\s+(.*)$", text, re.M)[1].split()  # type: ignore[index]
            billed, allowed, ded, coins, plan, owe = (cents(x) for x in row)
            assert allowed <= billed and allowed == plan + owe and owe == ded + coins


def test_employment_documents_have_hr_content(corpus: Corpus, documents: dict[str, str]) -> None:
    salary = re.compile(r"\$\d{2,3},\d{3}\.\d{2}")
    for label in corpus.labels:
        text = documents[label.doc_id]
        kind = label.document_type
        if kind in {"salary letter", "employment contract"}:
            assert salary.search(text) and "salary" in text.lower(), label.doc_id
        if kind == "salary letter":
            old, new = (
                int(re.search(rf"{k} annual base salary\s+\$([\d,]+)", text)[1].replace(",", ""))  # type: ignore[index]
                for k in ("Current", "New")
            )
            assert new > old
        if kind == "credentialing file":
            assert re.search(r"License number: [A-Z]+-\d{6}", text) and "NPDB" in text
            assert "Malpractice history" in text
        if kind == "contractor agreement":
            assert re.search(r"Standard hourly rate\s+\$\d+\.\d{2}", text)
            assert "Business Associate Agreement" in text
        if kind == "performance review":
            assert re.search(r"Overall rating: \d\.\d / 5", text)


def test_dates_are_fixed_in_2025_2026(corpus: Corpus, documents: dict[str, str]) -> None:
    for label in corpus.labels:
        body = "\n".join(
            line
            for line in documents[label.doc_id].splitlines()
            if not line.startswith("Date of birth:")
        )
        years = {int(m[2]) for m in US_DATE.findall(body)} | {
            int(y) for y in LONG_DATE.findall(body)
        }
        assert years and years <= {2025, 2026}, (label.doc_id, years)
        for month, day, _ in US_DATE.findall(body):
            assert 1 <= int(month) <= 12 and 1 <= int(day) <= 31


# --------------------------------------------------------------- edited labels


def test_another_subject_changes_the_text(corpus: Corpus, documents: dict[str, str]) -> None:
    label = corpus.label("RMC-LAB-001")  # Maria Alvarez, attended by Dr. Helen Marsh
    edited = label.model_copy(update={"subject": "P04"})  # Samuel Okoye, Dr. Victor Ramos
    text = render_document(edited, corpus)
    assert text != documents["RMC-LAB-001"]
    assert "Samuel Okoye" in text and "Maria Alvarez" not in text
    assert "Dr. Victor Ramos" in text and "Dr. Helen Marsh" not in text
    mrn = re.compile(r"MRN: (\d{8})")
    new, p01, p04 = (
        mrn.search(t) for t in (text, documents["RMC-CN-005"], documents["RMC-REF-001"])
    )
    assert new is not None and p01 is not None and p04 is not None
    assert new[1] == p04[1] != p01[1]  # the MRN follows the subject


def test_other_label_edits_change_the_text(corpus: Corpus) -> None:
    base = corpus.label("RMC-LAB-001")
    a1c = render_document(
        base.model_copy(update={"title": "Hemoglobin A1c - Maria Alvarez"}), corpus
    )
    assert "CPT 83036" in a1c and "HEMOGLOBIN A1C" in a1c and "85025" not in a1c

    more_pii = base.model_copy(update={"pii_attributes": ("name", "address", "phone number")})
    text = render_document(more_pii, corpus)
    assert content_attributes(text) == {"name", "address", "phone number"}
    assert "MRN" not in text and "Date of birth" not in text

    sensitive = base.model_copy(
        update={"extra_sensitive": True, "extra_sensitive_reason": "HIV/AIDS"}
    )
    assert BANNER + " (HIV/AIDS)" in render_document(sensitive, corpus)

    note = corpus.label("RMC-CN-001").model_copy(
        update={
            "title": "HIV care visit - Grace Liu",
            "extra_sensitive": True,
            "extra_sensitive_reason": "HIV/AIDS",
        }
    )
    assert SENSITIVE_CARE["HIV/AIDS"].search(render_document(note, corpus))


def test_unknown_document_type_uses_the_generic_template(corpus: Corpus) -> None:
    label = corpus.label("RMC-MEM-001").model_copy(
        update={"doc_id": "RMC-LOG-001", "title": "Visitor log", "document_type": "visitor log"}
    )
    text = render_document(label, corpus)
    assert text.startswith(CLINIC_NAME) and "VISITOR LOG" in text
    assert 120 <= len(text.split()) <= 400
    assert content_attributes(text) == set()


def test_write_corpus_documents(corpus: Corpus, documents: dict[str, str], tmp_path: Path) -> None:
    folder = tmp_path / "nested" / "docs"
    paths = write_corpus_documents(corpus, folder)
    assert [p.name for p in paths] == [f"{label.doc_id}.txt" for label in corpus.labels]
    assert sorted(p.name for p in folder.iterdir()) == sorted(p.name for p in paths)
    for path in paths:
        assert path.read_bytes() == documents[path.stem].encode("utf-8")
    assert write_corpus_documents(corpus, folder) == paths  # idempotent overwrite
