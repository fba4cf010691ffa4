"""Deterministic document content for a Conductor corpus, written from each label.

The Privacy Conductor corpus is built specification first (paper, section V-A): a
document's CI label is authored before its content, and the content is written to
satisfy the label. The paper used a model for that step; here the content comes
from templates, one family per document type, so the same label always yields
byte-identical text on every run, process and machine. No model is used.

Every variable detail is drawn from SHA-256, never from Python's ``hash()`` or the
``random`` module: document details (dates, lab values, amounts, codes chosen
among alternatives) from the document id, and person details (date of birth, MRN,
member id, address, employee id, salary, licence) from the subject's id, so one
patient carries the same identifiers in every document about them.

How the label shapes the text:

* ``document_type`` picks the template family (21 of them, plus a generic one);
* ``title`` (the part before `` - <subject name>``) picks the specific test, drug,
  visit, imaging study, specialty, agenda or memo;
* ``subject`` supplies the name (from the directory), the attending clinician and
  other staff (from the assignments) and the person-level identifiers;
* ``pii_attributes`` is exactly the identifier block printed: an identifier the
  label does not list is never printed (`content_attributes` reads them back);
* ``extra_sensitive`` / ``extra_sensitive_reason`` add the matching confidentiality
  notice, and the templates write the sensitive care itself (PHQ-9, HIV viral load,
  buprenorphine, prenatal care);
* ``sensitivity_tier`` picks the confidentiality footer; organization-level
  documents (``subject`` null) carry no individual's identifiers at all.
"""

from __future__ import annotations

import hashlib
import re
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import date, timedelta
from pathlib import Path
from typing import TypeVar

from privacy_ci.conductor._corpus import Corpus
from privacy_ci.conductor._labels import Label, SensitivityTier, SubjectType
from privacy_ci.conductor._policy import Agent

__all__ = [
    "CLINIC_NAME",
    "DOCUMENT_TYPES",
    "IDENTIFIER_ATTRIBUTES",
    "content_attributes",
    "corpus_digest",
    "render_corpus",
    "render_document",
    "write_corpus_documents",
]

T = TypeVar("T")

CLINIC_NAME = "Riverside Medical Clinic"
CLINIC_STREET = "1200 Riverside Parkway, Riverside, CA 92501"
CLINIC_PHONE = "(951) 555-0100"
CLINIC_TAX_ID = "95-4821730"
CLINIC_CLIA = "05D2187364"
WIDTH = 78
RULE = "=" * WIDTH
THIN_RULE = "-" * WIDTH

_MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
_WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_POW10 = (1, 10, 100, 1000, 10000)

# Documents are dated in 2025; every date derived from one stays within 2025-2026.
_FIRST_DAY = date(2025, 3, 17)
_LAST_DAY = date(2025, 12, 12)


# --------------------------------------------------------------------------- draws


def _sha256(*parts: str) -> bytes:
    return hashlib.sha256("\x1f".join(parts).encode("utf-8")).digest()


@dataclass(frozen=True)
class _Draw:
    """Keyed, order-independent pseudo-random draws from SHA-256.

    Each draw is named by a salt, so adding or reordering draws in a template
    never shifts the others.
    """

    key: str

    def _u64(self, salt: str) -> int:
        return int.from_bytes(_sha256(self.key, salt)[:8], "big")

    def num(self, salt: str, lo: int, hi: int) -> int:
        if hi <= lo:
            return lo
        return lo + self._u64(salt) % (hi - lo + 1)

    def pick(self, salt: str, options: Sequence[T]) -> T:
        return options[self._u64(salt) % len(options)]

    def day(self, salt: str, start: date, end: date) -> date:
        return start + timedelta(days=self.num(salt, 0, (end - start).days))

    def digits(self, salt: str, n: int) -> str:
        return str(self._u64(salt) % 10**n).zfill(n)

    def chance(self, salt: str, percent: int) -> bool:
        return self.num(salt, 1, 100) <= percent


# ------------------------------------------------------------------- formatting


def _us(d: date) -> str:
    return f"{d.month:02d}/{d.day:02d}/{d.year}"


def _long(d: date) -> str:
    return f"{_MONTHS[d.month - 1]} {d.day}, {d.year}"


def _money(cents: int) -> str:
    sign = "-" if cents < 0 else ""
    cents = abs(cents)
    return f"{sign}${cents // 100:,}.{cents % 100:02d}"


def _dollars(amount: int) -> str:
    return _money(amount * 100)


def _fixed(value: int, dp: int) -> str:
    if dp == 0:
        return str(value)
    scale = _POW10[dp]
    return f"{value // scale}.{value % scale:0{dp}d}"


def _para(text: str) -> str:
    return textwrap.fill(" ".join(text.split()), WIDTH)


def _bullets(items: Sequence[str], numbered: bool = False) -> str:
    out = []
    for i, item in enumerate(items, 1):
        mark = f"{i}. " if numbered else "- "
        out.append(
            textwrap.fill(
                " ".join(item.split()),
                WIDTH,
                initial_indent=mark,
                subsequent_indent=" " * len(mark),
            )
        )
    return "\n".join(out)


def _table(rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(row[i]) for row in rows) + 2 for i in range(len(rows[0]))]
    return "\n".join(
        "".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows
    )


def _fields(pairs: Sequence[tuple[str, str]]) -> str:
    return "\n".join(
        textwrap.fill(f"{key}: {value}", WIDTH, subsequent_indent="  ") for key, value in pairs
    )


def _salutation(name: str) -> str:
    base = name.split(",")[0].strip()
    if base.startswith("Dr. "):
        return "Dr. " + base.split()[-1]
    return base.split()[0]


def _title_case(text: str) -> str:
    return text[:1].upper() + text[1:]


# ------------------------------------------------------------------------ people


def _npi(base9: str) -> str:
    """A 10-digit NPI whose check digit follows the Luhn rule with the 80840 prefix."""
    total = 0
    for i, ch in enumerate(reversed("80840" + base9)):
        digit = int(ch)
        if i % 2 == 0:
            digit *= 2
            if digit > 9:
                digit -= 9
        total += digit
    return base9 + str((10 - total % 10) % 10)


_STREETS = (
    "Willow Bend Rd",
    "Magnolia Ave",
    "Orange Grove Dr",
    "Canyon Crest Dr",
    "Arlington Ave",
    "Jurupa Ave",
    "Mission Inn Ave",
    "Brockton Ave",
    "Victoria Ave",
    "Chicago Ave",
    "Central Ave",
    "Palm Ave",
)
_ZIPS = ("92503", "92504", "92505", "92506", "92507", "92508")
_PAYERS = (
    ("Blue Harbor Health Plan", "BHH", "PPO"),
    ("Cascade Mutual Insurance", "CMI", "HMO"),
    ("Summit Care", "SCP", "PPO"),
    ("Evergreen Health Alliance", "EHA", "EPO"),
)


@dataclass(frozen=True)
class _Person:
    """Everything a document may say about one person, drawn from the person's id."""

    id: str
    name: str
    role: str
    description: str
    dob: date
    mrn: str
    payer: str
    payer_code: str
    plan_type: str
    member_id: str
    group: str
    account: str
    employee_id: str
    address: str
    phone: str
    email: str
    ssn_last4: str
    license: str
    npi: str
    company: str
    salary: int
    since: int
    height_in: int
    weight_lb: int


def _person(corpus: Corpus, person_id: str, agent: Agent | None = None) -> _Person:
    agent = agent if agent is not None else corpus.directory.agent(person_id)
    name = corpus.directory.person_name(person_id) or person_id
    role = agent.role if agent is not None else ""
    description = agent.description if agent is not None else ""
    d = _Draw("person:" + person_id)
    if role == "Patient" or agent is None:
        dob = d.day("dob", date(1979, 1, 1), date(2002, 12, 31))
    else:
        dob = d.day("dob", date(1962, 1, 1), date(1985 if role == "Doctor" else 1994, 12, 31))
    payer, code, plan = d.pick("payer", _PAYERS)
    unit = f" Apt {d.num('apt', 1, 40)}" if d.chance("has-apt", 35) else ""
    address = (
        f"{d.num('house', 120, 9870)} {d.pick('street', _STREETS)}{unit},"
        f" Riverside, CA {d.pick('zip', _ZIPS)}"
    )
    lowered = (name + " " + description).lower()
    if role == "Doctor":
        kind = "MD"
        salary = d.num("salary", 450, 530) * 500
        if "surgeon" in lowered:
            salary = d.num("salary", 840, 1000) * 500
    elif "lpn" in lowered:
        kind, salary = "LPN", d.num("salary", 104, 124) * 500
    elif role == "Nurse":
        kind, salary = "RN", d.num("salary", 164, 206) * 500
    elif role == "HR Manager":
        kind, salary = "LIC", d.num("salary", 156, 190) * 500
    elif role == "IT Contractor":
        kind, salary = "LIC", d.num("salary", 17, 28) * 5  # hourly rate
    else:
        kind, salary = "LIC", d.num("salary", 94, 118) * 500
    company = re.search(r"\(([^)]+)\)", description)
    height = d.num("height", 60, 74)
    first = name.replace("Dr. ", "").split(",")[0].split()
    return _Person(
        id=person_id,
        name=name,
        role=role,
        description=description,
        dob=dob,
        mrn=d.digits("mrn", 8),
        payer=payer,
        payer_code=code,
        plan_type=plan,
        member_id=code + d.digits("member", 9),
        group=f"GRP-{d.digits('group', 6)}",
        account=f"{d.digits('acct-a', 4)}-{d.digits('acct-b', 6)}",
        employee_id=f"E{d.num('employee', 10000, 99999)}",
        address=address,
        phone=f"(951) 555-01{d.digits('phone', 2)}",
        email=f"{first[0].lower()}.{first[-1].lower()}@mail.example",
        ssn_last4=d.digits("ssn", 4),
        license=f"{kind}-{d.digits('license', 6)}",
        npi=_npi("1" + d.digits("npi", 8)),
        company=company.group(1) if company else "Northgate IT Services",
        salary=salary,
        since=d.num("since", min(dob.year + (29 if role == "Doctor" else 23), 2022), 2022),
        height_in=height,
        weight_lb=round(d.num("bmi", 200, 300) * height * height / 7030),
    )


# ---------------------------------------------------------- identifiers (PII)

#: The identifier attributes a label may list, with how each is printed and read back.
IDENTIFIER_ATTRIBUTES: dict[str, re.Pattern[str]] = {
    "name": re.compile(r"^(?:Patient|Member|Employee|Contractor|Practitioner|Name): \S", re.M),
    "date of birth": re.compile(r"^Date of birth: \d{2}/\d{2}/\d{4}$", re.M),
    "medical record number": re.compile(r"\bMRN: \d{8}\b"),
    "insurance member id": re.compile(r"\bMember ID: [A-Z]{3}\d{9}\b"),
    "address": re.compile(r"^Address: \d+ .+, CA \d{5}$", re.M),
    "account number": re.compile(r"\bAccount number: \d{4}-\d{6}\b"),
    "employee id": re.compile(r"\bEmployee ID: E\d{5}\b"),
    "license number": re.compile(r"\bLicense number: [A-Z]{2,3}-\d{6}\b"),
    "company": re.compile(r"^Company: \S", re.M),
    "phone number": re.compile(r"^Phone: \(\d{3}\) \d{3}-\d{4}$", re.M),
    "email": re.compile(r"^Email: \S+@\S+$", re.M),
    "social security number": re.compile(r"^SSN: XXX-XX-\d{4}$", re.M),
}


def content_attributes(text: str) -> set[str]:
    """The identifier attributes a rendered document actually carries.

    Args:
        text: a document from `render_document`.

    Returns:
        The names (as used in a label's ``pii_attributes``) of the identifiers
        printed in the text, e.g. ``{"name", "date of birth", "medical record number"}``.
    """
    return {name for name, pattern in IDENTIFIER_ATTRIBUTES.items() if pattern.search(text)}


def _identifier_lines(label: Label, person: _Person, name_label: str) -> list[str]:
    lines = []
    for attribute in label.pii_attributes:
        key = attribute.strip().lower()
        if key == "name":
            lines.append(f"{name_label}: {person.name}")
        elif key in {"date of birth", "dob"}:
            lines.append(f"Date of birth: {_us(person.dob)}")
        elif key in {"medical record number", "mrn"}:
            lines.append(f"MRN: {person.mrn}")
        elif key in {"insurance member id", "member id"}:
            lines.append(f"Member ID: {person.member_id}")
        elif key in {"address", "home address"}:
            lines.append(f"Address: {person.address}")
        elif key == "account number":
            lines.append(f"Account number: {person.account}")
        elif key == "employee id":
            lines.append(f"Employee ID: {person.employee_id}")
        elif key == "license number":
            lines.append(f"License number: {person.license}")
        elif key == "company":
            lines.append(f"Company: {person.company}")
        elif key in {"phone number", "phone"}:
            lines.append(f"Phone: {person.phone}")
        elif key in {"email", "email address"}:
            lines.append(f"Email: {person.email}")
        elif key in {"social security number", "ssn"}:
            lines.append(f"SSN: XXX-XX-{person.ssn_last4}")
        else:
            lines.append(f"{_title_case(key)}: on file")
    return lines


# ---------------------------------------------------------------------- context


@dataclass(frozen=True)
class _Ctx:
    """What a template may read: the label, the corpus, the draws and the subject."""

    label: Label
    corpus: Corpus
    draw: _Draw
    focus: str
    when: date
    subject: _Person | None

    @property
    def name(self) -> str:
        return self.subject.name if self.subject is not None else "the patient"

    @property
    def person(self) -> _Person:
        """The subject, or a placeholder person for an organization-level document."""
        if self.subject is not None:
            return self.subject
        return _person(self.corpus, "unspecified-subject")

    def has(self, *words: str) -> bool:
        text = (self.focus + " " + self.label.title).lower()
        return any(w in text for w in words)

    def staff(self, role: str) -> _Person:
        """The agent of `role` assigned to the subject (else the first of that role)."""
        agents = sorted((a for a in self.corpus.agents if a.role == role), key=lambda a: a.id)
        subject = self.label.subject
        for agent in agents:
            if subject is not None and subject in self.corpus.assignments.get(agent.id, ()):
                return _person(self.corpus, agent.id, agent)
        if agents:
            return _person(self.corpus, agents[0].id, agents[0])
        return _person(
            self.corpus,
            f"unnamed-{role}",
            Agent(id=f"unnamed-{role}", name=f"{role} on duty", role=role, context="Medical"),
        )

    def agents_of(self, *roles: str) -> list[Agent]:
        return sorted(
            (a for a in self.corpus.agents if a.role in roles),
            key=lambda a: (roles.index(a.role), a.id),
        )

    def time(self, salt: str, lo_hour: int = 8, hi_hour: int = 16) -> str:
        hour = self.draw.num(salt + ":h", lo_hour, hi_hour)
        return f"{hour:02d}:{self.draw.num(salt + ':m', 0, 59):02d}"


def _focus(label: Label) -> str:
    title = label.title.strip() or label.document_type
    if label.subject is not None and " - " in title:
        return title.rpartition(" - ")[0].strip()
    return title


def _context(label: Label, corpus: Corpus) -> _Ctx:
    draw = _Draw("doc:" + label.doc_id)
    subject = _person(corpus, label.subject) if label.subject is not None else None
    return _Ctx(
        label, corpus, draw, _focus(label), draw.day("date", _FIRST_DAY, _LAST_DAY), subject
    )


@dataclass
class _Doc:
    """A template's output: where it comes from, what it is, and its sections."""

    department: str
    heading: str
    name_label: str = ""
    meta: list[tuple[str, str]] = field(default_factory=list)
    blocks: list[str] = field(default_factory=list)


# ------------------------------------------------------------------ clinical bits


def _vitals(
    ctx: _Ctx,
    systolic: tuple[int, int] = (108, 128),
    temp: tuple[int, int] = (976, 990),
    pulse: tuple[int, int] = (62, 88),
) -> str:
    d = ctx.draw
    sbp = d.num("sbp", *systolic)
    dbp = d.num("dbp", sbp - 50, sbp - 42)
    return (
        f"BP {sbp}/{dbp} mmHg, HR {d.num('hr', *pulse)} bpm, Temp"
        f" {_fixed(d.num('temp', *temp), 1)} F,"
        f" RR {d.num('rr', 12, 18)}, SpO2 {d.num('spo2', 95, 99)}% on room air,"
        f" weight {_weight(ctx)} lb."
    )


def _weight(ctx: _Ctx) -> int:
    return ctx.person.weight_lb + ctx.draw.num("weight", -3, 3)


def _bmi(ctx: _Ctx) -> str:
    height = ctx.person.height_in
    return _fixed((7030 * _weight(ctx) + height * height // 2) // (height * height), 1)


def _age(ctx: _Ctx) -> int:
    dob = ctx.person.dob
    return ctx.when.year - dob.year - ((ctx.when.month, ctx.when.day) < (dob.month, dob.day))


def _signed(who: _Person, when: date, time: str, what: str = "Electronically signed") -> str:
    return f"{what}: {who.name} (NPI {who.npi}), {_us(when)} {time}"


# ------------------------------------------------------------------- lab report


@dataclass(frozen=True)
class _Analyte:
    name: str
    unit: str = ""
    dp: int = 0
    low: float | None = None
    high: float | None = None
    span: tuple[float, float] = (0.0, 0.0)
    options: tuple[str, ...] = ()
    formula: Callable[[dict[str, int]], int] | None = None

    def scaled(self, x: float) -> int:
        return round(x * _POW10[self.dp])

    def reference(self) -> str:
        if self.options:
            return self.options[0]
        if self.low is not None and self.high is not None:
            low, high = self.scaled(self.low), self.scaled(self.high)
            return f"{_fixed(low, self.dp)}-{_fixed(high, self.dp)}"
        if self.high is not None:
            return f"<{_fixed(self.scaled(self.high), self.dp)}"
        if self.low is not None:
            return f">{_fixed(self.scaled(self.low), self.dp)}"
        return ""

    def flag(self, value: int) -> str:
        if self.low is not None and self.high is not None:
            return (
                "H"
                if value > self.scaled(self.high)
                else "L"
                if value < self.scaled(self.low)
                else ""
            )
        if self.high is not None:
            return "H" if value >= self.scaled(self.high) else ""
        if self.low is not None:
            return "L" if value <= self.scaled(self.low) else ""
        return ""


@dataclass(frozen=True)
class _Panel:
    keys: tuple[str, ...]
    name: str
    cpt: tuple[str, ...]
    specimen: str
    indications: tuple[tuple[str, str], ...]
    analytes: tuple[_Analyte, ...]
    comment: Callable[[dict[str, int], list[str]], str] | None = None


def _a1c_comment(values: dict[str, int], flagged: list[str]) -> str:
    a1c = values["Hemoglobin A1c"]
    band = (
        "in the diabetes range (6.5% or higher)"
        if a1c >= 65
        else "in the prediabetes range (5.7-6.4%)"
        if a1c >= 57
        else "in the normal range"
    )
    return f"HbA1c {_fixed(a1c, 1)}% is {band}. Estimated average glucose calculated per ADAG."


def _lipid_comment(values: dict[str, int], flagged: list[str]) -> str:
    ldl = values["LDL cholesterol (calculated)"]
    goal = "above" if ldl >= 100 else "at or below"
    return (
        f"LDL calculated by the Friedewald equation; LDL {ldl} mg/dL is {goal} the"
        " optimal target of 100 mg/dL. Fasting specimen (10 hours)."
    )


def _thyroid_comment(values: dict[str, int], flagged: list[str]) -> str:
    tsh = values["TSH"]
    if tsh > 400:
        return "Elevated TSH with free T4 as shown; pattern suggests primary hypothyroidism."
    if tsh < 40:
        return "Low TSH; correlate clinically for hyperthyroidism or over-replacement."
    return "Thyroid function within normal limits."


def _vitd_comment(values: dict[str, int], flagged: list[str]) -> str:
    v = values["25-hydroxyvitamin D, total"]
    band = (
        "deficient (<20)" if v < 20 else "insufficient (20-29)" if v < 30 else "sufficient (30-100)"
    )
    return f"Vitamin D status: {band} ng/mL."


def _ua_comment(values: dict[str, int], flagged: list[str]) -> str:
    if "Nitrite" in flagged or "Leukocyte esterase" in flagged:
        return "Pyuria with positive screen; urine culture added (CPT 87086) per reflex protocol."
    return "No evidence of urinary tract infection."


_CBC = (
    _Analyte("WBC", "x10^3/uL", 1, 4.0, 11.0, (3.4, 12.2)),
    _Analyte("RBC", "x10^6/uL", 2, 4.20, 5.90, (3.95, 5.95)),
    _Analyte("Hemoglobin", "g/dL", 1, 12.0, 17.5, (10.6, 17.2)),
    _Analyte("Hematocrit", "%", 1, 36.0, 52.0, (33.0, 51.0)),
    _Analyte("MCV", "fL", 0, 80, 100, (76, 99)),
    _Analyte("Platelets", "x10^3/uL", 0, 150, 400, (138, 410)),
    _Analyte("Neutrophils", "%", 0, 40, 70, (38, 76)),
    _Analyte("Lymphocytes", "%", 0, 20, 40, (16, 42)),
)
_HEPATIC = (
    _Analyte("ALT", "U/L", 0, 7, 56, (14, 96)),
    _Analyte("AST", "U/L", 0, 10, 40, (15, 74)),
    _Analyte("Alkaline phosphatase", "U/L", 0, 44, 147, (52, 160)),
    _Analyte("Total bilirubin", "mg/dL", 1, 0.1, 1.2, (0.3, 1.5)),
    _Analyte("Albumin", "g/dL", 1, 3.5, 5.0, (3.4, 4.9)),
    _Analyte("Total protein", "g/dL", 1, 6.0, 8.3, (6.1, 8.0)),
)
_LAB_PANELS = (
    _Panel(
        ("complete blood count", "cbc"),
        "Complete blood count (CBC) with differential",
        ("85025",),
        "Whole blood, EDTA (lavender top)",
        (("D64.9", "Anemia, unspecified"), ("R53.83", "Other fatigue")),
        _CBC,
    ),
    _Panel(
        ("comprehensive metabolic", "cmp"),
        "Comprehensive metabolic panel (CMP)",
        ("80053",),
        "Serum (SST), fasting",
        (
            ("E11.9", "Type 2 diabetes mellitus without complications"),
            ("I10", "Essential (primary) hypertension"),
            ("Z79.899", "Other long term (current) drug therapy"),
        ),
        (
            _Analyte("Glucose", "mg/dL", 0, 70, 99, (78, 162)),
            _Analyte("BUN", "mg/dL", 0, 7, 20, (8, 26)),
            _Analyte("Creatinine", "mg/dL", 2, 0.60, 1.30, (0.62, 1.42)),
            _Analyte("Sodium", "mmol/L", 0, 135, 145, (134, 144)),
            _Analyte("Potassium", "mmol/L", 1, 3.5, 5.1, (3.4, 5.3)),
            _Analyte("Chloride", "mmol/L", 0, 98, 107, (97, 108)),
            _Analyte("CO2", "mmol/L", 0, 22, 29, (21, 30)),
            _Analyte("Calcium", "mg/dL", 1, 8.6, 10.3, (8.5, 10.2)),
            *_HEPATIC,
        ),
    ),
    _Panel(
        ("lipid",),
        "Lipid panel",
        ("80061",),
        "Serum (SST), fasting",
        (
            ("E78.5", "Hyperlipidemia, unspecified"),
            ("Z13.220", "Encounter for screening for lipoid disorders"),
        ),
        (
            _Analyte("Total cholesterol", "mg/dL", 0, None, 200, (162, 262)),
            _Analyte("Triglycerides", "mg/dL", 0, None, 150, (78, 236)),
            _Analyte("HDL cholesterol", "mg/dL", 0, 40, None, (34, 74)),
            _Analyte(
                "LDL cholesterol (calculated)",
                "mg/dL",
                0,
                None,
                100,
                formula=lambda v: (
                    v["Total cholesterol"] - v["HDL cholesterol"] - v["Triglycerides"] // 5
                ),
            ),
            _Analyte(
                "Non-HDL cholesterol",
                "mg/dL",
                0,
                None,
                130,
                formula=lambda v: v["Total cholesterol"] - v["HDL cholesterol"],
            ),
        ),
        _lipid_comment,
    ),
    _Panel(
        ("a1c", "hemoglobin a1c"),
        "Hemoglobin A1c",
        ("83036",),
        "Whole blood, EDTA",
        (("E11.9", "Type 2 diabetes mellitus without complications"), ("R73.03", "Prediabetes")),
        (
            _Analyte("Hemoglobin A1c", "%", 1, 4.0, 5.6, (5.3, 9.4)),
            _Analyte(
                "Estimated average glucose",
                "mg/dL",
                0,
                None,
                117,
                formula=lambda v: (287 * v["Hemoglobin A1c"] - 4670 + 50) // 100,
            ),
        ),
        _a1c_comment,
    ),
    _Panel(
        ("thyroid", "tsh"),
        "Thyroid panel",
        ("84443", "84439", "84480"),
        "Serum (SST)",
        (("E03.9", "Hypothyroidism, unspecified"), ("R53.83", "Other fatigue")),
        (
            _Analyte("TSH", "mIU/L", 2, 0.40, 4.00, (0.30, 8.60)),
            _Analyte("Free T4", "ng/dL", 2, 0.80, 1.80, (0.64, 1.72)),
            _Analyte("Total T3", "ng/dL", 0, 80, 200, (76, 182)),
        ),
        _thyroid_comment,
    ),
    _Panel(
        ("urinalysis", "urine"),
        "Urinalysis, complete with microscopy",
        ("81001",),
        "Urine, clean catch midstream",
        (("R30.0", "Dysuria"), ("N39.0", "Urinary tract infection, site not specified")),
        (
            _Analyte("Color", options=("Yellow", "Dark yellow", "Straw")),
            _Analyte("Clarity", options=("Clear", "Slightly cloudy", "Cloudy")),
            _Analyte("Specific gravity", "", 3, 1.005, 1.030, (1.008, 1.028)),
            _Analyte("pH", "", 1, 5.0, 8.0, (5.0, 7.5)),
            _Analyte("Protein", options=("Negative", "Trace")),
            _Analyte("Glucose", options=("Negative", "Trace")),
            _Analyte("Blood", options=("Negative", "Trace", "Small")),
            _Analyte("Leukocyte esterase", options=("Negative", "Small", "Moderate")),
            _Analyte("Nitrite", options=("Negative", "Positive")),
            _Analyte("WBC", "/hpf", 0, 0, 5, (0, 18)),
            _Analyte("RBC", "/hpf", 0, 0, 3, (0, 4)),
        ),
        _ua_comment,
    ),
    _Panel(
        ("vitamin d",),
        "25-hydroxyvitamin D",
        ("82306",),
        "Serum (SST)",
        (("E55.9", "Vitamin D deficiency, unspecified"), ("R53.83", "Other fatigue")),
        (
            _Analyte("25-hydroxyvitamin D, total", "ng/mL", 0, 30, 100, (12, 58)),
            _Analyte("Calcium", "mg/dL", 1, 8.6, 10.3, (8.7, 10.1)),
        ),
        _vitd_comment,
    ),
    _Panel(
        ("liver", "hepatic"),
        "Hepatic function panel",
        ("80076",),
        "Serum (SST)",
        (
            ("R74.01", "Elevation of levels of liver transaminase levels"),
            ("K76.0", "Fatty (change of) liver, not elsewhere classified"),
        ),
        (*_HEPATIC, _Analyte("Direct bilirubin", "mg/dL", 1, 0.0, 0.3, (0.1, 0.4))),
    ),
)
_LAB_FALLBACK = _Panel(
    (),
    "Basic metabolic panel",
    ("80048",),
    "Serum (SST)",
    (("Z00.00", "Encounter for general adult medical examination"),),
    _LAB_PANELS[1].analytes[:8],
)


def _lab_report(ctx: _Ctx) -> _Doc:
    panel = next((p for p in _LAB_PANELS if ctx.has(*p.keys)), _LAB_FALLBACK)
    d = ctx.draw
    doctor = ctx.staff("Doctor")
    code, indication = d.pick("indication", panel.indications)
    values: dict[str, int] = {}
    rows = [("Test", "Result", "Flag", "Units", "Reference")]
    flagged: list[str] = []
    for i, a in enumerate(panel.analytes):
        if a.options:
            result = a.options[0] if d.chance(f"q{i}", 70) else d.pick(f"v{i}", a.options)
            flag = "A" if result != a.options[0] else ""
        else:
            if a.formula is not None:
                value = max(a.formula(values), 0)
            else:
                value = d.num(f"v{i}", a.scaled(a.span[0]), a.scaled(a.span[1]))
            values[a.name] = value
            result, flag = _fixed(value, a.dp), a.flag(value)
        if flag:
            flagged.append(a.name)
        rows.append((a.name, result, flag, a.unit, a.reference()))
    reported = ctx.when + timedelta(days=d.num("tat", 0, 1))
    if flagged:
        summary = "Abnormal results: " + ", ".join(flagged) + "."
    else:
        summary = "All results are within the reference ranges."
    if panel.comment is not None:
        summary += " " + panel.comment(values, flagged)
    doc = _Doc(
        "Clinical Laboratory | CLIA " + CLINIC_CLIA, "LABORATORY REPORT: " + panel.name.upper()
    )
    doc.meta = [
        ("Ordering physician", f"{doctor.name} (NPI {doctor.npi})"),
        ("Collected", f"{_us(ctx.when)} {ctx.time('collected', 7, 10)}"),
        ("Reported", f"{_us(reported)} {ctx.time('reported', 11, 17)}"),
        ("Accession", f"L{ctx.when.year % 100}-{d.digits('accession', 7)}"),
        ("Specimen", panel.specimen),
        ("Order", "CPT " + ", ".join(panel.cpt) + f"; indication ICD-10 {code} {indication}"),
    ]
    doc.blocks = [
        _table(rows),
        _para("Interpretation: " + summary),
        _para(
            f"Results released to {doctor.name} for review and follow-up with the patient."
            " Flags: H high, L low, A abnormal. Critical values are telephoned to the"
            " ordering clinician within 30 minutes."
        ),
        "Verified by:"
        f" {d.pick('tech', ('J. Alvarado, MLS(ASCP)', 'K. Osei, MLS(ASCP)', 'R. Lindqvist, MLT'))}"
        f" | Laboratory director: Dr. Meera Iyer, MD",
    ]
    return doc


# ------------------------------------------------------------------ prescription


@dataclass(frozen=True)
class _Drug:
    keys: tuple[str, ...]
    generic: str
    strength: str
    form: str
    sig: str
    quantities: tuple[str, ...]
    refills: tuple[int, int]
    indication: tuple[str, str]
    counsel: str
    monitor: str
    schedule: str = ""


_DRUGS = (
    _Drug(
        ("lisinopril",),
        "Lisinopril",
        "10 mg",
        "tablet",
        "Take 1 tablet by mouth once daily.",
        ("30 (thirty) tablets", "90 (ninety) tablets"),
        (3, 5),
        ("I10", "Essential (primary) hypertension"),
        "May cause dizziness or a dry cough; report swelling of the lips or face at once.",
        "Recheck BMP (potassium, creatinine) in 2 weeks; home BP log.",
    ),
    _Drug(
        ("metformin",),
        "Metformin HCl",
        "500 mg",
        "tablet",
        "Take 1 tablet by mouth twice daily with meals.",
        ("60 (sixty) tablets", "180 (one hundred eighty) tablets"),
        (3, 5),
        ("E11.9", "Type 2 diabetes mellitus without complications"),
        "Take with food to reduce stomach upset; hold before iodinated contrast.",
        "HbA1c in 3 months; eGFR and vitamin B12 yearly.",
    ),
    _Drug(
        ("atorvastatin",),
        "Atorvastatin calcium",
        "20 mg",
        "tablet",
        "Take 1 tablet by mouth once daily at bedtime.",
        ("30 (thirty) tablets", "90 (ninety) tablets"),
        (3, 5),
        ("E78.5", "Hyperlipidemia, unspecified"),
        "Report unexplained muscle pain or weakness.",
        "Fasting lipid panel and ALT in 6-12 weeks.",
    ),
    _Drug(
        ("amoxicillin",),
        "Amoxicillin",
        "500 mg",
        "capsule",
        "Take 1 capsule by mouth three times daily for 10 days.",
        ("30 (thirty) capsules",),
        (0, 0),
        ("J01.90", "Acute sinusitis, unspecified"),
        "Finish the full course even if feeling better; stop and call for rash or hives.",
        "Return if fever persists beyond 72 hours.",
    ),
    _Drug(
        ("levothyroxine",),
        "Levothyroxine sodium",
        "50 mcg",
        "tablet",
        "Take 1 tablet by mouth once daily on an empty stomach, 30-60 minutes before breakfast.",
        ("30 (thirty) tablets", "90 (ninety) tablets"),
        (3, 5),
        ("E03.9", "Hypothyroidism, unspecified"),
        "Separate from calcium or iron supplements by 4 hours.",
        "TSH in 6-8 weeks after any dose change.",
    ),
    _Drug(
        ("albuterol",),
        "Albuterol sulfate HFA",
        "90 mcg/actuation",
        "metered-dose inhaler",
        "Inhale 2 puffs by mouth every 4-6 hours as needed for wheezing or shortness of breath.",
        ("1 (one) inhaler, 8.5 g (200 actuations)",),
        (1, 2),
        ("J45.20", "Mild intermittent asthma, uncomplicated"),
        "Shake well; use a spacer. Seek care if needed more than twice a week.",
        "Asthma control test at next visit; review inhaler technique.",
    ),
    _Drug(
        ("ibuprofen",),
        "Ibuprofen",
        "600 mg",
        "tablet",
        "Take 1 tablet by mouth every 8 hours as needed for pain. Take with food.",
        ("30 (thirty) tablets",),
        (0, 1),
        ("M54.50", "Low back pain, unspecified"),
        "Do not combine with other NSAIDs; stop for black stools or stomach pain.",
        "Reassess pain and function in 2 weeks.",
    ),
    _Drug(
        ("omeprazole",),
        "Omeprazole",
        "20 mg",
        "delayed-release capsule",
        "Take 1 capsule by mouth once daily 30 minutes before breakfast.",
        ("30 (thirty) capsules", "90 (ninety) capsules"),
        (2, 3),
        ("K21.9", "Gastro-esophageal reflux disease without esophagitis"),
        "Avoid late meals; elevate the head of the bed.",
        "Reassess symptoms in 8 weeks; step down if controlled.",
    ),
    _Drug(
        ("buprenorphine", "suboxone"),
        "Buprenorphine-naloxone",
        "8 mg-2 mg",
        "sublingual film",
        "Dissolve 1 film under the tongue once daily.",
        ("30 (thirty) films",),
        (0, 0),
        ("F11.20", "Opioid dependence, uncomplicated"),
        "Do not combine with alcohol or benzodiazepines; naloxone rescue kit provided.",
        "Urine drug screen and PDMP review at each visit.",
        "CIII",
    ),
)


def _drug_for(ctx: _Ctx) -> tuple[_Drug, str]:
    """The drug a prescription is for, and the Rx line naming it as the title does."""
    drug = next((x for x in _DRUGS if ctx.has(*x.keys)), None)
    strength = re.search(r"\d+(?:\.\d+)?\s*(?:mg|mcg|g|mL|units?)\b", ctx.focus)
    named = re.sub(r"\s*\d.*$", "", ctx.focus).strip()
    if drug is None:
        generic = named or "Medication"
        drug = _Drug(
            (),
            generic,
            "as directed",
            "tablet",
            "Take as directed by your physician.",
            ("30 (thirty) tablets",),
            (0, 2),
            ("Z79.899", "Other long term (current) drug therapy"),
            "Review the pharmacy leaflet.",
            "Follow up at the next visit.",
        )
    if strength is None:
        return drug, f"{drug.generic} {drug.strength} {drug.form}"
    line = f"{named} {strength.group(0)} {drug.form}"
    if drug.generic.lower() != named.lower():
        line += f" ({drug.generic})"
    return drug, line


def _prescription(ctx: _Ctx) -> _Doc:
    d = ctx.draw
    drug, rx_line = _drug_for(ctx)
    doctor = ctx.staff("Doctor")
    allergies = d.pick("allergy", ("No known drug allergies", "Sulfa (rash)", "Codeine (nausea)"))
    doc = _Doc("Outpatient Pharmacy Services", "PRESCRIPTION")
    doc.meta = [
        ("Date written", _us(ctx.when)),
        ("Rx number", f"RX{ctx.when.year % 100}-{d.digits('rx', 6)}"),
        ("Prescriber", f"{doctor.name} (NPI {doctor.npi})"),
        ("Allergies", allergies),
    ]
    if drug.schedule:
        doc.meta.append(("DEA schedule", f"{drug.schedule}; prescriber DEA registration verified"))
    refills = d.num("refills", *drug.refills)
    doc.blocks = [
        _fields(
            [
                ("Rx", rx_line),
                ("Sig", drug.sig),
                ("Dispense", d.pick("qty", drug.quantities)),
                ("Refills", f"{refills} ({'no refills' if refills == 0 else 'as authorized'})"),
                ("Substitution", "Generic substitution permitted"),
                ("Indication", f"ICD-10 {drug.indication[0]} {drug.indication[1]}"),
            ]
        ),
        _para(
            f"Pharmacy: Riverside Community Pharmacy, 455 Market St, Riverside, CA 92501;"
            f" transmitted electronically on {_us(ctx.when)} at {ctx.time('sent', 9, 17)}."
        ),
        _para("Patient counseling: " + drug.counsel),
        _para(
            "Monitoring: " + drug.monitor + f" Next follow-up with {doctor.name} on"
            f" {_us(ctx.when + timedelta(days=d.num('next', 14, 90)))}."
        ),
        _signed(doctor, ctx.when, ctx.time("signed", 9, 17)),
    ]
    return doc


# ---------------------------------------------------------- visit / clinical note


@dataclass(frozen=True)
class _Note:
    visit: str
    complaint: str
    subjective: str
    objective: str
    dx: tuple[tuple[str, str], ...]
    plan: tuple[str, ...]
    cpt: tuple[tuple[str, str], ...]
    extra: str = ""


def _note_follow_up(ctx: _Ctx) -> _Note:
    d = ctx.draw
    topic = d.pick(
        "topic",
        (
            ("hypertension", "I10", "Essential (primary) hypertension", "amlodipine 5 mg daily"),
            ("hyperlipidemia", "E78.5", "Hyperlipidemia, unspecified", "atorvastatin 20 mg daily"),
            (
                "reflux",
                "K21.9",
                "Gastro-esophageal reflux disease without esophagitis",
                "omeprazole 20 mg daily",
            ),
            (
                "hypothyroidism",
                "E03.9",
                "Hypothyroidism, unspecified",
                "levothyroxine 50 mcg daily",
            ),
        ),
    )
    return _Note(
        "Follow-up visit",
        f"Follow-up of {topic[0]}",
        f"{ctx.name} returns for a {d.num('weeks', 4, 12)}-week follow-up of {topic[0]}. Taking"
        f" {topic[3]} as prescribed with no side effects reported. No chest pain, dyspnea or"
        " new complaints. Diet and activity reviewed; walking 30 minutes most days.",
        _vitals(ctx) + " Alert, in no distress. Heart regular rate and rhythm, no murmur."
        " Lungs clear bilaterally. No peripheral edema.",
        ((topic[1], topic[2]),),
        (
            f"Continue {topic[3]}.",
            "Labs before next visit: CMP and condition-specific panel.",
            f"Return in {d.num('return', 3, 6)} months or sooner if symptoms change.",
        ),
        (("99213", "Office visit, established patient, low complexity"),),
    )


def _note_physical(ctx: _Ctx) -> _Note:
    d = ctx.draw
    age = _age(ctx)
    cpt = (
        ("99395", "Preventive visit, established patient, 18-39 years")
        if age < 40
        else ("99396", "Preventive visit, established patient, 40-64 years")
    )
    return _Note(
        "Annual physical",
        "Annual preventive examination",
        f"{ctx.name}, age {age}, presents for an annual physical. No acute complaints. Exercises"
        f" {d.num('exercise', 1, 5)} days per week; never smoker; alcohol"
        f" {d.pick('alcohol', ('none', '1-2 drinks per week', 'occasional, social'))}."
        " Immunizations reviewed; influenza vaccine due.",
        _vitals(ctx) + f" Height {ctx.person.height_in} in, BMI {_bmi(ctx)} kg/m2. HEENT normal."
        " Heart and"
        " lungs normal. Abdomen soft, non-tender. Skin without suspicious lesions.",
        (
            ("Z00.00", "Encounter for general adult medical examination without abnormal findings"),
            ("Z23", "Encounter for immunization"),
        ),
        (
            "Influenza vaccine administered today (CPT 90686, administration 90471).",
            "Fasting lipid panel and HbA1c ordered.",
            "Age-appropriate cancer screening discussed and scheduled.",
            "Return in 12 months for the next preventive visit.",
        ),
        (cpt,),
    )


def _note_cough(ctx: _Ctx) -> _Note:
    d = ctx.draw
    days = d.num("days", 4, 12)
    return _Note(
        "Acute visit",
        f"Cough for {days} days",
        f"{ctx.name} reports a productive cough for {days} days with nasal congestion and mild"
        " fatigue. Low-grade fever at onset, now resolved. No hemoptysis, chest pain or"
        " shortness of breath. No sick contacts with pneumonia. Non-smoker.",
        _vitals(ctx, temp=(980, 1000)) + " Oropharynx mildly erythematous. Lungs with scattered"
        " rhonchi that clear with cough, no crackles or wheeze. No respiratory distress.",
        (("J20.9", "Acute bronchitis, unspecified"),),
        (
            "Supportive care: fluids, rest, honey for cough.",
            "Benzonatate 100 mg by mouth three times daily as needed, #21.",
            "No antibiotic indicated; chest X-ray if fever returns or symptoms exceed 3 weeks.",
            "Return precautions reviewed: shortness of breath, high fever, chest pain.",
        ),
        (("99213", "Office visit, established patient, low complexity"),),
    )


def _note_hypertension(ctx: _Ctx) -> _Note:
    d = ctx.draw
    home = f"{d.num('home-sbp', 132, 152)}/{d.num('home-dbp', 82, 94)}"
    return _Note(
        "Hypertension review",
        "Blood pressure follow-up",
        f"{ctx.name} presents for hypertension review. Home readings average {home} mmHg over"
        f" the past {d.num('weeks', 2, 6)} weeks. Taking lisinopril 10 mg daily; no cough or"
        " dizziness. Sodium intake reduced; no headache, chest pain or vision change.",
        _vitals(ctx, systolic=(138, 156)) + " Fundi not examined. Heart regular, no murmur."
        " No carotid bruit. Lungs clear. No edema.",
        (("I10", "Essential (primary) hypertension"),),
        (
            "Increase lisinopril to 20 mg daily.",
            "BMP (potassium, creatinine) in 2 weeks.",
            "Continue home BP log; target below 130/80 mmHg.",
            f"Return in {d.num('return', 4, 8)} weeks.",
        ),
        (("99214", "Office visit, established patient, moderate complexity"),),
    )


def _note_diabetes(ctx: _Ctx) -> _Note:
    d = ctx.draw
    a1c = d.num("a1c", 64, 92)
    code = (
        ("E11.65", "Type 2 diabetes mellitus with hyperglycemia")
        if a1c >= 80
        else ("E11.9", "Type 2 diabetes mellitus without complications")
    )
    return _Note(
        "Diabetes review",
        "Type 2 diabetes follow-up",
        f"{ctx.name} presents for diabetes review. Taking metformin 500 mg twice daily. Fasting"
        f" home glucose {d.num('fbg', 110, 168)}-{d.num('fbg2', 170, 210)} mg/dL. No hypoglycemia."
        " Denies polyuria, numbness or foot wounds.",
        _vitals(ctx) + f" Latest HbA1c {_fixed(a1c, 1)}%. Monofilament sensation intact"
        " bilaterally; pedal pulses 2+. No foot ulcers.",
        (code,),
        (
            "Increase metformin to 1000 mg twice daily."
            if a1c >= 75
            else "Continue metformin 500 mg twice daily.",
            "Urine albumin-to-creatinine ratio and lipid panel ordered.",
            "Referral for annual diabetic eye exam.",
            "HbA1c in 3 months; diabetes education class offered.",
        ),
        (("99214", "Office visit, established patient, moderate complexity"),),
    )


def _note_post_op(ctx: _Ctx) -> _Note:
    d = ctx.draw
    surgery, code, desc = d.pick(
        "surgery",
        (
            ("right knee arthroscopy", "Z47.89", "Encounter for other orthopedic aftercare"),
            (
                "laparoscopic appendectomy",
                "Z48.815",
                "Encounter for surgical aftercare following surgery on the digestive system",
            ),
        ),
    )
    days = d.num("days", 10, 16)
    return _Note(
        "Post-operative check",
        f"Post-operative visit, day {days}",
        f"{ctx.name} is seen {days} days after {surgery}. Pain controlled with acetaminophen;"
        " no fever, chills, drainage or calf pain. Tolerating diet; ambulating independently.",
        _vitals(ctx) + " Incisions clean, dry and intact; no erythema or drainage. Sutures"
        " removed, steri-strips applied. Neurovascular status intact.",
        ((code, desc),),
        (
            "Resume normal activity gradually; no heavy lifting for 2 more weeks.",
            "Wound care instructions reviewed.",
            "Return as needed; final check in 6 weeks.",
        ),
        (("99024", "Postoperative follow-up visit, included in global service"),),
    )


def _note_knee(ctx: _Ctx) -> _Note:
    d = ctx.draw
    side = d.pick("side", ("right", "left"))
    code = "M25.561" if side == "right" else "M25.562"
    return _Note(
        "Knee pain visit",
        f"{side.capitalize()} knee pain",
        f"{ctx.name} reports {side} knee pain for {d.num('weeks', 2, 8)} weeks after a twisting"
        " injury while hiking. Pain worse on stairs and squatting, with intermittent catching."
        " No locking or giving way. Ibuprofen helps partially.",
        _vitals(ctx) + f" {side.capitalize()} knee: small effusion, medial joint line tenderness,"
        " positive McMurray test, ligaments stable, range of motion 0-120 degrees.",
        ((code, f"Pain in {side} knee"),),
        (
            f"X-ray of the {side} knee, 3 views (CPT 73562).",
            "Physical therapy referral, 2 sessions per week for 6 weeks.",
            "Ibuprofen 600 mg with food as needed; ice after activity.",
            "MRI if no improvement in 6 weeks; orthopaedic referral if mechanical symptoms.",
        ),
        (("99213", "Office visit, established patient, low complexity"),),
    )


def _note_hiv(ctx: _Ctx) -> _Note:
    d = ctx.draw
    cd4 = d.num("cd4", 380, 910)
    undetectable = d.chance("vl", 75)
    vl = "<20 copies/mL (undetectable)" if undetectable else f"{d.num('vl-n', 40, 180)} copies/mL"
    return _Note(
        "HIV care visit",
        "Routine HIV follow-up",
        f"{ctx.name} presents for routine HIV care. Diagnosed {d.num('dx-year', 2012, 2021)};"
        " on antiretroviral therapy with bictegravir/emtricitabine/tenofovir alafenamide"
        " (Biktarvy) one tablet daily. Reports missing no more than one dose per month. No fevers,"
        " night sweats, weight loss or opportunistic infection symptoms.",
        _vitals(ctx) + " No oral thrush or lymphadenopathy. Skin without rash.",
        (
            ("B20", "Human immunodeficiency virus [HIV] disease"),
            ("Z79.899", "Other long term (current) drug therapy"),
        ),
        (
            "Continue Biktarvy one tablet daily; adherence counseling provided.",
            "Repeat HIV-1 viral load (CPT 87536) and CD4 count (CPT 86361) in 3 months.",
            "STI screening and hepatitis B/C serologies per guideline.",
            "Partner PrEP referral offered; return in 3 months.",
        ),
        (("99214", "Office visit, established patient, moderate complexity"),),
        _table(
            [
                ("Result", "Value", "Prior"),
                ("HIV-1 RNA viral load", vl, "<20 copies/mL"),
                ("CD4 count", f"{cd4} cells/uL", f"{cd4 - d.num('cd4-delta', -60, 80)} cells/uL"),
                ("CD4 percent", f"{d.num('cd4p', 24, 41)}%", ""),
            ]
        ),
    )


def _note_prenatal(ctx: _Ctx) -> _Note:
    d = ctx.draw
    ga_days = d.num("ga", 10 * 7, 34 * 7 + 6)
    edd = ctx.when + timedelta(days=280 - ga_days)
    weeks = ga_days // 7
    code = (
        ("Z34.81", "first")
        if weeks < 14
        else ("Z34.82", "second")
        if weeks < 28
        else ("Z34.83", "third")
    )
    gravida = d.num("g", 1, 3)
    fundal = (
        f"{weeks + d.num('fh', -1, 1)} cm" if weeks >= 20 else "not yet palpable above symphysis"
    )
    return _Note(
        "Prenatal visit",
        f"Routine prenatal care, {weeks} weeks {ga_days % 7} days",
        f"{ctx.name}, G{gravida}P{gravida - 1}, presents for a routine prenatal visit at"
        f" {weeks}w{ga_days % 7}d by first-trimester ultrasound; estimated due date"
        f" {_us(edd)}. Reports"
        f" {'good fetal movement' if weeks >= 20 else 'mild nausea, improving'}. No bleeding,"
        " leakage of fluid, headaches or visual changes. Taking prenatal vitamins daily.",
        _vitals(ctx, systolic=(104, 126)) + f" Fundal height {fundal}; fetal heart rate"
        f" {d.num('fhr', 132, 158)} bpm by Doppler. Urine dipstick negative for protein and"
        " glucose.",
        ((code[0], f"Encounter for supervision of other normal pregnancy, {code[1]} trimester"),),
        (
            "Continue prenatal vitamins with folic acid 0.4 mg daily.",
            "Anatomy ultrasound at 18-22 weeks."
            if weeks < 22
            else "Glucose challenge test at 24-28 weeks."
            if weeks < 29
            else "Group B streptococcus screening at 36-37 weeks.",
            "Tdap vaccine at 27-36 weeks; influenza vaccine offered.",
            "Return in 2 weeks." if weeks >= 28 else "Return in 4 weeks.",
        ),
        (("59425", "Antepartum care, 4-6 visits (global obstetric package)"),),
    )


def _note_oud(ctx: _Ctx) -> _Note:
    d = ctx.draw
    months = d.num("months", 3, 26)
    dose = d.pick("dose", ("8 mg-2 mg", "12 mg-3 mg", "16 mg-4 mg"))
    return _Note(
        "Opioid use disorder visit",
        "Medication for opioid use disorder, maintenance",
        f"{ctx.name} presents for opioid use disorder treatment, month {months} on"
        f" buprenorphine-naloxone {dose} sublingual film daily. Reports no opioid use since the"
        " last"
        f" visit and {d.pick('cravings', ('minimal', 'occasional, manageable', 'no'))} cravings."
        " Attending weekly group counseling. Employed; housing stable.",
        _vitals(ctx) + " No signs of withdrawal or intoxication; pupils normal; no injection"
        " stigmata. Mood euthymic.",
        (("F11.20", "Opioid dependence, uncomplicated"),),
        (
            f"Continue buprenorphine-naloxone {dose} daily; 28-day supply, no early refills.",
            "Urine drug screen today (CPT 80305): positive for buprenorphine, negative for"
            " fentanyl,"
            " other opioids and benzodiazepines. State PDMP reviewed, consistent.",
            "Naloxone 4 mg nasal spray rescue kit confirmed at home.",
            "Continue counseling; return in 4 weeks.",
        ),
        (
            ("99214", "Office visit, established patient, moderate complexity"),
            ("80305", "Drug test, presumptive, by direct optical observation"),
        ),
    )


def _note_generic(ctx: _Ctx) -> _Note:
    reason = ctx.label.extra_sensitive_reason or ""
    if "hiv" in reason.lower():
        return _note_hiv(ctx)
    if "reproductive" in reason.lower():
        return _note_prenatal(ctx)
    if "substance" in reason.lower():
        return _note_oud(ctx)
    if "mental" in reason.lower():
        return _mha_depression(ctx)
    return _note_follow_up(ctx)


_VISITS: tuple[tuple[tuple[str, ...], Callable[[_Ctx], _Note]], ...] = (
    (("hiv",), _note_hiv),
    (("prenatal", "pregnan", "obstetric"), _note_prenatal),
    (("opioid", "buprenorphine"), _note_oud),
    (("physical", "preventive", "wellness"), _note_physical),
    (("cough", "bronchitis", "acute"), _note_cough),
    (("hypertension", "blood pressure"), _note_hypertension),
    (("diabetes",), _note_diabetes),
    (("post-operative", "postoperative", "post-op"), _note_post_op),
    (("knee",), _note_knee),
    (("follow-up", "follow up"), _note_follow_up),
)


def _render_note(ctx: _Ctx, note: _Note, department: str, heading: str) -> _Doc:
    doctor = ctx.staff("Doctor")
    doc = _Doc(department, heading)
    doc.meta = [
        ("Visit", note.visit),
        ("Date of service", _us(ctx.when)),
        ("Attending", doctor.name),
        ("Chief complaint", note.complaint),
    ]
    doc.blocks = [
        "SUBJECTIVE\n" + _para(note.subjective),
        "OBJECTIVE\n" + _para(note.objective),
    ]
    if note.extra:
        doc.blocks.append(note.extra)
    doc.blocks += [
        "ASSESSMENT\n" + "\n".join(f"- {code} {desc}" for code, desc in note.dx),
        "PLAN\n" + _bullets(note.plan, numbered=True),
        "Billing:\n"
        + _bullets(
            [f"{'HCPCS' if code[0].isalpha() else 'CPT'} {code} {desc}" for code, desc in note.cpt]
        ),
        _signed(doctor, ctx.when, ctx.time("signed", 12, 18)),
    ]
    return doc


def _clinical_note(ctx: _Ctx) -> _Doc:
    maker = next((fn for keys, fn in _VISITS if ctx.has(*keys)), None)
    note = maker(ctx) if maker is not None else _note_generic(ctx)
    return _render_note(ctx, note, "Primary Care", "CLINICAL NOTE: " + note.visit.upper())


# ------------------------------------------------------- mental health assessment


def _phq9_band(score: int) -> str:
    return (
        "minimal"
        if score < 5
        else "mild"
        if score < 10
        else "moderate"
        if score < 15
        else "moderately severe"
        if score < 20
        else "severe"
    )


def _gad7_band(score: int) -> str:
    return (
        "minimal" if score < 5 else "mild" if score < 10 else "moderate" if score < 15 else "severe"
    )


def _mse(ctx: _Ctx, mood: str) -> str:
    return (
        f"Mental status: alert and oriented x3, casually groomed, cooperative. Speech normal"
        f' rate and volume. Mood "{mood}"; affect congruent. Thought process linear; no'
        " delusions or hallucinations. Insight and judgment fair to good."
    )


def _mha_intake(ctx: _Ctx) -> _Note:
    d = ctx.draw
    phq, gad = d.num("phq", 13, 22), d.num("gad", 8, 15)
    dx = (
        ("F33.2", "Major depressive disorder, recurrent severe without psychotic features")
        if phq >= 20
        else ("F33.1", "Major depressive disorder, recurrent, moderate")
    )
    return _Note(
        "Psychiatric intake assessment",
        "Low mood, poor sleep and loss of interest",
        f"{ctx.name} presents for psychiatric evaluation of"
        f" {d.num('months', 2, 9)} months of depressed mood, anhedonia, early waking, low energy"
        " and"
        " poor concentration affecting work. Prior episode treated with counseling. No mania or"
        " psychosis. Alcohol rarely; no drug use. Family history of depression.",
        _mse(ctx, "down") + " Columbia (C-SSRS) screen: passive death wishes, no suicidal"
        " intent or plan, no prior attempts; no access to firearms.",
        (dx,),
        (
            "Start sertraline 50 mg daily; increase to 100 mg in 2 weeks if tolerated.",
            "Weekly cognitive behavioral therapy with clinic psychotherapist.",
            "Safety plan completed; 988 Suicide and Crisis Lifeline provided.",
            "Return in 4 weeks; repeat PHQ-9 and GAD-7.",
        ),
        (("90792", "Psychiatric diagnostic evaluation with medical services"),),
        _table(
            [
                ("Screening instrument", "Score", "Severity"),
                ("PHQ-9 (depression)", f"{phq}/27", _phq9_band(phq)),
                ("GAD-7 (anxiety)", f"{gad}/21", _gad7_band(gad)),
            ]
        ),
    )


def _mha_depression(ctx: _Ctx) -> _Note:
    d = ctx.draw
    before, now = d.num("phq-before", 15, 21), d.num("phq-now", 6, 13)
    drug = d.pick("drug", ("sertraline 100 mg", "escitalopram 10 mg", "bupropion XL 150 mg"))
    return _Note(
        "Depression screening follow-up",
        "Follow-up of major depressive disorder",
        f"{ctx.name} returns for depression follow-up after {d.num('weeks', 6, 12)} weeks on"
        f" {drug} daily. Sleep and energy improved; still low motivation in the mornings. Side"
        " effects: none significant. Attending psychotherapy every two weeks.",
        _mse(ctx, "better") + " Denies suicidal ideation, intent or plan.",
        (("F32.1", "Major depressive disorder, single episode, moderate"),),
        (
            f"Continue {drug} daily; reassess dose at next visit.",
            "Continue psychotherapy; behavioral activation goals set.",
            "Crisis resources reviewed (988).",
            "Return in 6 weeks with repeat PHQ-9.",
        ),
        (
            ("99214", "Office visit, established patient, moderate complexity"),
            ("96127", "Brief emotional/behavioral assessment (PHQ-9)"),
        ),
        _table(
            [
                ("Screening instrument", "Baseline", "Today", "Severity today"),
                ("PHQ-9 (depression)", f"{before}/27", f"{now}/27", _phq9_band(now)),
            ]
        ),
    )


def _mha_substance(ctx: _Ctx) -> _Note:
    d = ctx.draw
    substance, code, desc = d.pick(
        "substance",
        (
            ("cannabis", "F12.20", "Cannabis dependence, uncomplicated"),
            ("methamphetamine", "F15.20", "Other stimulant dependence, uncomplicated"),
            ("prescription opioids", "F11.20", "Opioid dependence, uncomplicated"),
        ),
    )
    criteria, dast = d.num("criteria", 4, 7), d.num("dast", 4, 8)
    severity = "moderate" if criteria < 6 else "severe"
    return _Note(
        "Substance use assessment",
        f"Evaluation of {substance} use",
        f"{ctx.name} requests help with {substance} use, daily for about"
        f" {d.num('months', 6, 30)} months, with unsuccessful attempts to cut down, cravings,"
        " and missed work. No prior treatment. Alcohol 2-3 drinks per week. No overdose history.",
        _mse(ctx, "stressed") + f" DSM-5 substance use disorder criteria met: {criteria} of 11"
        f" ({severity}). ASAM level of care recommendation: 2.1 intensive outpatient.",
        ((code, desc),),
        (
            "Referral to intensive outpatient program, 9 hours per week.",
            "Motivational interviewing begun; patient agrees to a change plan.",
            "Urine drug screen (CPT 80305) today; naloxone kit offered.",
            "Return in 2 weeks; consent for coordination under 42 CFR Part 2 signed.",
        ),
        (("H0001", "Alcohol and/or drug assessment"),),
        _table(
            [
                ("Screening instrument", "Score"),
                ("DAST-10", f"{dast}/10"),
                ("AUDIT-C", f"{d.num('auditc', 1, 3)}/12"),
            ]
        ),
    )


def _mha_anxiety(ctx: _Ctx) -> _Note:
    d = ctx.draw
    gad, phq = d.num("gad", 11, 18), d.num("phq", 5, 9)
    return _Note(
        "Anxiety disorder assessment",
        "Persistent worry and restlessness",
        f"{ctx.name} describes {d.num('months', 7, 24)} months of excessive worry about work and"
        " health, muscle tension, irritability and trouble falling asleep, with two episodes of"
        " palpitations and breathlessness. No substance use. Caffeine 3 cups daily.",
        _mse(ctx, "on edge") + " Denies suicidal ideation. TSH normal last month.",
        (("F41.1", "Generalized anxiety disorder"),),
        (
            "Start escitalopram 10 mg daily; review side effects.",
            "Cognitive behavioral therapy, 12 weekly sessions.",
            "Reduce caffeine; sleep hygiene handout given.",
            "Return in 4 weeks with repeat GAD-7.",
        ),
        (("90791", "Psychiatric diagnostic evaluation"),),
        _table(
            [
                ("Screening instrument", "Score", "Severity"),
                ("GAD-7 (anxiety)", f"{gad}/21", _gad7_band(gad)),
                ("PHQ-9 (depression)", f"{phq}/27", _phq9_band(phq)),
            ]
        ),
    )


def _mha_alcohol(ctx: _Ctx) -> _Note:
    d = ctx.draw
    days = d.num("sober", 21, 140)
    return _Note(
        "Alcohol use disorder follow-up",
        "Alcohol use disorder, medication follow-up",
        f"{ctx.name} returns on naltrexone 50 mg daily; reports {days} days without alcohol and"
        " reduced cravings. Attending mutual-help meetings twice weekly. One near-lapse at a"
        " family event, managed with coping plan. Sleep improving.",
        _mse(ctx, "hopeful") + f" No tremor or withdrawal signs. GGT {d.num('ggt', 28, 74)} U/L,"
        f" down from {d.num('ggt0', 90, 160)} U/L at intake.",
        (("F10.20", "Alcohol dependence, uncomplicated"),),
        (
            "Continue naltrexone 50 mg daily; hepatic panel in 3 months.",
            "Continue counseling and mutual-help meetings.",
            "Relapse prevention plan updated with family support.",
            "Return in 4 weeks.",
        ),
        (
            ("99214", "Office visit, established patient, moderate complexity"),
            ("99408", "Alcohol/substance screening and brief intervention, 15-30 minutes"),
        ),
        _table(
            [
                ("Screening instrument", "Intake", "Today"),
                ("AUDIT", f"{d.num('audit0', 18, 27)}/40", f"{d.num('audit', 4, 9)}/40"),
            ]
        ),
    )


_ASSESSMENTS: tuple[tuple[tuple[str, ...], Callable[[_Ctx], _Note]], ...] = (
    (("alcohol",), _mha_alcohol),
    (("substance", "drug use", "opioid"), _mha_substance),
    (("anxiety", "panic"), _mha_anxiety),
    (("depression",), _mha_depression),
    (("intake", "psychiatric", "evaluation"), _mha_intake),
)


def _mental_health(ctx: _Ctx) -> _Doc:
    maker = next((fn for keys, fn in _ASSESSMENTS if ctx.has(*keys)), None)
    if maker is None:
        reason = (ctx.label.extra_sensitive_reason or "").lower()
        maker = _mha_substance if "substance" in reason else _mha_intake
    note = maker(ctx)
    return _render_note(
        ctx, note, "Behavioral Health", "MENTAL HEALTH ASSESSMENT: " + note.visit.upper()
    )


# ------------------------------------------------------------- referral letter

_SPECIALTIES: tuple[tuple[str, tuple[tuple[str, str, str], ...]], ...] = (
    (
        "cardiology",
        (
            (
                "R00.2",
                "Palpitations",
                "intermittent palpitations for two months; ECG shows sinus"
                " rhythm with occasional premature ventricular complexes",
            ),
            (
                "R07.89",
                "Other chest pain",
                "exertional chest tightness relieved by rest; resting ECG"
                " normal and troponin negative",
            ),
        ),
    ),
    (
        "endocrinology",
        (
            (
                "E11.65",
                "Type 2 diabetes mellitus with hyperglycemia",
                "HbA1c above 9% despite metformin 1000 mg twice daily and dietary counseling",
            ),
            (
                "E04.1",
                "Nontoxic single thyroid nodule",
                "a 1.8 cm left thyroid nodule on ultrasound with normal TSH",
            ),
        ),
    ),
    (
        "orthopaedic",
        (
            (
                "M25.561",
                "Pain in right knee",
                "right knee pain with catching after a twisting injury,"
                " not improved after 6 weeks of physical therapy",
            ),
            (
                "M54.16",
                "Radiculopathy, lumbar region",
                "low back pain radiating to the left leg for 3 months despite physical therapy",
            ),
        ),
    ),
    (
        "dermatology",
        (
            (
                "D48.5",
                "Neoplasm of uncertain behavior of skin",
                "a changing pigmented lesion on the upper back, 7 mm, irregular border",
            ),
            (
                "L40.0",
                "Psoriasis vulgaris",
                "plaque psoriasis on elbows and knees not controlled with topical steroids",
            ),
        ),
    ),
    (
        "gastroenterology",
        (
            (
                "R74.01",
                "Elevation of levels of liver transaminase levels",
                "ALT and AST persistently"
                " elevated on two panels three months apart; hepatitis serologies negative",
            ),
            (
                "K21.9",
                "Gastro-esophageal reflux disease without esophagitis",
                "reflux symptoms persisting after 8 weeks of omeprazole 20 mg daily",
            ),
        ),
    ),
    (
        "neurology",
        (
            (
                "G43.009",
                "Migraine without aura, not intractable",
                "recurrent headaches 6-8 days a"
                " month, normal neurological exam; head CT unremarkable",
            ),
            ("R20.2", "Paresthesia of skin", "episodic numbness of the left hand over 2 months"),
        ),
    ),
)


def _referral(ctx: _Ctx) -> _Doc:
    d = ctx.draw
    doctor = ctx.staff("Doctor")
    specialty, options = next(((s, o) for s, o in _SPECIALTIES if ctx.has(s)), (None, None))
    if specialty is None or options is None:
        specialty = re.sub(r"(?i)^referral to\s*", "", ctx.focus).strip() or "specialist care"
        code, desc, story = (
            "Z71.89",
            "Other specified counseling",
            "symptoms that need specialist assessment",
        )
    else:
        code, desc, story = d.pick("reason", options)
    urgency = d.pick("urgency", ("Routine (within 4-6 weeks)", "Soon (within 2 weeks)"))
    history, meds = d.pick(
        "history",
        (
            ("hypertension, well controlled", "lisinopril 10 mg daily"),
            ("no significant past medical history", "none regular"),
            ("hyperlipidemia on a statin", "atorvastatin 20 mg daily"),
            ("mild intermittent asthma", "albuterol inhaler as needed"),
        ),
    )
    dept = {"orthopaedic": "Orthopaedics"}.get(specialty, _title_case(specialty))
    doc = _Doc("Primary Care", "REFERRAL LETTER")
    doc.meta = [
        ("Date", _long(ctx.when)),
        ("To", f"{dept} Department, Riverside Regional Specialty Center"),
        ("From", f"{doctor.name} (NPI {doctor.npi})"),
        ("Urgency", urgency),
        ("Reason for referral", f"ICD-10 {code} {desc}"),
    ]
    doc.blocks = [
        "Dear Colleague,",
        _para(
            f"I am referring {ctx.name} for {dept.lower()} evaluation of {story}. The patient"
            " has been under my care at Riverside Medical Clinic and I would value your opinion"
            " on further investigation and management."
        ),
        _para(
            f"Relevant history: {history}. Current medications: {meds}."
            f" Allergies: {d.pick('allergy', ('none known', 'penicillin (rash)'))}. Most recent"
            f" visit {_us(ctx.when - timedelta(days=d.num('seen', 3, 20)))}; " + _vitals(ctx)
        ),
        _para(
            "Specific question: please advise on diagnosis and treatment, and whether"
            " procedures or imaging are indicated. Recent results are attached through the"
            " shared EHR. I will continue primary care and would appreciate a copy of your"
            " consultation note."
        ),
        f"Sincerely,\n{doctor.name}\n{CLINIC_NAME} | {CLINIC_PHONE}",
    ]
    return doc


# ------------------------------------------------------------ discharge summary


@dataclass(frozen=True)
class _Stay:
    keys: tuple[str, ...]
    reason: str
    dx: tuple[tuple[str, str], ...]
    procedure: str
    course: str
    meds: tuple[str, ...]
    instructions: str
    days: tuple[int, int]


_STAYS = (
    _Stay(
        ("appendectomy", "appendicitis"),
        "Acute right lower quadrant abdominal pain",
        (("K35.80", "Unspecified acute appendicitis"),),
        "Laparoscopic appendectomy (CPT 44970)",
        "CT abdomen confirmed acute non-perforated appendicitis. Underwent uncomplicated"
        " laparoscopic appendectomy on the day of admission. Tolerated diet on post-operative"
        " day 1; pain controlled with oral analgesics; afebrile.",
        (
            "Acetaminophen 650 mg by mouth every 6 hours as needed for pain",
            "Ibuprofen 600 mg by mouth every 8 hours with food as needed for 5 days",
        ),
        "No lifting over 10 lb for 2 weeks. May shower; keep incisions dry. Call for fever"
        " over 101 F, worsening pain or redness at the incisions.",
        (1, 2),
    ),
    _Stay(
        ("pneumonia",),
        "Fever, productive cough and shortness of breath",
        (("J18.9", "Pneumonia, unspecified organism"),),
        "None",
        "Chest X-ray showed right lower lobe consolidation. Treated with IV ceftriaxone and"
        " azithromycin, then switched to oral therapy on hospital day 3. Oxygen weaned to room"
        " air with saturation 95%. Blood cultures negative.",
        (
            "Amoxicillin-clavulanate 875 mg-125 mg by mouth twice daily for 5 more days",
            "Guaifenesin 600 mg by mouth every 12 hours as needed for cough",
        ),
        "Rest and fluids. Return for shortness of breath, fever over 101 F or chest pain."
        " Repeat chest X-ray in 6 weeks.",
        (3, 4),
    ),
    _Stay(
        ("arthroscopy", "meniscus"),
        "Right knee pain with mechanical catching",
        (
            (
                "M23.221",
                "Derangement of posterior horn of medial meniscus due to old tear, right knee",
            ),
        ),
        "Right knee arthroscopy with partial medial meniscectomy (CPT 29881)",
        "Outpatient surgery under general anesthesia without complication. Posterior horn"
        " medial meniscus tear debrided. Ambulating with crutches, weight bearing as tolerated.",
        (
            "Acetaminophen 1000 mg by mouth every 8 hours as needed for pain",
            "Naproxen 500 mg by mouth twice daily with food for 7 days",
        ),
        "Ice and elevate 20 minutes every 2 hours. Keep dressing dry for 48 hours. Begin home"
        " exercises; physical therapy starts in 1 week.",
        (0, 0),
    ),
    _Stay(
        ("chest pain",),
        "Substernal chest pain",
        (("R07.89", "Other chest pain"), ("I10", "Essential (primary) hypertension")),
        "Exercise treadmill stress test (CPT 93015)",
        "Placed in observation. Serial high-sensitivity troponins negative; ECG normal sinus"
        " rhythm without ischemic changes. Exercise stress test negative for ischemia at 10"
        " METs. Pain judged musculoskeletal.",
        ("Aspirin 81 mg by mouth daily", "Lisinopril 10 mg by mouth daily (unchanged)"),
        "Call 911 for chest pain at rest or lasting over 15 minutes. Outpatient lipid panel.",
        (1, 1),
    ),
    _Stay(
        ("cellulitis",),
        "Red, swollen and painful left lower leg",
        (("L03.116", "Cellulitis of left lower limb"),),
        "None",
        "Treated with IV cefazolin 2 g every 8 hours with leg elevation. Erythema receded within"
        " the marked borders; afebrile for 36 hours. Ultrasound negative for deep vein"
        " thrombosis.",
        ("Cephalexin 500 mg by mouth four times daily for 7 days",),
        "Keep the leg elevated; moisturize dry skin. Return if redness spreads beyond the"
        " marked line or fever recurs.",
        (2, 4),
    ),
)


def _discharge(ctx: _Ctx) -> _Doc:
    d = ctx.draw
    doctor = ctx.staff("Doctor")
    stay = next((s for s in _STAYS if ctx.has(*s.keys)), None)
    if stay is None:
        stay = _Stay(
            (),
            ctx.focus.replace("Discharge after", "").strip() or "Admission",
            (("R69", "Illness, unspecified"),),
            "None",
            "Evaluated, treated and observed without complication.",
            ("Continue home medications",),
            "Follow up with your physician.",
            (1, 3),
        )
    length = d.num("los", *stay.days)
    discharged = ctx.when
    admitted = discharged - timedelta(days=length)
    follow = discharged + timedelta(days=d.num("follow", 7, 14))
    doc = _Doc("Inpatient and Observation Services", "DISCHARGE SUMMARY")
    doc.meta = [
        ("Admitted", _us(admitted)),
        ("Discharged", f"{_us(discharged)} ({length} day{'s' if length != 1 else ''})"),
        ("Attending", doctor.name),
        ("Discharge disposition", "Home, self-care"),
    ]
    doc.blocks = [
        _fields([("Reason for admission", stay.reason), ("Procedure", stay.procedure)]),
        "Discharge diagnoses:\n" + "\n".join(f"- {c} {t}" for c, t in stay.dx),
        "Hospital course:\n" + _para(stay.course),
        _para(f"Condition at discharge: stable. {_vitals(ctx)}"),
        "Discharge medications:\n" + _bullets(stay.meds),
        "Instructions:\n" + _para(stay.instructions),
        _para(
            f"Follow-up: {doctor.name}, Riverside Medical Clinic, on {_us(follow)} at"
            f" {ctx.time('appt', 9, 15)}. Summary sent to the primary care record."
        ),
        _signed(doctor, discharged, ctx.time("signed", 13, 18)),
    ]
    return doc


# ------------------------------------------------------------- radiology report


@dataclass(frozen=True)
class _Study:
    keys: tuple[str, ...]
    name: str
    cpt: str
    indication: tuple[str, str]
    technique: str
    findings: tuple[tuple[str, str], ...]  # (findings, impression) alternatives


_STUDIES = (
    _Study(
        ("chest x-ray", "chest radiograph", "cxr"),
        "XR chest, 2 views (PA and lateral)",
        "71046",
        ("R05.9", "Cough, unspecified"),
        "PA and lateral views of the chest.",
        (
            (
                "Lungs are clear. No focal consolidation, pleural effusion or pneumothorax. Heart"
                " size"
                " normal. Mediastinal contours unremarkable. Osseous structures intact.",
                "No acute cardiopulmonary process.",
            ),
            (
                "Patchy opacity in the right lower lobe. No pleural effusion or pneumothorax. Heart"
                " size normal.",
                "Right lower lobe opacity, compatible with pneumonia in the"
                " appropriate clinical setting. Follow-up radiograph in 6-8 weeks.",
            ),
        ),
    ),
    _Study(
        ("knee mri", "mri knee", "knee"),
        "MRI right knee without contrast",
        "73721",
        ("M25.561", "Pain in right knee"),
        "Multiplanar, multisequence MRI without contrast.",
        (
            (
                "Oblique tear of the posterior horn of the medial meniscus extending to the"
                " inferior"
                " articular surface. Lateral meniscus intact. ACL, PCL and collateral ligaments"
                " intact. Small joint effusion. Mild medial compartment cartilage thinning.",
                "Posterior horn medial meniscus tear. Small effusion. Ligaments intact.",
            ),
            (
                "Menisci intact. ACL and PCL intact. Mild proximal patellar tendinosis. Trace joint"
                " effusion. No bone marrow edema.",
                "Mild patellar tendinosis; no internal derangement.",
            ),
        ),
    ),
    _Study(
        ("abdominal ultrasound", "ultrasound"),
        "Abdominal ultrasound, complete",
        "76700",
        ("R10.11", "Right upper quadrant pain"),
        "Real-time grayscale and color Doppler imaging.",
        (
            (
                "Liver normal in size with diffusely increased echogenicity. Gallbladder without"
                " stones or wall thickening; negative sonographic Murphy sign. Common bile duct 4"
                " mm."
                " Pancreas partially obscured by bowel gas. Kidneys normal; spleen 10 cm.",
                "Hepatic steatosis. No cholelithiasis or biliary dilatation.",
            ),
            (
                "Liver normal. Multiple mobile gallstones up to 9 mm without wall thickening."
                " Common"
                " bile duct 3 mm. Kidneys and spleen normal.",
                "Cholelithiasis without sonographic evidence of acute cholecystitis.",
            ),
        ),
    ),
    _Study(
        ("lumbar",),
        "XR lumbar spine, 3 views",
        "72110",
        ("M54.50", "Low back pain, unspecified"),
        "AP, lateral and coned L5-S1 views.",
        (
            (
                "Normal alignment. Mild disc space narrowing at L4-L5 with small anterior"
                " osteophytes. Vertebral body heights preserved. No fracture or spondylolisthesis.",
                "Mild degenerative disc disease at L4-L5. No acute osseous abnormality.",
            ),
            (
                "Normal alignment, vertebral heights and disc spaces. Sacroiliac joints"
                " unremarkable.",
                "Normal lumbar spine radiographs.",
            ),
        ),
    ),
    _Study(
        ("head ct", "ct head", "brain"),
        "CT head without contrast",
        "70450",
        ("R51.9", "Headache, unspecified"),
        "Axial images from skull base to vertex without"
        " IV contrast. Dose reduction techniques used.",
        (
            (
                "No intracranial hemorrhage, mass effect or midline shift. Gray-white"
                " differentiation preserved. Ventricles normal in size. Paranasal sinuses clear.",
                "No acute intracranial abnormality.",
            ),
            (
                "No hemorrhage or mass. Mild mucosal thickening of the maxillary sinuses."
                " Ventricles"
                " and sulci normal.",
                "No acute intracranial process. Mild sinus mucosal disease.",
            ),
        ),
    ),
)


def _radiology(ctx: _Ctx) -> _Doc:
    d = ctx.draw
    doctor = ctx.staff("Doctor")
    study = next((s for s in _STUDIES if ctx.has(*s.keys)), None)
    if study is None:
        study = _Study(
            (),
            ctx.focus,
            "76499",
            ("R69", "Illness, unspecified"),
            "Standard protocol.",
            (("No acute abnormality identified.", "Unremarkable study."),),
        )
    findings, impression = d.pick("findings", study.findings)
    doc = _Doc("Department of Radiology", "RADIOLOGY REPORT: " + study.name.upper())
    doc.meta = [
        ("Exam date", f"{_us(ctx.when)} {ctx.time('exam', 8, 17)}"),
        ("Accession", f"RAD{ctx.when.year % 100}-{d.digits('acc', 6)}"),
        ("Ordering physician", f"{doctor.name} (NPI {doctor.npi})"),
        ("Exam", f"{study.name} (CPT {study.cpt})"),
    ]
    prior = _us(ctx.when - timedelta(days=d.num("prior", 30, 75)))
    doc.blocks = [
        _para(f"CLINICAL INDICATION: ICD-10 {study.indication[0]} {study.indication[1]}."),
        _para("TECHNIQUE: " + study.technique),
        _para("COMPARISON: " + (f"Prior study dated {prior}." if d.chance("cmp", 40) else "None.")),
        "FINDINGS:\n" + _para(findings),
        "IMPRESSION:\n" + _para(impression),
        _para(
            "Interpreting radiologist: Dr. Nadia Petrosyan, Riverside Imaging Associates."
            f" Results communicated to {doctor.name} through the EHR."
        ),
        f"Electronically signed: {_us(ctx.when)} {ctx.time('read', 17, 19)}",
    ]
    return doc


# ------------------------------------------------------------------- financial

_VISIT_CODES = (
    (
        "I10",
        "Essential (primary) hypertension",
        ("93000", "Electrocardiogram, 12-lead", 6000, 9500),
    ),
    (
        "E11.9",
        "Type 2 diabetes mellitus without complications",
        ("83036", "Hemoglobin A1c", 2400, 4200),
    ),
    ("E78.5", "Hyperlipidemia, unspecified", ("80061", "Lipid panel", 3800, 6500)),
    (
        "J06.9",
        "Acute upper respiratory infection, unspecified",
        ("87880", "Rapid strep test", 2200, 3800),
    ),
    ("M54.50", "Low back pain, unspecified", ("97110", "Therapeutic exercise, 15 min", 5500, 8500)),
    (
        "K21.9",
        "Gastro-esophageal reflux disease without esophagitis",
        ("80053", "Comprehensive metabolic panel", 4500, 8800),
    ),
)
_EM_CODES = (
    ("99213", "Office visit, established, low complexity", 14500, 18500),
    ("99214", "Office visit, established, moderate complexity", 21000, 26000),
)


@dataclass(frozen=True)
class _Line:
    when: date
    cpt: str
    desc: str
    cents: int


def _visit_lines(ctx: _Ctx, salt: str, when: date) -> tuple[list[_Line], tuple[str, str]]:
    d = ctx.draw
    code, desc, extra = d.pick(salt + ":dx", _VISIT_CODES)
    em = d.pick(salt + ":em", _EM_CODES)
    lines = [_Line(when, em[0], em[1], d.num(salt + ":em$", em[2] // 100, em[3] // 100) * 100)]
    lines.append(
        _Line(when, extra[0], extra[1], d.num(salt + ":x$", extra[2] // 100, extra[3] // 100) * 100)
    )
    if extra[0] in {"83036", "80061", "80053"}:
        lines.append(
            _Line(when, "36415", "Routine venipuncture", d.num(salt + ":v$", 15, 25) * 100)
        )
    return lines, (code, desc)


def _insurance_claim(ctx: _Ctx) -> _Doc:
    d = ctx.draw
    person = ctx.person
    doctor = ctx.staff("Doctor")
    service = ctx.when - timedelta(days=d.num("lag", 2, 9))
    lines, (code, desc) = _visit_lines(ctx, "claim", service)
    total = sum(x.cents for x in lines)
    rows = [("DOS", "Code", "Description", "Dx ptr", "Units", "Charge")]
    rows += [(_us(x.when), f"CPT {x.cpt}", x.desc, "A", "1", _money(x.cents)) for x in lines]
    doc = _Doc("Patient Financial Services", "HEALTH INSURANCE CLAIM (CMS-1500 / 837P)")
    doc.meta = [
        ("Claim number", f"CLM-{ctx.when.year}-{d.digits('claim', 6)}"),
        ("Payer", f"{person.payer} ({person.plan_type})"),
        ("Group number", person.group),
        ("Relationship to insured", "Self"),
        ("Submitted", f"{_us(ctx.when)} electronically"),
    ]
    doc.blocks = [
        "Diagnosis codes (ICD-10-CM):\nA. " + f"{code} {desc}",
        _table(rows),
        _fields(
            [
                ("Total charge", _money(total)),
                ("Amount paid", "$0.00"),
                ("Place of service", "11 (office)"),
                ("Rendering provider", f"{doctor.name}, NPI {doctor.npi}"),
                ("Billing provider", f"{CLINIC_NAME}, {CLINIC_STREET}; Tax ID {CLINIC_TAX_ID}"),
                ("Accept assignment", "Yes; signature on file"),
            ]
        ),
        _para(
            f"Status: accepted by clearinghouse on {_us(ctx.when + timedelta(days=1))};"
            " expected adjudication within 30 days. Prepared by Patient Financial Services."
        ),
    ]
    return doc


def _billing_statement(ctx: _Ctx) -> _Doc:
    d = ctx.draw
    specialist = ctx.staff("Billing Specialist")
    visit_day = ctx.when - timedelta(days=d.num("lag", 35, 60))
    lines, _ = _visit_lines(ctx, "stmt", visit_day)
    charges = sum(x.cents for x in lines)
    paid = charges * d.num("paid-pct", 50, 65) // 100
    adjust = charges * d.num("adj-pct", 10, 18) // 100
    prior = d.num("prior", 0, 1) * d.num("prior$", 2000, 6500)
    patient_paid = min(d.pick("pp", (0, 2000, 2500, 4000)), charges - paid - adjust)
    balance = charges - paid - adjust + prior - patient_paid
    rows = [("Date", "Code", "Description", "Amount")]
    if prior:
        rows.append(("", "", "Previous balance", _money(prior)))
    rows += [(_us(x.when), f"CPT {x.cpt}", x.desc, _money(x.cents)) for x in lines]
    rows.append(
        (
            _us(visit_day + timedelta(days=d.num("ins", 18, 30))),
            "",
            "Insurance payment",
            _money(-paid),
        )
    )
    rows.append(("", "", "Contractual adjustment", _money(-adjust)))
    if patient_paid:
        rows.append(("", "", "Copay received at visit", _money(-patient_paid)))
    doc = _Doc("Patient Financial Services", "PATIENT BILLING STATEMENT", "Patient")
    doc.meta = [
        ("Statement date", _us(ctx.when)),
        ("Payment due", _us(ctx.when + timedelta(days=30))),
        ("Previous balance", _money(prior)),
    ]
    doc.blocks = [
        _table(rows),
        _fields([("Amount due", _money(balance))]),
        _para(
            "Pay online at riversidemedicalclinic.example/pay, by phone at"
            f" {CLINIC_PHONE}, or by check payable to {CLINIC_NAME}. Payment plans with no"
            " interest are available for balances over $200.00. Financial assistance is"
            " available for eligible patients; ask for an application."
        ),
        _para(
            f"Questions about this statement? Contact {specialist.name}, Billing Specialist,"
            f" Monday-Friday 8:00-17:00 at {CLINIC_PHONE} option 3."
        ),
    ]
    return doc


def _eob(ctx: _Ctx) -> _Doc:
    d = ctx.draw
    person = ctx.person
    doctor = ctx.staff("Doctor")
    service = ctx.when - timedelta(days=d.num("lag", 14, 30))
    lines, _ = _visit_lines(ctx, "eob", service)
    rows: list[tuple[str, ...]] = [
        ("Service", "Billed", "Allowed", "Deductible", "Coins/copay", "Plan paid", "You owe")
    ]
    totals = [0, 0, 0, 0, 0, 0]
    deductible_left = d.pick("ded-left", (0, 0, 5000, 12000))
    for i, x in enumerate(lines):
        allowed = x.cents * d.num(f"allow{i}", 52, 78) // 100
        ded = min(allowed, deductible_left)
        deductible_left -= ded
        coins = (allowed - ded) * 20 // 100 if i else min(2500, allowed - ded)
        plan = allowed - ded - coins
        owe = ded + coins
        values = [x.cents, allowed, ded, coins, plan, owe]
        totals = [a + b for a, b in zip(totals, values, strict=True)]
        rows.append((f"CPT {x.cpt}", *(_money(v) for v in values)))
    rows.append(("Total", *(_money(v) for v in totals)))
    doc = _Doc(
        f"{person.payer} | Member Services 1-800-555-01{d.digits('ms', 2)}",
        "EXPLANATION OF BENEFITS - THIS IS NOT A BILL",
        "Member",
    )
    doc.meta = [
        ("Plan", f"{person.payer} {person.plan_type}"),
        ("Claim number", f"{person.payer_code}{ctx.when.year}{d.digits('claim', 7)}"),
        ("Provider", f"{CLINIC_NAME} ({doctor.name})"),
        ("Date of service", _us(service)),
        ("Processed", _us(ctx.when)),
    ]
    doc.blocks = [
        _table(rows),
        _para(
            f"Your total responsibility for this claim is {_money(totals[5])}. The provider may"
            f" bill you for this amount. {person.payer} paid {_money(totals[4])} directly to the"
            " provider. Amounts above the allowed amount are not your responsibility under your"
            " network agreement."
        ),
        _para(
            f"Year-to-date: individual deductible {_money(d.num('ded-met', 400, 1500) * 100)} met"
            " of $1,500.00; out-of-pocket maximum $6,000.00."
        ),
        _para(
            "Appeal rights: if you disagree with this decision you may file an appeal within 180"
            " days of the processed date. Call Member Services or write to the Appeals Unit."
        ),
    ]
    return doc


def _verification(ctx: _Ctx) -> _Doc:
    d = ctx.draw
    person = ctx.person
    specialist = ctx.staff("Billing Specialist")
    doctor = ctx.staff("Doctor")
    appt = ctx.when + timedelta(days=d.num("appt", 3, 12))
    deductible = d.pick("deductible", (1000, 1500, 2500))
    met = d.num("met", 0, deductible // 50) * 50
    copay = d.pick("copay", (20, 25, 30, 40))
    doc = _Doc("Patient Access and Registration", "INSURANCE ELIGIBILITY VERIFICATION")
    doc.meta = [
        ("Verified", f"{_us(ctx.when)} {ctx.time('verified', 8, 16)} via payer portal (270/271)"),
        ("Reference number", f"ELG{d.digits('ref', 9)}"),
        ("Upcoming visit", f"{_us(appt)} with {doctor.name}; planned service CPT 99214"),
    ]
    doc.blocks = [
        _fields(
            [
                ("Payer", person.payer),
                ("Plan type", person.plan_type),
                ("Group number", person.group),
                ("Subscriber", "Self"),
                ("Coverage status", f"Active; effective 01/01/{ctx.when.year}"),
                ("Primary care copay", _dollars(copay)),
                ("Specialist copay", _dollars(copay * 2)),
                (
                    "Individual deductible",
                    f"{_dollars(deductible)} ({_dollars(met)} met,"
                    f" {_dollars(deductible - met)} remaining)",
                ),
                ("Coinsurance", "20% after deductible"),
                ("Out-of-pocket maximum", f"{_dollars(6000)} ({_dollars(met + copay * 3)} met)"),
                ("Referral required", "Yes" if person.plan_type == "HMO" else "No"),
                (
                    "Prior authorization",
                    "Required for MRI/CT, specialty drugs and therapy over 12 visits",
                ),
            ]
        ),
        _para(
            f"Estimated patient responsibility for the planned visit (CPT 99214): {_dollars(copay)}"
            " copay collected at check-in. Laboratory services apply to the deductible."
        ),
        _para(
            f"Verified by {specialist.name}, Billing Specialist. Coverage confirmed by the payer"
            " is not a guarantee of payment; benefits are subject to the plan terms at the time"
            " of service."
        ),
    ]
    return doc


@dataclass(frozen=True)
class _Auth:
    keys: tuple[str, ...]
    service: str
    codes: tuple[tuple[str, str], ...]
    dx: tuple[tuple[str, str], ...]
    justification: str
    units: str
    cost: tuple[int, int]


_AUTHS = (
    _Auth(
        ("buprenorphine",),
        "Buprenorphine-naloxone 8 mg-2 mg sublingual film, 1 daily",
        (("HCPCS J0574", "Buprenorphine/naloxone, oral, >6 mg to 10 mg buprenorphine"),),
        (("F11.20", "Opioid dependence, uncomplicated"),),
        "Moderate opioid use disorder (DSM-5, 5 of 11 criteria). Induction completed in clinic;"
        " stable on 8 mg-2 mg daily with negative fentanyl screens. Film formulation required:"
        " tablet formulation caused oral irritation. Part of a comprehensive treatment plan"
        " with weekly counseling. Patient consent for disclosure to the health plan under"
        " 42 CFR Part 2 is on file.",
        "30 films per 30 days, 6 months",
        (180, 260),
    ),
    _Auth(
        ("fertility", "ivf", "reproductive"),
        "Assisted reproduction cycle (IVF with ICSI)",
        (
            ("CPT 89250", "Culture of oocytes/embryos, less than 4 days"),
            ("CPT 89280", "Assisted oocyte fertilization (ICSI), 10 or fewer oocytes"),
            ("CPT 89258", "Cryopreservation of embryos"),
        ),
        (
            ("Z31.83", "Encounter for assisted reproductive fertility procedure cycle"),
            ("Z31.41", "Encounter for fertility testing"),
        ),
        "Couple with 24 months of infertility. Fertility evaluation completed by the"
        " reproductive endocrinology service; three prior intrauterine insemination cycles"
        " unsuccessful. IVF with ICSI recommended. Fertility rider on the plan confirmed.",
        "1 cycle",
        (14500, 18500),
    ),
    _Auth(
        ("mri",),
        "MRI right knee without contrast",
        (("CPT 73721", "MRI any joint of lower extremity, without contrast"),),
        (
            ("M25.561", "Pain in right knee"),
            ("M23.221", "Derangement of posterior horn of medial meniscus, right knee"),
        ),
        "Right knee pain with catching for 10 weeks after a twisting injury. Failed 6 weeks of"
        " physical therapy and NSAIDs. Positive McMurray test; radiographs negative for"
        " fracture. MRI needed to plan arthroscopy.",
        "1 study",
        (1150, 1650),
    ),
    _Auth(
        ("physical therapy", "therapy"),
        "Outpatient physical therapy",
        (
            ("CPT 97161", "Physical therapy evaluation, low complexity"),
            ("CPT 97110", "Therapeutic exercise, each 15 minutes"),
            ("CPT 97140", "Manual therapy, each 15 minutes"),
        ),
        (("M25.561", "Pain in right knee"), ("M54.50", "Low back pain, unspecified")),
        "Functional limitation with stairs and prolonged standing; home exercise program for 4"
        " weeks insufficient. Goal: return to full work duties and pain-free stairs.",
        "12 visits over 6 weeks",
        (1500, 2100),
    ),
    _Auth(
        ("specialty drug", "adalimumab", "biologic"),
        "Adalimumab 40 mg/0.4 mL pen every 14 days",
        (("HCPCS J0135", "Injection, adalimumab, 20 mg"),),
        (("M06.9", "Rheumatoid arthritis, unspecified"),),
        "Active rheumatoid arthritis (DAS28 5.1) despite methotrexate 20 mg weekly for 3 months"
        " (step therapy met). QuantiFERON TB and hepatitis B screening negative. Dispensed"
        " through the plan's specialty pharmacy.",
        "2 pens per 28 days, 12 months",
        (6200, 7400),
    ),
)


def _prior_auth(ctx: _Ctx) -> _Doc:
    d = ctx.draw
    person = ctx.person
    doctor = ctx.staff("Doctor")
    auth = next((a for a in _AUTHS if ctx.has(*a.keys)), None)
    if auth is None:
        reason = (ctx.label.extra_sensitive_reason or "").lower()
        auth = (
            _AUTHS[0]
            if "substance" in reason
            else _AUTHS[1]
            if "reproductive" in reason
            else _AUTHS[3]
        )
    cost = d.num("cost", *auth.cost) * 100
    status = d.pick("status", ("Approved", "Approved", "Pending clinical review"))
    start = ctx.when + timedelta(days=d.num("start", 1, 5))
    doc = _Doc("Patient Financial Services | Utilization Management", "PRIOR AUTHORIZATION REQUEST")
    doc.meta = [
        ("Request date", _us(ctx.when)),
        ("Payer", f"{person.payer} ({person.plan_type}), group {person.group}"),
        ("Requesting provider", f"{doctor.name}, NPI {doctor.npi}"),
        ("Service requested", auth.service),
    ]
    doc.blocks = [
        "Procedure / drug codes:\n" + "\n".join(f"- {c} {t}" for c, t in auth.codes),
        "Diagnosis codes (ICD-10-CM):\n" + "\n".join(f"- {c} {t}" for c, t in auth.dx),
        "Clinical justification:\n" + _para(auth.justification),
        _fields(
            [
                ("Quantity", auth.units),
                ("Estimated cost", _money(cost)),
                ("Decision", status),
                (
                    "Authorization number",
                    f"PA{d.digits('auth', 9)}" if status == "Approved" else "pending",
                ),
                (
                    "Valid",
                    f"{_us(start)} to"
                    f" {_us(start + timedelta(days=d.pick('valid', (60, 90, 180))))}",
                ),
            ]
        ),
        _para(
            "Submitted with supporting notes through the payer portal. Determination letters are"
            f" sent to the member and to {CLINIC_NAME}. Urgent peer-to-peer review available on"
            " request."
        ),
    ]
    return doc


# ------------------------------------------------------------------ employment


def _hr_partner(ctx: _Ctx) -> _Person:
    return ctx.staff("HR Manager")


def _position(person: _Person) -> str:
    return (
        _title_case(person.description) if person.description else (person.role or "Staff member")
    )


def _salary_letter(ctx: _Ctx) -> _Doc:
    d = ctx.draw
    person = ctx.person
    hr = _hr_partner(ctx)
    merit = d.num("merit", 20, 40)
    market = d.pick("market", (0, 0, 5, 10, 15))
    pct = merit + market
    old = person.salary
    new = (old * (1000 + pct) // 1000 + 50) // 100 * 100
    effective = ctx.when + timedelta(days=d.num("eff", 14, 45))
    doc = _Doc("Human Resources", "SALARY ADJUSTMENT LETTER", "Employee")
    doc.meta = [("Date", _long(ctx.when)), ("Position", _position(person))]
    doc.blocks = [
        f"Dear {_salutation(person.name)},",
        _para(
            f"Following the {ctx.when.year} annual compensation review, I am pleased to confirm an"
            " adjustment to your base salary. The adjustment recognizes your performance rating"
            " and aligns your pay with the clinic's updated market ranges for your position."
        ),
        _table(
            [
                ("Current annual base salary", _dollars(old)),
                ("Merit increase", f"{_fixed(merit, 1)}%"),
                ("Market adjustment", f"{_fixed(market, 1)}%"),
                ("New annual base salary", _dollars(new)),
                ("Bi-weekly gross pay", _money((new * 100 + 13) // 26)),
                ("Effective date", _us(effective)),
            ]
        ),
        _para(
            "The new rate will appear in the first full pay period after the effective date."
            " All other terms of your employment, including benefits and paid time off, remain"
            " unchanged. Compensation information is confidential; please direct questions to"
            " Human Resources."
        ),
        f"Sincerely,\n{hr.name}\nHR Manager, {CLINIC_NAME}\ncc: Personnel file",
    ]
    return doc


def _employment_contract(ctx: _Ctx) -> _Doc:
    d = ctx.draw
    person = ctx.person
    hr = _hr_partner(ctx)
    start = ctx.when + timedelta(days=d.num("start", 14, 40))
    physician = person.role == "Doctor"
    notice = 90 if physician else 30
    pto = d.num("pto", 18, 25) if physician else d.num("pto", 12, 18)
    doc = _Doc("Human Resources", "EMPLOYMENT AGREEMENT", "Employee")
    doc.meta = [
        ("Position", _position(person)),
        (
            "Employment type",
            "Full-time, 1.0 FTE, exempt"
            if physician or person.role == "HR Manager"
            else "Full-time, 1.0 FTE, non-exempt",
        ),
        ("Start date", _us(start)),
    ]
    comp = (
        f"Base salary of {_dollars(person.salary)} per year, paid bi-weekly"
        f" ({_money((person.salary * 100 + 13) // 26)} per pay period)."
    )
    if physician:
        comp += (
            f" Signing bonus {_dollars(d.num('bonus', 10, 25) * 1000)}, repayable pro rata"
            f" if employment ends within 12 months. CME allowance {_dollars(3500)} per year."
        )
    elif person.role == "Nurse":
        comp += " Evening shift differential $3.50 per hour; overtime at 1.5 times the base rate."
    doc.blocks = [
        _para(
            f"This Employment Agreement is made on {_long(ctx.when)} between {CLINIC_NAME}"
            f" (the Employer) and {person.name} (the Employee)."
        ),
        _bullets(
            [
                f"Position and duties: the Employee will serve as {_position(person).lower()},"
                " reporting"
                " to the clinic leadership, and will follow clinic policies and professional"
                " standards.",
                "Compensation: " + comp,
                f"Benefits: {pto} days of paid time off per year; medical, dental and vision"
                " coverage;"
                " 403(b) retirement plan with a 4% employer match"
                + (
                    "; professional liability insurance provided by the Employer."
                    if physician
                    else "."
                ),
                f"Term: at-will employment with a 90-day introductory period. Either party may end"
                f" this Agreement with {notice} days' written notice.",
                "Confidentiality: the Employee will protect patient and personnel information under"
                " HIPAA and the minimum necessary standard, during and after employment.",
                "Non-solicitation: for 12 months after employment ends the Employee will not"
                " solicit"
                " clinic staff.",
            ],
            numbered=True,
        ),
        f"Employer: {hr.name}, HR Manager    Date: {_us(ctx.when)}\n"
        f"Employee: ______________________    Date: __________",
    ]
    return doc


_COMPETENCIES = {
    "Doctor": (
        "Clinical quality and outcomes",
        "Patient communication",
        "Documentation timeliness",
        "Peer collaboration",
        "Compliance and privacy",
    ),
    "Nurse": (
        "Clinical nursing practice",
        "Patient education",
        "Medication safety",
        "Teamwork",
        "Compliance and privacy",
    ),
    "Billing Specialist": (
        "Claim accuracy",
        "Denial follow-up",
        "Patient service",
        "Productivity",
        "Compliance and privacy",
    ),
}
_DEFAULT_COMPETENCIES = (
    "Job knowledge",
    "Quality of work",
    "Communication",
    "Teamwork",
    "Compliance and privacy",
)


def _performance_review(ctx: _Ctx) -> _Doc:
    d = ctx.draw
    person = ctx.person
    hr = _hr_partner(ctx)
    names = _COMPETENCIES.get(person.role, _DEFAULT_COMPETENCIES)
    ratings = [d.num(f"rating{i}", 3, 5) for i in range(len(names))]
    overall = sum(ratings) * 10 // len(ratings)
    band = (
        "Outstanding"
        if overall >= 45
        else "Exceeds expectations"
        if overall >= 35
        else "Meets expectations"
    )
    merit = {"Outstanding": "4.0%", "Exceeds expectations": "3.0%"}.get(band, "2.0%")
    supervisor = (
        "Medical Director" if person.role in {"Doctor", "Nurse"} else "Practice Administrator"
    )
    year = ctx.when.year
    doc = _Doc("Human Resources", "ANNUAL PERFORMANCE REVIEW", "Employee")
    doc.meta = [
        ("Position", _position(person)),
        ("Review period", f"01/01/{year} - 12/31/{year}"),
        ("Reviewer", supervisor),
        ("HR partner", hr.name),
    ]
    doc.blocks = [
        _table(
            [
                ("Competency", "Rating (1-5)"),
                *((n, str(r)) for n, r in zip(names, ratings, strict=True)),
            ]
        ),
        f"Overall rating: {_fixed(overall, 1)} / 5 - {band}",
        _para(
            f"Strengths: {_salutation(person.name)} is dependable and respected by colleagues;"
            f" {names[ratings.index(max(ratings))].lower()} stood out this year, and feedback"
            " from patients and peers was consistently positive."
        ),
        "Goals for next year:\n"
        + _bullets(
            [
                f"Improve {names[ratings.index(min(ratings))].lower()} through a targeted plan"
                " with the"
                " reviewer, reviewed quarterly.",
                "Complete annual HIPAA privacy and security training by March 31.",
                d.pick(
                    "goal",
                    (
                        "Mentor one new team member.",
                        "Lead one quality improvement project.",
                        "Complete one continuing education course relevant to the role.",
                    ),
                ),
            ]
        ),
        f"Merit increase recommendation: {merit}",
        _para(
            "Employee acknowledgment: signature confirms the review was discussed, not"
            " agreement. Employee comments may be attached within 14 days."
        ),
        f"Reviewed on {_us(ctx.when)} | Employee: __________ | Reviewer: __________",
    ]
    return doc


_BOARDS = (
    ("family", "American Board of Family Medicine"),
    ("internal", "American Board of Internal Medicine"),
    ("psychiatr", "American Board of Psychiatry and Neurology"),
    ("orthop", "American Board of Orthopaedic Surgery"),
    ("infusion", "Infusion Nurses Certification Corporation (CRNI)"),
    ("charge", "American Nurses Credentialing Center"),
)
_PRIVILEGES = {
    "family": "outpatient family medicine, minor office procedures, joint injections",
    "internal": "outpatient internal medicine, ECG interpretation",
    "psychiatr": "outpatient psychiatry, psychotherapy, controlled substance prescribing",
    "orthop": "orthopaedic surgery, arthroscopy, fracture care",
    "infusion": "peripheral IV insertion, infusion therapy, moderate sedation monitoring",
}


def _credentialing(ctx: _Ctx) -> _Doc:
    d = ctx.draw
    person = ctx.person
    desc = person.description.lower()
    physician = person.role == "Doctor"
    board = next(
        (b for k, b in _BOARDS if k in desc),
        "American Heart Association BLS/ACLS" if not physician else "Specialty board",
    )
    privileges = next(
        (p for k, p in _PRIVILEGES.items() if k in desc),
        "nursing care within scope of license" if not physician else "general",
    )
    expires = date(ctx.when.year + 1, d.num("exp-m", 1, 12), 28)
    claims = d.pick("claims", (0, 0, 1))
    history = (
        "No malpractice claims, settlements or judgments in the past 10 years."
        if not claims
        else f"One claim filed in {d.num('claim-year', 2014, 2019)}, closed without payment;"
        " reviewed by the committee, no further action."
    )
    committee = ctx.when + timedelta(days=d.num("committee", 7, 21))
    board_name = (
        "Medical Board of California" if physician else "California Board of Registered Nursing"
    )
    checks = [
        ("State license", f"active, expires {_us(expires)}", board_name),
        ("Board certification", "current", board),
        (
            "NPDB query",
            "no adverse actions" if not claims else "one report, see below",
            "National Practitioner Data Bank",
        ),
        ("Malpractice insurance", "$1,000,000 / $3,000,000, current", "Golden State Mutual"),
        ("OIG exclusion check", "not excluded", "HHS-OIG LEIE"),
    ]
    if physician:
        checks.append(("DEA registration", "active, schedules II-V", "DEA"))
    doc = _Doc("Medical Staff Office", "CREDENTIALING AND PRIVILEGING FILE", "Practitioner")
    doc.meta = [
        ("Discipline", _position(person)),
        ("Application", "Reappointment (2-year cycle)"),
        ("Licensed since", str(person.since)),
        ("NPI", person.npi),
    ]
    doc.blocks = [
        f"Primary source verification, completed {_us(ctx.when)}:\n"
        + _bullets([f"{item}: {result} (source: {source})" for item, result, source in checks]),
        "Malpractice history:\n" + _para(history),
        _para(
            f"Privileges requested and granted: {privileges}. Peer references: 2 of 2 received,"
            " favorable. Health attestation and immunizations current."
        ),
        _para(
            f"Credentials Committee recommendation on {_us(committee)}: approve. Medical"
            f" Executive Committee approval on {_us(committee + timedelta(days=14))}."
            f" Recredentialing due {_MONTHS[committee.month - 1]} {committee.year + 2}."
        ),
    ]
    return doc


def _contractor_agreement(ctx: _Ctx) -> _Doc:
    d = ctx.draw
    person = ctx.person
    hr = _hr_partner(ctx)
    renewal = ctx.has("renewal")
    rate = person.salary + (d.num("raise", 5, 10) if renewal else 0)
    hours = d.pick("hours", (40, 60, 80))
    start = ctx.when
    end = start + timedelta(days=364)
    scope = person.description.lower()
    if "ehr" in scope or "server" in scope:
        duties = (
            "EHR server patching and monitoring",
            "nightly backup verification and restore tests",
            "database maintenance windows",
            "incident response for server outages",
        )
    elif "network" in scope or "device" in scope:
        duties = (
            "network switch and Wi-Fi administration",
            "workstation imaging and device encryption",
            "mobile device management",
            "help desk escalations",
        )
    else:
        duties = (
            "IT support as assigned",
            "system maintenance",
            "documentation",
            "incident response",
        )
    doc = _Doc(
        "Human Resources | Vendor Management",
        "INDEPENDENT CONTRACTOR AGREEMENT" + (" - RENEWAL" if renewal else ""),
        "Contractor",
    )
    doc.meta = [
        ("Agreement number", f"CSA-{start.year}-{d.digits('csa', 4)}"),
        ("Term", f"{_us(start)} to {_us(end)}"),
        ("Clinic contact", f"{hr.name}, HR Manager"),
    ]
    blocks = [
        _para(
            f"Scope of services: {', '.join(duties)}, under the direction of the clinic's"
            " IT lead, with a response time of 4 business hours for priority incidents."
        )
    ]
    if renewal:
        blocks.append(
            _para(
                f"Renewal: this agreement renews the prior term on the same scope and"
                f" adjusts the hourly rate from {_dollars(person.salary)} to"
                f" {_dollars(rate)}."
            )
        )
    blocks += [
        _table(
            [
                ("Standard hourly rate", _dollars(rate)),
                ("After-hours / emergency rate", _money(rate * 150)),
                (f"Monthly retainer ({hours} hours)", _dollars(rate * hours)),
                ("Not-to-exceed per term", _dollars(rate * hours * 12 + 10000)),
            ]
        ),
        _para(
            "Invoicing: monthly, itemized by task, net 30 days. The contractor is an independent"
            " business, responsible for its own taxes and insurance, and receives no employee"
            " benefits."
        ),
        _para(
            "Data protection: a HIPAA Business Associate Agreement is executed with this"
            " agreement. Access is limited to the systems in scope, uses named accounts with"
            " multi-factor authentication, and excludes viewing patient records except as a task"
            " strictly requires. Either party may terminate with 30 days' written notice."
        ),
        f"For the clinic: {hr.name}    For the contractor: ______________",
    ]
    doc.blocks = blocks
    return doc


# ------------------------------------------------------------------- internal


def _meeting_agenda(ctx: _Ctx) -> _Doc:
    d = ctx.draw
    doctors = ctx.agents_of("Doctor")
    nurses = ctx.agents_of("Nurse")
    chair = d.pick("chair", doctors).name if doctors else "Medical Director"
    recorder = d.pick("recorder", nurses).name if nurses else "Charge nurse"
    if ctx.has("quality"):
        start, length, place = "12:00", 60, "Conference Room B"
        items = [
            ("Approval of last month's minutes", "Chair"),
            (
                f"Hand hygiene audit: {d.num('hh', 84, 97)}% compliance (target 95%)",
                "Infection control",
            ),
            (
                f"Diabetes HbA1c control measure: {d.num('a1c', 61, 78)}% of panel at goal",
                "Quality lead",
            ),
            (
                f"Patient experience survey: {d.num('px', 82, 94)}% top-box rating",
                "Practice manager",
            ),
            ("Referral loop closure project: status update", "Nursing"),
            ("Action items and next steps", "Chair"),
        ]
        attendees = (
            "Medical Director, nursing leads, practice manager, billing lead, privacy officer"
        )
    elif ctx.has("safety", "huddle"):
        start, length, place = "07:45", 15, "Nurses' station"
        items = [
            ("Safety concerns from the last 24 hours (no patient identifiers)", "All"),
            ("Staffing and coverage gaps today", "Charge nurse"),
            ("Equipment: crash cart and AED checks", "Nursing"),
            (f"Falls: {d.num('falls', 0, 2)} in the last 30 days; prevention reminders", "Nursing"),
            ("Look-alike/sound-alike alert: hydralazine vs hydroxyzine", "Pharmacy"),
            ("Good catch of the week", "All"),
        ]
        attendees = "On-duty physicians, nurses, front desk lead"
    else:
        start, length, place = "08:00", 45, "Main waiting area (before opening)"
        items = [
            ("Welcome and new team members", "Medical Director"),
            (
                f"EHR upgrade on {_us(ctx.when + timedelta(days=d.num('ehr', 10, 30)))}: downtime"
                " plan",
                "IT",
            ),
            ("Annual HIPAA and security training deadline", "Privacy officer"),
            ("Holiday schedule and coverage", "HR"),
            ("Patient feedback highlights", "Practice manager"),
            ("Open questions", "All"),
        ]
        attendees = "All staff"
    rows = [("#", "Item", "Lead")] + [(str(i), t, lead) for i, (t, lead) in enumerate(items, 1)]
    doc = _Doc("Clinic Operations", ctx.focus.upper())
    doc.meta = [
        ("Date", _long(ctx.when)),
        ("Time", f"{start} ({length} minutes)"),
        ("Location", f"{place}; video link in the calendar invitation"),
        ("Chair", chair),
        ("Recorder", recorder),
        ("Attendees", attendees),
    ]
    doc.blocks = [
        _table(rows),
        _para(
            "Pre-reading: last month's minutes and the dashboard on the staff intranet. Please"
            " send additions to the chair 24 hours before the meeting. Minutes will be posted"
            " within 3 business days; discuss cases only in de-identified form."
        ),
        f"Next meeting: {_long(ctx.when + timedelta(days=28 if length > 15 else 1))}",
    ]
    return doc


_MEMOS = (
    (
        ("minimum necessary",),
        "Minimum necessary access to records",
        (
            "Open only the records you need for your current task and role.",
            "Do not look up records of family members, colleagues or yourself through the EHR; use"
            " the patient portal or Health Information Management.",
            "Billing staff view financial and coding data; clinical notes are shared only as a"
            " claim requires.",
            "Access logs are audited monthly; inappropriate access leads to corrective action.",
        ),
    ),
    (
        ("password", "device"),
        "Device and password policy",
        (
            "Passwords must be at least 14 characters and are not reused across systems.",
            "Multi-factor authentication is required for email, the EHR and remote access.",
            "Workstations lock after 5 minutes of inactivity; lock your screen when you step away.",
            "Only clinic-managed, encrypted devices may store or access clinic data; report lost"
            " devices to IT within 1 hour.",
        ),
    ),
    (
        ("visitor",),
        "Visitor policy update",
        (
            "Each patient may bring up to two visitors to an appointment.",
            "All visitors sign in at the front desk and wear a dated visitor badge.",
            "Visitors with fever or respiratory symptoms are asked to wait outside or reschedule.",
            "Vendors must have an appointment and are escorted in clinical areas.",
        ),
    ),
)


def _policy_memo(ctx: _Ctx) -> _Doc:
    d = ctx.draw
    topic = next(((s, r) for keys, s, r in _MEMOS if ctx.has(*keys)), None)
    subject, rules = (
        topic
        if topic is not None
        else (
            re.sub(r"(?i)^memo:\s*", "", ctx.focus),
            ("Follow the updated procedure.", "Ask your manager if you have questions."),
        )
    )
    effective = ctx.when + timedelta(days=d.num("eff", 7, 21))
    doc = _Doc("Compliance and Privacy Office", "MEMORANDUM")
    doc.meta = [
        ("To", "All Riverside Medical Clinic staff and contractors"),
        ("From", "Privacy Officer and Practice Administrator"),
        ("Date", _long(ctx.when)),
        ("Subject", subject),
    ]
    doc.blocks = [
        _para(
            f"This memo announces an update to clinic rules: {subject.lower()}, effective"
            f" {_long(effective)}."
            " It applies to everyone who works at the clinic, in every role, including remote"
            " work. Please read it and complete the acknowledgment in the learning portal."
        ),
        "Requirements:\n" + _bullets(rules, numbered=True),
        _para(
            "Why this matters: these rules protect our patients and colleagues, meet our"
            " obligations under HIPAA and state law, and keep our systems available. Managers"
            " will review the policy at the next team meeting."
        ),
        _para(
            "Questions: contact the Compliance and Privacy Office at extension 2240 or"
            " privacy@riversidemedicalclinic.example."
        ),
    ]
    return doc


def _staff_schedule(ctx: _Ctx) -> _Doc:
    d = ctx.draw
    year = d.pick("year", (2025, 2026))
    staff = ctx.agents_of("Doctor", "Nurse", "Billing Specialist")
    doc = _Doc("Clinic Operations", ctx.focus.upper())
    month = next((i for i, m in enumerate(_MONTHS, 1) if m.lower() in ctx.focus.lower()), None)
    if ctx.has("on-call", "on call") or (month is not None and ctx.has("call")):
        month = month or d.num("month", 1, 12)
        first = date(year, month, 1)
        monday = first - timedelta(days=first.weekday())
        doctors = ctx.agents_of("Doctor") or staff
        nurses = ctx.agents_of("Nurse") or staff
        rows: list[tuple[str, ...]] = [("Week (Mon-Sun)", "Physician on call", "Nurse on call")]
        for w in range(5):
            begin = monday + timedelta(days=7 * w)
            if begin.month != month and w:
                break
            rows.append(
                (
                    f"{_us(begin)} - {_us(begin + timedelta(days=6))}",
                    doctors[(w + d.num("doc-rot", 0, 3)) % len(doctors)].name,
                    nurses[(w + d.num("nurse-rot", 0, 3)) % len(nurses)].name,
                )
            )
        doc.meta = [
            ("Month", f"{_MONTHS[month - 1]} {year}"),
            ("Hours", "Weekdays 17:00-08:00, weekends and holidays 24 hours"),
        ]
        doc.blocks = [
            _table(rows),
            _para(
                "The answering service pages the physician on call first, then the nurse on"
                " call. Respond to pages within 15 minutes. Swaps must be approved by the"
                " Medical Director and recorded in the scheduling system 48 hours in advance."
            ),
        ]
        return doc
    match = re.search(r"week\s+(\d+)", ctx.focus, re.I)
    week = min(max(int(match.group(1)), 1), 52) if match else d.num("week", 1, 52)
    monday = date.fromisocalendar(year, week, 1)
    shifts = ("08:00-17:00", "08:00-17:00", "10:00-19:00", "07:00-15:30", "OFF")
    grid: list[tuple[str, ...]] = [
        (
            "Staff",
            *(
                f"{_WEEKDAYS[day.weekday()]} {day.month}/{day.day}"
                for day in (monday + timedelta(days=i) for i in range(6))
            ),
        )
    ]
    for agent in staff:
        cells = []
        for i in range(6):
            if i == 5:
                cells.append("08:00-12:00" if d.chance(f"sat:{agent.id}", 30) else "OFF")
            else:
                cells.append(d.pick(f"shift:{agent.id}:{i}", shifts))
        grid.append((agent.name, *cells))
    doc.meta = [
        ("Week", f"ISO week {week}, {_us(monday)} - {_us(monday + timedelta(days=6))}"),
        ("Clinic hours", "Mon-Fri 08:00-19:00, Sat 08:00-12:00"),
    ]
    doc.blocks = [
        _table(grid),
        _para(
            "Breaks are staggered so that one physician and two nurses are on the floor at all"
            " times. Shift swaps require approval from the charge nurse and must be entered in"
            " the scheduling system. Report absences before 07:00."
        ),
    ]
    return doc


# --------------------------------------------------------------------- public


def _public_pamphlet(ctx: _Ctx) -> _Doc:
    d = ctx.draw
    doc = _Doc("Patient Information", _title_case(ctx.focus).upper())
    doc.meta = [("Revised", _long(ctx.when))]
    doc.blocks = [
        _para(
            f"Welcome to {CLINIC_NAME}. We provide family medicine, internal medicine,"
            " behavioral health and orthopaedic care for people of all ages. This guide explains"
            " what to expect at your visit and the rights you have as our patient."
        ),
        "Before your visit:\n"
        + _bullets(
            [
                "Bring a photo ID, your insurance card and a list of your current medicines.",
                "Arrive 15 minutes early to complete check-in.",
                "Free interpreter services are available in any language; ask when you book.",
            ]
        ),
        "Your rights:\n"
        + _bullets(
            [
                "To be treated with respect, without discrimination, and to take part in decisions"
                " about your care.",
                "To see and get a copy of your health records, and to ask us to correct them.",
                "To receive our Notice of Privacy Practices, which explains how we use and protect"
                " your health information.",
                "To a clear estimate of costs before scheduled services, and to ask about financial"
                " assistance.",
                "To file a complaint with the clinic or with the U.S. Department of Health and"
                " Human"
                " Services without fear of retaliation.",
            ]
        ),
        _para(
            f"Hours: Monday-Friday 8:00 a.m.-7:00 p.m., Saturday 8:00 a.m.-noon. Call"
            f" {CLINIC_PHONE} to make an appointment; after hours, the nurse advice line answers"
            f" the same number. Parking is free in the {d.pick('lot', ('north', 'east'))} lot."
            " In an emergency, call 911."
        ),
    ]
    return doc


# -------------------------------------------------------------------- generic


def _generic(ctx: _Ctx) -> _Doc:
    doc = _Doc(CLINIC_NAME, (ctx.focus or ctx.label.document_type).upper())
    doc.meta = [("Document type", ctx.label.document_type), ("Date", _long(ctx.when))]
    about = f"about {ctx.name}" if ctx.subject is not None else "for clinic operations"
    doc.blocks = [
        _para(
            f"This {ctx.label.document_type} {about} was prepared by the"
            f" {ctx.label.originating_context} staff of {CLINIC_NAME} on {_long(ctx.when)}. It"
            " records the information needed for the purpose stated in its title and is"
            " filed in the clinic's document management system under the identifier above."
        ),
        _para(
            "It is kept for the retention period set by clinic policy and state law, is"
            " reviewed whenever the underlying facts change, and is corrected on request"
            " through the office that created it. Questions about this document may be"
            " directed to that office through the staff intranet or at the main number."
        ),
        _para(f"Prepared by: {ctx.label.originating_context} office, {CLINIC_NAME}."),
    ]
    return doc


_FAMILIES: dict[str, Callable[[_Ctx], _Doc]] = {
    "lab report": _lab_report,
    "prescription": _prescription,
    "clinical note": _clinical_note,
    "referral letter": _referral,
    "discharge summary": _discharge,
    "radiology report": _radiology,
    "insurance claim": _insurance_claim,
    "billing statement": _billing_statement,
    "explanation of benefits": _eob,
    "insurance verification": _verification,
    "prior authorization": _prior_auth,
    "salary letter": _salary_letter,
    "employment contract": _employment_contract,
    "performance review": _performance_review,
    "credentialing file": _credentialing,
    "contractor agreement": _contractor_agreement,
    "mental health assessment": _mental_health,
    "meeting agenda": _meeting_agenda,
    "policy memo": _policy_memo,
    "staff schedule": _staff_schedule,
    "public pamphlet": _public_pamphlet,
}

#: The document types with a template family of their own (others use a generic one).
DOCUMENT_TYPES = tuple(_FAMILIES)

_SENSITIVE_NOTICES = (
    (
        "mental",
        "Mental health record: restricted to the treating clinician; redisclosure"
        " requires the patient's written authorization.",
    ),
    (
        "substance",
        "This record is protected by federal confidentiality rules (42 CFR Part 2);"
        " redisclosure is prohibited without the patient's written consent.",
    ),
    (
        "hiv",
        "HIV-related information: state law prohibits redisclosure without the patient's"
        " specific written consent.",
    ),
    (
        "aids",
        "HIV-related information: state law prohibits redisclosure without the patient's"
        " specific written consent.",
    ),
    (
        "reproductive",
        "Reproductive health care information: release only with the patient's"
        " written authorization or as required by law.",
    ),
)

_FOOTERS = {
    SensitivityTier.PUBLIC: f"{CLINIC_NAME} | riversidemedicalclinic.example | {CLINIC_PHONE}."
    " You may share this leaflet freely.",
    SensitivityTier.INTERNAL: "INTERNAL - for Riverside Medical Clinic staff only. Do not post"
    " or share outside the clinic.",
    SensitivityTier.PII_BASIC: "CONFIDENTIAL - contains personal information. Handle under the"
    " clinic's privacy policy.",
    SensitivityTier.CLINICAL_STANDARD: "CONFIDENTIAL - contains protected health information"
    " (HIPAA). Do not redisclose except as permitted by law.",
    SensitivityTier.CLINICAL_SENSITIVE: "CONFIDENTIAL - sensitive protected health information."
    " Access is limited to the treating clinician.",
    SensitivityTier.FINANCIAL: "CONFIDENTIAL - patient financial and insurance information."
    " Handle under HIPAA and the clinic's billing privacy policy.",
    SensitivityTier.EMPLOYMENT: "CONFIDENTIAL - personnel record. Human Resources use only.",
}


def _default_name_label(label: Label) -> str:
    return {
        SubjectType.PATIENT: "Patient",
        SubjectType.EMPLOYEE: "Employee",
        SubjectType.CONTRACTOR: "Contractor",
    }.get(label.subject_type, "Name")


def render_document(label: Label, corpus: Corpus) -> str:
    """Write a document's content from its label, deterministically.

    The text depends only on the label and on names and assignments from the
    corpus: the same label always yields byte-identical text, in any process on
    any machine. Organization-level documents carry no individual identifiers;
    otherwise exactly the label's ``pii_attributes`` are printed.

    Args:
        label: the document's CI label (its title, type, subject, tier, PII list...).
        corpus: the corpus the label belongs to (directory and assignments).

    Returns:
        The document text: plain ASCII lines of at most about 78 characters,
        ending with a newline.
    """
    ctx = _context(label, corpus)
    family = _FAMILIES.get(label.document_type.strip().lower(), _generic)
    doc = family(ctx)
    parts = [
        CLINIC_NAME,
        f"{CLINIC_STREET} | Tel {CLINIC_PHONE}",
        doc.department,
        RULE,
        doc.heading,
        f"Document ID: {label.doc_id}",
    ]
    if label.extra_sensitive:
        reason = (label.extra_sensitive_reason or "sensitive care").strip()
        notice = next(
            (n for key, n in _SENSITIVE_NOTICES if key in reason.lower()),
            "Extra-sensitive record: release only with the patient's written authorization.",
        )
        parts += [
            "",
            f"*** CONFIDENTIAL - SENSITIVE HEALTH INFORMATION ({reason.upper()}) ***",
            textwrap.fill(notice, WIDTH),
        ]
    identifiers: list[str] = []
    no_individuals = label.sensitivity_tier in {SensitivityTier.PUBLIC, SensitivityTier.INTERNAL}
    if ctx.subject is not None and not no_individuals:
        identifiers = _identifier_lines(
            label, ctx.subject, doc.name_label or _default_name_label(label)
        )
    meta = [textwrap.fill(f"{k}: {v}", WIDTH, subsequent_indent="  ") for k, v in doc.meta]
    if identifiers or meta:
        parts += ["", *identifiers, *meta]
    for block in doc.blocks:
        parts += ["", block]
    parts += ["", THIN_RULE, textwrap.fill(_FOOTERS.get(label.sensitivity_tier, ""), WIDTH)]
    return "\n".join(line.rstrip() for line in "\n".join(parts).split("\n")) + "\n"


def render_corpus(corpus: Corpus) -> dict[str, str]:
    """Render every document of a corpus.

    Args:
        corpus: the corpus whose labels to render.

    Returns:
        doc_id -> document text, in label-file order.
    """
    return {label.doc_id: render_document(label, corpus) for label in corpus.labels}


def corpus_digest(documents: dict[str, str]) -> str:
    """A SHA-256 over rendered documents, independent of dict order.

    Args:
        documents: doc_id -> text, as from `render_corpus`.

    Returns:
        ``"sha256:<hex>"`` over the sorted ``doc_id``/text pairs.
    """
    h = hashlib.sha256()
    for doc_id in sorted(documents):
        h.update(doc_id.encode("utf-8") + b"\0" + documents[doc_id].encode("utf-8") + b"\0")
    return "sha256:" + h.hexdigest()


def write_corpus_documents(corpus: Corpus, folder: Path) -> list[Path]:
    """Write one ``<doc_id>.txt`` per document (UTF-8, ``\\n`` line ends).

    Args:
        corpus: the corpus whose labels to render.
        folder: where to write; created if missing. Existing files of the same
            names are overwritten; other files are left alone.

    Returns:
        The paths written, in label-file order.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for doc_id, text in render_corpus(corpus).items():
        path = folder / f"{doc_id}.txt"
        path.write_bytes(text.encode("utf-8"))
        paths.append(path)
    return paths
