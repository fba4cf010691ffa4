"""Generated document content: each document written from its CI label, deterministically.

The Privacy Conductor corpus is built specification first (paper, section V-A): a
document's CI label is authored before its content, and the content is written to
satisfy the label. The paper used a model for that step; here a corpus's ``content/``
folder holds the templates and tables (see `privacy_ci.conductor._templates`) and this
module fills them, so the same label always yields byte-identical text on every run,
process and machine. No model is used, and nothing about any one organisation is in
code: the clinic, its people's details, its wording and its tables are all data.

What stays code is what keeps a document consistent:

* every variable detail is drawn from SHA-256, never from ``hash()`` or ``random``:
  document details (dates, values, amounts, which alternative) from the document id,
  person details (date of birth, MRN, member id, address, pay, licence, NPI with its
  check digit) from the person's id, so one patient carries the same identifiers in
  every document about them;
* ``document_type`` picks the template and the calculation behind it (lab results
  flagged against their reference ranges, BMI from height and weight, claims and
  statements that add up, dates within the corpus's period);
* ``title`` picks the specific test, drug, visit, study, specialty, agenda or memo from
  the tables; ``subject`` supplies the name, the attending clinician and other staff
  (from the assignments) and the person-level identifiers;
* ``pii_attributes`` is exactly the identifier block printed: an identifier the label
  does not list is never printed (`content_attributes` reads them back);
* ``extra_sensitive`` / ``extra_sensitive_reason`` add the matching confidentiality
  notice; ``sensitivity_tier`` picks the footer; organization-level documents
  (``subject`` null) carry no individual's identifiers at all.
"""

from __future__ import annotations

import hashlib
import re
import textwrap
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from privacy_ci.conductor import _layout as lay
from privacy_ci.conductor._labels import Label, SensitivityTier, SubjectType
from privacy_ci.conductor._policy import Agent
from privacy_ci.conductor._templates import (
    ContentPack,
    Lazy,
    Node,
    Scope,
    load_pack,
    pick_list,
    plain,
    template_name,
)
from privacy_ci.errors import PrivacyCIError

if TYPE_CHECKING:
    from privacy_ci.conductor._corpus import Corpus

__all__ = [
    "DOCUMENT_TYPES",
    "IDENTIFIER_ATTRIBUTES",
    "GeneratedContent",
    "content_attributes",
    "corpus_digest",
    "render_corpus",
    "render_document",
    "write_corpus_documents",
]

Vars = Mapping[str, object]


# ------------------------------------------------------------------------ people


@dataclass(frozen=True)
class Person:
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


def _pay_rule(people: Node, role: str, lowered: str) -> Node:
    for rule in people.nodes("pay"):
        role_ok = not rule.has("role") or rule.text("role") == role
        words_ok = not rule.has("words") or any(w in lowered for w in rule.keys("words"))
        if role_ok and words_ok:
            return rule
    raise PrivacyCIError(f"{people.where}: pay: no rule applies to role {role!r}")


def make_person(pack: ContentPack, corpus: Corpus, person_id: str, agent: Agent | None) -> Person:
    """A person's details, drawn from their id and the people table."""
    people = pack.table("people")
    agent = agent if agent is not None else corpus.directory.agent(person_id)
    name = corpus.directory.person_name(person_id) or person_id
    role = agent.role if agent is not None else ""
    description = agent.description if agent is not None else ""
    d = lay.Draw("person:" + person_id)
    if role == "Patient" or agent is None:
        dob = d.day("dob", date(1979, 1, 1), date(2002, 12, 31))
    else:
        dob = d.day("dob", date(1962, 1, 1), date(1985 if role == "Doctor" else 1994, 12, 31))
    payer = d.pick("payer", people.nodes("payers"))
    where = people.where
    unit = ""
    if d.chance("has-apt", 35):
        unit = Scope({"apartment": d.num("apt", 1, 40)}).fill(people.text("apartment"), where)
    address = Scope(
        {
            "house": d.num("house", 120, 9870),
            "street": d.pick("street", people.texts("streets")),
            "unit": unit,
            "zip": d.pick("zip", people.texts("zips")),
        }
    ).fill(people.text("address"), where)
    lowered = (name + " " + description).lower()
    rule = _pay_rule(people, role, lowered)
    low, high = rule.span("pay")
    salary = d.num("salary", low, high) * rule.integer("unit")
    company = re.search(r"\(([^)]+)\)", description)
    height = d.num("height", 60, 74)
    first = name.replace("Dr. ", "").split(",")[0].split()
    code = payer.text("code")
    return Person(
        id=person_id,
        name=name,
        role=role,
        description=description,
        dob=dob,
        mrn=d.digits("mrn", 8),
        payer=payer.text("name"),
        payer_code=code,
        plan_type=payer.text("plan"),
        member_id=code + d.digits("member", 9),
        group=f"GRP-{d.digits('group', 6)}",
        account=f"{d.digits('acct-a', 4)}-{d.digits('acct-b', 6)}",
        employee_id=f"E{d.num('employee', 10000, 99999)}",
        address=address,
        phone=Scope({"digits": d.digits("phone", 2)}).fill(people.text("phone"), where),
        email=Scope({"first": first[0].lower(), "last": first[-1].lower()}).fill(
            people.text("email"), where
        ),
        ssn_last4=d.digits("ssn", 4),
        license=f"{rule.text('licence')}-{d.digits('license', 6)}",
        npi=lay.npi("1" + d.digits("npi", 8)),
        company=company.group(1) if company else people.text("company"),
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
    "address": re.compile(r"^Address: \d+ .+, [A-Z]{2} \d{5}$", re.M),
    "account number": re.compile(r"\bAccount number: \d{4}-\d{6}\b"),
    "employee id": re.compile(r"\bEmployee ID: E\d{5}\b"),
    "license number": re.compile(r"\bLicense number: [A-Z]{2,3}-\d{6}\b"),
    "company": re.compile(r"^Company: \S", re.M),
    "phone number": re.compile(r"^Phone: \(\d{3}\) \d{3}-\d{4}$", re.M),
    "email": re.compile(r"^Email: \S+@\S+$", re.M),
    "social security number": re.compile(r"^SSN: XXX-XX-\d{4}$", re.M),
}

#: How a template may label the subject's name line (what `content_attributes` reads back).
NAME_LABELS = ("Patient", "Member", "Employee", "Contractor", "Practitioner", "Name")


def content_attributes(text: str) -> set[str]:
    """The identifier attributes a rendered document actually carries.

    Args:
        text: a document from `render_document`.

    Returns:
        The names (as used in a label's ``pii_attributes``) of the identifiers
        printed in the text, e.g. ``{"name", "date of birth", "medical record number"}``.
    """
    return {name for name, pattern in IDENTIFIER_ATTRIBUTES.items() if pattern.search(text)}


def _identifier_lines(label: Label, person: Person, name_label: str) -> list[str]:
    lines = []
    for attribute in label.pii_attributes:
        key = attribute.strip().lower()
        if key == "name":
            lines.append(f"{name_label}: {person.name}")
        elif key in {"date of birth", "dob"}:
            lines.append(f"Date of birth: {lay.us_date(person.dob)}")
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
            lines.append(f"{lay.first_upper(key)}: on file")
    return lines


def _default_name_label(label: Label) -> str:
    return {
        SubjectType.PATIENT: "Patient",
        SubjectType.EMPLOYEE: "Employee",
        SubjectType.CONTRACTOR: "Contractor",
    }.get(label.subject_type, "Name")


# ---------------------------------------------------------------------- context


@dataclass(frozen=True)
class _Ctx:
    """What a document's calculation may read: label, corpus, tables, draws, subject."""

    label: Label
    corpus: Corpus
    pack: ContentPack
    draw: lay.Draw
    focus: str
    when: date
    subject: Person | None
    person_of: Callable[[str, Agent | None], Person]

    @property
    def name(self) -> str:
        return self.subject.name if self.subject is not None else "the patient"

    @property
    def person(self) -> Person:
        """The subject, or a placeholder person for an organization-level document."""
        if self.subject is not None:
            return self.subject
        return self.person_of("unspecified-subject", None)

    def has(self, *words: str) -> bool:
        text = (self.focus + " " + self.label.title).lower()
        return any(w in text for w in words)

    def staff(self, role: str) -> Person:
        """The agent of `role` assigned to the subject (else the first of that role)."""
        agents = sorted((a for a in self.corpus.agents if a.role == role), key=lambda a: a.id)
        subject = self.label.subject
        for agent in agents:
            if subject is not None and subject in self.corpus.assignments.get(agent.id, ()):
                return self.person_of(agent.id, agent)
        if agents:
            return self.person_of(agents[0].id, agents[0])
        people = self.pack.table("people")
        name = Scope({"role": role}).fill(people.text("unnamed_staff"), people.where)
        unnamed = Agent(id=f"unnamed-{role}", name=name, role=role, context="Medical")
        return self.person_of(unnamed.id, unnamed)

    def agents_of(self, *roles: str) -> list[Agent]:
        return sorted(
            (a for a in self.corpus.agents if a.role in roles),
            key=lambda a: (roles.index(a.role), a.id),
        )

    def time(self, salt: str, lo_hour: int = 8, hi_hour: int = 16) -> str:
        hour = self.draw.num(salt + ":h", lo_hour, hi_hour)
        return f"{hour:02d}:{self.draw.num(salt + ':m', 0, 59):02d}"

    def days(self, salt: str, lo: int, hi: int) -> date:
        """The document's date moved by a drawn number of days (negative: before)."""
        return self.when + timedelta(days=self.draw.num(salt, lo, hi))


def _focus(label: Label) -> str:
    title = label.title.strip() or label.document_type
    if label.subject is not None and " - " in title:
        return title.rpartition(" - ")[0].strip()
    return title


def _matching(ctx: _Ctx, entries: Sequence[Node]) -> Node | None:
    """The first entry one of whose ``keys`` is in the title."""
    return next((e for e in entries if e.has("keys") and ctx.has(*e.keys())), None)


def _band(value: int, rows: Sequence[Node]) -> Node:
    """The first row whose ``below`` is above `value`; a row without ``below`` ends a table."""
    for row in rows:
        below = row.get("below")
        if below is None or value < below.integer():
            return row
    raise PrivacyCIError(f"{rows[-1].where}: the last row of a band table needs no 'below'")


def _as_int(scope: Scope, name: str, where: str) -> int:
    try:
        value = scope.lookup(name)
    except KeyError:
        raise PrivacyCIError(f"{where}: unknown name {name!r}") from None
    if isinstance(value, bool) or not isinstance(value, int):
        raise PrivacyCIError(f"{where}: {name!r} is not a whole number")
    return value


def _filled(row: Node, scope: Scope, skip: tuple[str, ...] = ()) -> dict[str, object]:
    """A table row with its text values filled (other values kept as they are)."""
    return {
        key: scope.fill(node.text(), node.where) if isinstance(node.value, str) else node.value
        for key, node in row.items()
        if key not in skip
    }


# ------------------------------------------------------------------- clinical bits


def _weight(ctx: _Ctx) -> int:
    return ctx.person.weight_lb + ctx.draw.num("weight", -3, 3)


def _bmi(ctx: _Ctx) -> str:
    height = ctx.person.height_in
    return lay.fixed((7030 * _weight(ctx) + height * height // 2) // (height * height), 1)


def _age(ctx: _Ctx) -> int:
    dob = ctx.person.dob
    return ctx.when.year - dob.year - ((ctx.when.month, ctx.when.day) < (dob.month, dob.day))


def _vitals(ctx: _Ctx, ranges: Node | None = None) -> str:
    """The vitals sentence of notes.yaml, drawn within the kind's ranges (if any)."""

    def span(key: str, default: tuple[int, int]) -> tuple[int, int]:
        return ranges.span(key) if ranges is not None and ranges.has(key) else default

    d = ctx.draw
    sbp = d.num("sbp", *span("systolic", (108, 128)))
    notes = ctx.pack.table("notes")
    values = {
        "sbp": sbp,
        "dbp": d.num("dbp", sbp - 50, sbp - 42),
        "hr": d.num("hr", *span("pulse", (62, 88))),
        "temp": lay.fixed(d.num("temp", *span("temp", (976, 990))), 1),
        "rr": d.num("rr", 12, 18),
        "spo2": d.num("spo2", 95, 99),
        "weight": _weight(ctx),
    }
    return Scope(values).fill(notes.text("vitals"), notes.where)


def _position(ctx: _Ctx) -> str:
    person = ctx.person
    if person.description:
        return lay.first_upper(person.description)
    return person.role or ctx.pack.table("staff").text("position_default")


# ------------------------------------------------------------- variants (kinds)


def _draw_value(ctx: _Ctx, name: str, spec: Node) -> object:
    salt = spec.opt_text("salt") or name
    d = ctx.draw
    if spec.has("num"):
        return d.num(salt, *spec.span("num"))
    if spec.has("pick"):
        return d.pick(salt, pick_list(spec.node("pick")))
    if spec.has("chance"):
        return d.chance(salt, spec.integer("chance"))
    if spec.has("after"):
        return ctx.days(salt, *spec.span("after"))
    raise PrivacyCIError(f"{spec.where}: a draw is one of num, pick, chance or after")


def _hiv_results(ctx: _Ctx, kind: Node, scope: Scope) -> Vars:
    viral = kind.node("viral_load")
    text = viral.text("undetectable" if scope.truthy("undetectable", kind.where) else "detected")
    cd4 = _as_int(scope, "cd4", kind.where)
    return {
        "cd4_prior": cd4 - _as_int(scope, "cd4_change", kind.where),
        "viral_load": scope.fill(text, viral.where),
    }


def _pregnancy_dating(ctx: _Ctx, kind: Node, scope: Scope) -> Vars:
    gestation = _as_int(scope, "gestation", kind.where)  # days since the last period
    weeks = gestation // 7
    return {
        "weeks": weeks,
        "days": gestation % 7,
        "due": ctx.when + timedelta(days=280 - gestation),
        "para": _as_int(scope, "gravida", kind.where) - 1,
        "fundal_cm": weeks + _as_int(scope, "fundal_change", kind.where),
    }


#: Calculations a kind may ask for by name (``compute:``), beyond draws and bands.
_COMPUTE: dict[str, Callable[[_Ctx, Node, Scope], Vars]] = {
    "hiv_results": _hiv_results,
    "pregnancy_dating": _pregnancy_dating,
}


def _variant(ctx: _Ctx, kind: Node, scope: Scope, shared: Node | None = None) -> Scope:
    """The values of one kind (a visit, an agenda): its draws, computations and bands."""
    draws = kind.get("draws")
    values = {} if draws is None else {n: _draw_value(ctx, n, s) for n, s in draws.items()}
    inner = scope.child(values)
    ranges = kind.get("vitals")
    if ranges is not None:
        inner = inner.child({"vitals": Lazy(lambda: _vitals(ctx, ranges))})
    mood = kind.opt_text("mood")
    if mood is not None and shared is not None:
        sentence = shared.text("mental_status")
        inner = inner.child({"mental_status": Scope({"mood": mood}).fill(sentence, shared.where)})
    compute = kind.opt_text("compute")
    if compute is not None:
        if compute not in _COMPUTE:
            raise PrivacyCIError(
                f"{kind.where}: compute: unknown {compute!r} (known: {', '.join(_COMPUTE)})"
            )
        inner = inner.child(_COMPUTE[compute](ctx, kind, inner))
    bands = kind.get("bands")
    for name, spec in () if bands is None else bands.items():
        table = spec.node("table")
        if isinstance(table.value, str):
            if shared is None:
                raise PrivacyCIError(f"{table.where}: no shared band tables here")
            table = shared.node("band_tables").node(table.text())
        row = _band(_as_int(inner, spec.text("by"), spec.where), table.nodes())
        inner = inner.child({name: _filled(row, inner, skip=("below",))})
    return inner


# ------------------------------------------------------------------ lab report


def _friedewald_ldl(total: int, hdl: int, triglycerides: int) -> int:
    return total - hdl - triglycerides // 5


def _difference(a: int, b: int) -> int:
    return a - b


def _eag_from_a1c(a1c_tenths: int) -> int:
    return (287 * a1c_tenths - 4670 + 50) // 100  # ADAG: 28.7 x A1c - 46.7, rounded


_FORMULAS: dict[str, Callable[..., int]] = {
    "friedewald_ldl": _friedewald_ldl,
    "difference": _difference,
    "eag_from_a1c": _eag_from_a1c,
}


@dataclass(frozen=True)
class _Analyte:
    where: str
    name: str
    unit: str
    dp: int
    low: float | None
    high: float | None
    span: tuple[float, float] | None
    options: tuple[str, ...]
    formula: str | None
    of: tuple[str, ...]

    def scaled(self, x: float) -> int:
        return lay.scaled(x, self.dp)

    def reference(self) -> str:
        if self.options:
            return self.options[0]
        if self.low is not None and self.high is not None:
            low, high = self.scaled(self.low), self.scaled(self.high)
            return f"{lay.fixed(low, self.dp)}-{lay.fixed(high, self.dp)}"
        if self.high is not None:
            return f"<{lay.fixed(self.scaled(self.high), self.dp)}"
        if self.low is not None:
            return f">{lay.fixed(self.scaled(self.low), self.dp)}"
        return ""

    def flag(self, value: int) -> str:
        if self.low is not None and self.high is not None:
            if value > self.scaled(self.high):
                return "H"
            return "L" if value < self.scaled(self.low) else ""
        if self.high is not None:
            return "H" if value >= self.scaled(self.high) else ""
        if self.low is not None:
            return "L" if value <= self.scaled(self.low) else ""
        return ""


def _analyte(node: Node) -> _Analyte:
    def opt_number(key: str) -> float | None:
        found = node.get(key)
        return None if found is None or found.value is None else found.number()

    span = None
    if node.has("span"):
        pair = node.nodes("span")
        if len(pair) != 2:
            raise PrivacyCIError(f"{node.where}.span: expected a [low, high] pair")
        span = (pair[0].number(), pair[1].number())
    options = node.texts("options") if node.has("options") else ()
    formula = node.opt_text("formula")
    if sum((span is not None, bool(options), formula is not None)) != 1:
        raise PrivacyCIError(f"{node.where}: give exactly one of span, options or formula")
    if formula is not None and formula not in _FORMULAS:
        raise PrivacyCIError(
            f"{node.where}: formula: unknown {formula!r} (known: {', '.join(_FORMULAS)})"
        )
    dp = node.integer("dp") if node.has("dp") else 0
    if not 0 <= dp <= 4:
        raise PrivacyCIError(f"{node.where}.dp: expected 0 to 4 decimals")
    return _Analyte(
        node.where,
        node.text("name"),
        node.opt_text("unit") or "",
        dp,
        opt_number("low"),
        opt_number("high"),
        span,
        options,
        formula,
        node.texts("of") if node.has("of") else (),
    )


def _panel_analytes(labs: Node, panel: Node) -> list[_Analyte]:
    out: list[_Analyte] = []
    for item in panel.nodes("analytes"):
        if isinstance(item.value, str):
            out += [_analyte(a) for a in labs.node("groups").nodes(item.text())]
        else:
            out.append(_analyte(item))
    return out


def _lab_comment(comment: Node, values: dict[str, int], flagged: list[str], dp: int) -> str:
    if comment.has("flagged"):
        hit = any(name in flagged for name in comment.texts("flagged"))
        return comment.text("text" if hit else "otherwise")
    name = comment.text("value")
    if name not in values:
        raise PrivacyCIError(f"{comment.where}.value: {name!r} is not a measured analyte")
    band = _band(values[name], comment.nodes("bands"))
    scope = Scope({"value": lay.fixed(values[name], dp), "band": band.text("text")})
    return scope.fill(comment.text("text"), comment.where)


def _lab_report(ctx: _Ctx, scope: Scope) -> Vars:
    labs = ctx.pack.table("labs")
    panel = _matching(ctx, labs.nodes("panels")) or labs.node("fallback")
    analytes = _panel_analytes(labs, panel)
    d = ctx.draw
    values: dict[str, int] = {}
    rows: list[tuple[str, ...]] = []
    flagged: list[str] = []
    for i, a in enumerate(analytes):
        if a.options:
            result = a.options[0] if d.chance(f"q{i}", 70) else d.pick(f"v{i}", a.options)
            flag = "A" if result != a.options[0] else ""
        else:
            if a.formula is not None:
                missing = [n for n in a.of if n not in values]
                if missing:
                    raise PrivacyCIError(f"{a.where}.of: {missing} are not measured before it")
                try:
                    value = max(_FORMULAS[a.formula](*(values[n] for n in a.of)), 0)
                except TypeError:
                    raise PrivacyCIError(
                        f"{a.where}.of: wrong number of analytes for {a.formula}"
                    ) from None
            else:
                assert a.span is not None  # one of span/options/formula, checked on reading
                value = d.num(f"v{i}", a.scaled(a.span[0]), a.scaled(a.span[1]))
            values[a.name] = value
            result, flag = lay.fixed(value, a.dp), a.flag(value)
        if flag:
            flagged.append(a.name)
        rows.append((a.name, result, flag, a.unit, a.reference()))
    summary = labs.node("summary")
    if flagged:
        text = Scope({"flagged": ", ".join(flagged)}).fill(summary.text("abnormal"), labs.where)
    else:
        text = summary.text("normal")
    comment = panel.get("comment")
    if comment is not None:
        value_name = comment.opt_text("value")
        dp = next((a.dp for a in analytes if a.name == value_name), 0)
        text += " " + _lab_comment(comment, values, flagged, dp)
    clinic = ctx.pack.table("clinic")
    return {
        "panel": plain(panel),
        "cpt": ", ".join(panel.texts("cpt")),
        "indication": list(d.pick("indication", panel.pairs("indications"))),
        "collected_at": ctx.time("collected", 7, 10),
        "reported": ctx.days("tat", 0, 1),
        "reported_at": ctx.time("reported", 11, 17),
        "accession": d.digits("accession", 7),
        "results": rows,
        "summary": text,
        "technologist": d.pick("tech", clinic.texts("laboratory_staff")),
    }


# ------------------------------------------------------------------ prescription


def _prescription(ctx: _Ctx, scope: Scope) -> Vars:
    drugs = ctx.pack.table("drugs")
    found = _matching(ctx, drugs.nodes("drugs"))
    node = found or drugs.node("fallback")
    strength = re.search(r"\d+(?:\.\d+)?\s*(?:mg|mcg|g|mL|units?)\b", ctx.focus)
    named = re.sub(r"\s*\d.*$", "", ctx.focus).strip()
    # A drug the tables do not know is printed as the title names it.
    generic = node.text("generic") if found is not None else (named or node.text("generic"))
    form = node.text("form")
    if strength is None:
        rx_line = f"{generic} {node.text('strength')} {form}"
    else:
        rx_line = f"{named} {strength.group(0)} {form}"
        if generic.lower() != named.lower():
            rx_line += f" ({generic})"
    d = ctx.draw
    drug = node.mapping()
    drug["generic"] = generic
    drug.setdefault("schedule", "")
    return {
        "drug": drug,
        "rx_line": rx_line,
        "allergies": d.pick("allergy", drugs.texts("allergies")),
        "rx_number": d.digits("rx", 6),
        "quantity": d.pick("qty", node.texts("quantities")),
        "refills": d.num("refills", *node.span("refills")),
        "sent_at": ctx.time("sent", 9, 17),
        "next_visit": ctx.days("next", 14, 90),
        "signed_at": ctx.time("signed", 9, 17),
    }


# ------------------------------------------------------------------ visit notes


def _visit_note(family: str) -> Callable[[_Ctx, Scope], Vars]:
    """The builder of a visit-note family (clinical note, mental health assessment)."""

    def build(ctx: _Ctx, scope: Scope) -> Vars:
        notes = ctx.pack.table("notes")
        spec = notes.node(family)
        chosen = _matching(ctx, spec.nodes("kinds"))
        if chosen is not None:
            name = chosen.text("kind")
        else:
            reason = (ctx.label.extra_sensitive_reason or "").lower()
            by_reason = spec.nodes("by_reason") if spec.has("by_reason") else ()
            hit = next((r for r in by_reason if r.text("match") in reason), None)
            name = hit.text("kind") if hit is not None else spec.text("default")
        kind = notes.node("kinds").node(name)
        inner = _variant(ctx, kind, scope, notes)

        def fill(node: Node) -> str:
            return inner.fill(node.text(), node.where)

        def coded(key: str) -> list[tuple[str, str]]:
            where = kind.where
            return [(inner.fill(c, where), inner.fill(t, where)) for c, t in kind.pairs(key)]

        results = kind.nodes("results") if kind.has("results") else ()
        return {
            "visit": fill(kind.node("visit")),
            "complaint": fill(kind.node("complaint")),
            "subjective": fill(kind.node("subjective")),
            "objective": fill(kind.node("objective")),
            "results": [tuple(fill(cell) for cell in row.nodes()) for row in results],
            "diagnoses": [f"- {code} {desc}" for code, desc in coded("diagnoses")],
            "plan": [fill(item) for item in kind.nodes("plan")],
            # codes that start with a letter are HCPCS Level II, the others CPT
            "billing": [
                f"{'HCPCS' if code[:1].isalpha() else 'CPT'} {code} {desc}"
                for code, desc in coded("billing")
            ],
            "signed_at": ctx.time("signed", 12, 18),
        }

    return build


# ------------------------------------------------------------- referral letter


def _referral(ctx: _Ctx, scope: Scope) -> Vars:
    referrals = ctx.pack.table("referrals")
    d = ctx.draw
    entry = next(
        (s for s in referrals.nodes("specialties") if ctx.has(s.text("specialty").lower())), None
    )
    if entry is None:
        fallback = referrals.node("fallback")
        prefix = re.escape(referrals.text("title_prefix"))
        specialty = re.sub(rf"(?i)^{prefix}\s*", "", ctx.focus).strip()
        department = lay.first_upper(specialty or fallback.text("specialty"))
        reason = plain(fallback.node("reason"))
    else:
        department = entry.opt_text("department") or lay.first_upper(entry.text("specialty"))
        reason = d.pick("reason", pick_list(entry.node("reasons")))
    return {
        "specialty": department,
        "reason": reason,
        "urgency": d.pick("urgency", referrals.texts("urgency")),
        "history": d.pick("history", pick_list(referrals.node("histories"))),
        "allergy": d.pick("allergy", referrals.texts("allergies")),
        "last_seen": ctx.when - timedelta(days=d.num("seen", 3, 20)),
    }


# ------------------------------------------------------------ discharge summary


def _discharge(ctx: _Ctx, scope: Scope) -> Vars:
    stays = ctx.pack.table("stays")
    stay = _matching(ctx, stays.nodes("stays"))
    if stay is None:
        stay = stays.node("fallback")
        reason = ctx.focus.replace(stays.text("title_prefix"), "").strip() or stay.text("reason")
    else:
        reason = stay.text("reason")
    d = ctx.draw
    length = d.num("los", *stay.span("days"))
    return {
        "stay": plain(stay),
        "reason": reason,
        "length": length,
        "one_day": length == 1,
        "admitted": ctx.when - timedelta(days=length),
        "diagnoses": [f"- {c} {t}" for c, t in stay.pairs("diagnoses")],
        "medications": list(stay.texts("medications")),
        "follow_up": ctx.days("follow", 7, 14),
        "follow_up_at": ctx.time("appt", 9, 15),
        "signed_at": ctx.time("signed", 13, 18),
    }


# ------------------------------------------------------------- radiology report


def _radiology(ctx: _Ctx, scope: Scope) -> Vars:
    imaging = ctx.pack.table("imaging")
    node = _matching(ctx, imaging.nodes("studies")) or imaging.node("fallback")
    study = node.mapping()
    study.setdefault("name", ctx.focus)  # a study the tables do not know: as the title says
    d = ctx.draw
    return {
        "study": study,
        "reading": d.pick("findings", pick_list(node.node("findings"))),
        "exam_at": ctx.time("exam", 8, 17),
        "accession": d.digits("acc", 6),
        "compared": d.chance("cmp", 40),
        "prior": ctx.when - timedelta(days=d.num("prior", 30, 75)),
        "read_at": ctx.time("read", 17, 19),
    }


# ------------------------------------------------------------------- financial


@dataclass(frozen=True)
class _Line:
    when: date
    code: str
    desc: str
    cents: int


def _visit_lines(ctx: _Ctx, salt: str, when: date) -> tuple[list[_Line], list[str]]:
    """What one office visit bills (billing.yaml), and its diagnosis (code, description)."""
    billing = ctx.pack.table("billing")
    d = ctx.draw
    visit = d.pick(salt + ":dx", billing.nodes("visits"))
    office = d.pick(salt + ":em", billing.nodes("office_visits"))

    def line(node: Node, what: str) -> _Line:
        low, high = node.span("charge")  # cents, drawn in whole dollars
        cents = d.num(f"{salt}:{what}", low // 100, high // 100) * 100
        return _Line(when, node.text("code"), node.text("desc"), cents)

    lines = [line(office, "em$"), line(visit.node("service"), "x$")]
    if visit.get("venipuncture") is not None and visit.node("venipuncture").value is True:
        lines.append(line(billing.node("venipuncture"), "v$"))
    diagnosis = visit.texts("diagnosis")
    if len(diagnosis) != 2:
        raise PrivacyCIError(f"{visit.where}.diagnosis: expected a [code, description] pair")
    return lines, list(diagnosis)


def _insurance_claim(ctx: _Ctx, scope: Scope) -> Vars:
    service = ctx.when - timedelta(days=ctx.draw.num("lag", 2, 9))
    lines, diagnosis = _visit_lines(ctx, "claim", service)
    return {
        "claim_number": ctx.draw.digits("claim", 6),
        "diagnosis": diagnosis,
        "lines": [
            (lay.us_date(x.when), f"CPT {x.code}", x.desc, "A", "1", lay.money(x.cents))
            for x in lines
        ],
        "total": lay.money(sum(x.cents for x in lines)),
        "accepted": ctx.when + timedelta(days=1),
    }


def _billing_statement(ctx: _Ctx, scope: Scope) -> Vars:
    d = ctx.draw
    visit_day = ctx.when - timedelta(days=d.num("lag", 35, 60))
    lines, _ = _visit_lines(ctx, "stmt", visit_day)
    charges = sum(x.cents for x in lines)
    paid = charges * d.num("paid-pct", 50, 65) // 100
    adjust = charges * d.num("adj-pct", 10, 18) // 100
    previous = d.num("prior", 0, 1) * d.num("prior$", 2000, 6500)
    copay = min(d.pick("pp", (0, 2000, 2500, 4000)), charges - paid - adjust)
    return {
        "due": ctx.when + timedelta(days=30),
        "previous": lay.money(previous),
        "has_previous": bool(previous),
        "lines": [
            (lay.us_date(x.when), f"CPT {x.code}", x.desc, lay.money(x.cents)) for x in lines
        ],
        "paid_on": visit_day + timedelta(days=d.num("ins", 18, 30)),
        "paid": lay.money(-paid),
        "adjustment": lay.money(-adjust),
        "has_copay": bool(copay),
        "copay": lay.money(-copay),
        "balance": lay.money(charges - paid - adjust + previous - copay),
    }


def _eob(ctx: _Ctx, scope: Scope) -> Vars:
    d = ctx.draw
    service = ctx.when - timedelta(days=d.num("lag", 14, 30))
    lines, _ = _visit_lines(ctx, "eob", service)
    rows: list[tuple[str, ...]] = []
    totals = [0, 0, 0, 0, 0, 0]
    deductible_left = d.pick("ded-left", (0, 0, 5000, 12000))
    for i, x in enumerate(lines):
        allowed = x.cents * d.num(f"allow{i}", 52, 78) // 100
        deductible = min(allowed, deductible_left)
        deductible_left -= deductible
        # the office visit has a flat copay; the other services 20% coinsurance
        coins = (allowed - deductible) * 20 // 100 if i else min(2500, allowed - deductible)
        plan = allowed - deductible - coins
        values = [x.cents, allowed, deductible, coins, plan, deductible + coins]
        totals = [a + b for a, b in zip(totals, values, strict=True)]
        rows.append((f"CPT {x.code}", *(lay.money(v) for v in values)))
    total = dict(
        zip(
            ("billed", "allowed", "deductible", "coinsurance", "plan_paid", "owed"),
            totals,
            strict=True,
        )
    )
    return {
        "member_services": d.digits("ms", 2),
        "claim_number": d.digits("claim", 7),
        "service_date": service,
        "rows": rows,
        **{key: lay.money(value) for key, value in total.items()},
        "deductible_met": lay.money(d.num("ded-met", 400, 1500) * 100),
    }


def _verification(ctx: _Ctx, scope: Scope) -> Vars:
    d = ctx.draw
    deductible = d.pick("deductible", (1000, 1500, 2500))
    met = d.num("met", 0, deductible // 50) * 50
    copay = d.pick("copay", (20, 25, 30, 40))
    return {
        "verified_at": ctx.time("verified", 8, 16),
        "reference": d.digits("ref", 9),
        "appointment": ctx.days("appt", 3, 12),
        "copay": lay.dollars(copay),
        "specialist_copay": lay.dollars(copay * 2),
        "deductible": lay.dollars(deductible),
        "deductible_met": lay.dollars(met),
        "deductible_left": lay.dollars(deductible - met),
        "out_of_pocket": lay.dollars(6000),
        "out_of_pocket_met": lay.dollars(met + copay * 3),
        "hmo": ctx.person.plan_type == "HMO",  # HMO plans need a referral
    }


def _prior_auth(ctx: _Ctx, scope: Scope) -> Vars:
    billing = ctx.pack.table("billing")
    auths = billing.nodes("authorizations")
    auth = _matching(ctx, auths)
    if auth is None:
        reason = (ctx.label.extra_sensitive_reason or "").lower()
        hit = next((r for r in billing.nodes("by_reason") if r.text("match") in reason), None)
        wanted = hit.text("id") if hit is not None else billing.text("default")
        auth = next((a for a in auths if a.text("id") == wanted), None)
        if auth is None:
            raise PrivacyCIError(f"{billing.where}: no authorization has id {wanted!r}")
    d = ctx.draw
    start = ctx.days("start", 1, 5)
    return {
        "authorization": plain(auth),
        "codes": [f"- {c} {t}" for c, t in auth.pairs("codes")],
        "diagnoses": [f"- {c} {t}" for c, t in auth.pairs("diagnoses")],
        "cost": lay.money(d.num("cost", *auth.span("cost")) * 100),
        "decision": d.pick("status", pick_list(billing.node("decisions"))),
        "authorization_number": d.digits("auth", 9),
        "valid_from": start,
        "valid_to": start + timedelta(days=d.pick("valid", (60, 90, 180))),
    }


# ------------------------------------------------------------------ employment


def _by_role(node: Node, role: str) -> Node:
    """A role's entry of a table keyed by role, else its ``default``."""
    return node.get(role) or node.node("default")


def _salary_letter(ctx: _Ctx, scope: Scope) -> Vars:
    d = ctx.draw
    merit = d.num("merit", 20, 40)  # tenths of a percent
    market = d.pick("market", (0, 0, 5, 10, 15))
    old = ctx.person.salary
    new = (old * (1000 + merit + market) // 1000 + 50) // 100 * 100
    return {
        "current": lay.dollars(old),
        "merit": lay.fixed(merit, 1),
        "market": lay.fixed(market, 1),
        "new": lay.dollars(new),
        "biweekly": lay.money((new * 100 + 13) // 26),
        "effective": ctx.days("eff", 14, 45),
    }


def _employment_contract(ctx: _Ctx, scope: Scope) -> Vars:
    d = ctx.draw
    person = ctx.person
    terms = _by_role(ctx.pack.table("staff").node("contract").node("terms"), person.role)
    bonus = ""
    if terms.has("bonus"):
        bonus = lay.dollars(d.num("bonus", *terms.span("bonus")) * 1000)
    return {
        "terms": _filled(terms, scope.child({"bonus": bonus})),
        "start": ctx.days("start", 14, 40),
        "pto": d.num("pto", *terms.span("pto")),
        "salary": lay.dollars(person.salary),
        "biweekly": lay.money((person.salary * 100 + 13) // 26),
    }


def _performance_review(ctx: _Ctx, scope: Scope) -> Vars:
    d = ctx.draw
    role = ctx.person.role
    review = ctx.pack.table("staff").node("review")
    names = _by_role(review.node("competencies"), role).texts()
    ratings = [d.num(f"rating{i}", 3, 5) for i in range(len(names))]
    overall = sum(ratings) * 10 // len(ratings)  # tenths
    return {
        "ratings": [(n, str(r)) for n, r in zip(names, ratings, strict=True)],
        "overall": overall,
        "rating": _filled(_band(overall, review.nodes("bands")), scope, skip=("below",)),
        "reviewer": _by_role(review.node("reviewers"), role).text(),
        "strongest": names[ratings.index(max(ratings))],
        "weakest": names[ratings.index(min(ratings))],
        "goal": d.pick("goal", review.texts("goals")),
    }


def _credentialing(ctx: _Ctx, scope: Scope) -> Vars:
    d = ctx.draw
    person = ctx.person
    table = ctx.pack.table("staff").node("credentialing")
    clinic = ctx.pack.table("clinic")
    desc = person.description.lower()
    physician = person.role == "Doctor"
    which = "physician" if physician else "other"
    board = next(
        (b.text("board") for b in table.nodes("boards") if b.text("match") in desc),
        table.node("board_default").text(which),
    )
    privileges = next(
        (p.text("privileges") for p in table.nodes("privileges") if p.text("match") in desc),
        table.node("privileges_default").text(which),
    )
    committee = ctx.days("committee", 7, 21)
    return {
        "physician": physician,
        "board": board,
        "privileges": privileges,
        "license_board": clinic.text("medical_board" if physician else "nursing_board"),
        "license_expires": date(ctx.when.year + 1, d.num("exp-m", 1, 12), 28),
        "claims": d.pick("claims", (0, 0, 1)),
        "claim_year": d.num("claim-year", 2014, 2019),
        "committee": committee,
        "executive_committee": committee + timedelta(days=14),
        "recredentialing": f"{lay.MONTHS[committee.month - 1]} {committee.year + 2}",
    }


def _contractor_agreement(ctx: _Ctx, scope: Scope) -> Vars:
    d = ctx.draw
    person = ctx.person
    table = ctx.pack.table("staff").node("contractor")
    renewal = ctx.has(*table.keys("renewal_keys"))
    rate = person.salary + (d.num("raise", 5, 10) if renewal else 0)  # hourly
    hours = d.pick("hours", (40, 60, 80))
    scope_words = person.description.lower()
    duties = next(
        (
            e.texts("duties")
            for e in table.nodes("duties")
            if not e.has("match") or any(w in scope_words for w in e.keys("match"))
        ),
        None,
    )
    if duties is None:
        raise PrivacyCIError(f"{table.where}.duties: no entry applies (the last needs no match)")
    return {
        "renewal": renewal,
        "agreement_number": d.digits("csa", 4),
        "start": ctx.when,
        "start_year": ctx.when.year,
        "end": ctx.when + timedelta(days=364),
        "duties": ", ".join(duties),
        "previous_rate": lay.dollars(person.salary),
        "rate": lay.dollars(rate),
        "after_hours_rate": lay.money(rate * 150),
        "hours": hours,
        "retainer": lay.dollars(rate * hours),
        "ceiling": lay.dollars(rate * hours * 12 + 10000),
    }


# ------------------------------------------------------------------- internal


def _meeting_agenda(ctx: _Ctx, scope: Scope) -> Vars:
    ops = ctx.pack.table("operations")
    agendas = ops.nodes("agendas")
    agenda = _matching(ctx, agendas) or next((a for a in agendas if not a.has("keys")), None)
    if agenda is None:
        raise PrivacyCIError(f"{ops.where}: agendas: none without keys to use by default")
    d = ctx.draw
    doctors, nurses = ctx.agents_of("Doctor"), ctx.agents_of("Nurse")
    inner = _variant(ctx, agenda, scope)
    items = [
        (str(i), inner.fill(item, agenda.where), inner.fill(lead, agenda.where))
        for i, (item, lead) in enumerate(agenda.pairs("items"), 1)
    ]
    return {
        "agenda": plain(agenda),
        "chair": d.pick("chair", doctors).name if doctors else ops.text("chair_default"),
        "recorder": d.pick("recorder", nurses).name if nurses else ops.text("recorder_default"),
        "items": items,
        "next_meeting": ctx.when + timedelta(days=agenda.integer("next_in_days")),
    }


def _policy_memo(ctx: _Ctx, scope: Scope) -> Vars:
    ops = ctx.pack.table("operations")
    memo = _matching(ctx, ops.nodes("memos"))
    if memo is not None:
        subject, rules = memo.text("subject"), memo.texts("rules")
    else:
        prefix = re.escape(ops.text("memo_title_prefix"))
        subject = re.sub(rf"(?i)^{prefix}\s*", "", ctx.focus)
        rules = ops.texts("memo_fallback_rules")
    return {"subject": subject, "rules": list(rules), "effective": ctx.days("eff", 7, 21)}


def _staff_schedule(ctx: _Ctx, scope: Scope) -> Vars:
    d = ctx.draw
    table = ctx.pack.table("operations").node("schedule")
    first_year = _period(ctx.pack)[0].year
    year = d.pick("year", (first_year, first_year + 1))
    staff = ctx.agents_of("Doctor", "Nurse", "Billing Specialist")
    focus = ctx.focus.lower()
    month = next((i for i, m in enumerate(lay.MONTHS, 1) if m.lower() in focus), None)
    if ctx.has(*table.keys("on_call_keys")) or (
        month is not None and ctx.has(table.text("call_key").lower())
    ):
        month = month or d.num("month", 1, 12)
        first = date(year, month, 1)
        monday = first - timedelta(days=first.weekday())
        doctors = ctx.agents_of("Doctor") or staff
        nurses = ctx.agents_of("Nurse") or staff
        if not staff:
            raise PrivacyCIError(
                f"document {ctx.label.doc_id!r}: an on-call rota needs doctors, nurses or"
                " billing staff in agents.yaml"
            )
        rota: list[tuple[str, ...]] = []
        for w in range(5):
            begin = monday + timedelta(days=7 * w)
            if begin.month != month and w:
                break
            rota.append(
                (
                    f"{lay.us_date(begin)} - {lay.us_date(begin + timedelta(days=6))}",
                    doctors[(w + d.num("doc-rot", 0, 3)) % len(doctors)].name,
                    nurses[(w + d.num("nurse-rot", 0, 3)) % len(nurses)].name,
                )
            )
        return {
            "on_call": True,
            "month": lay.MONTHS[month - 1],
            "schedule_year": year,
            "rota": rota,
        }
    match = re.search(r"week\s+(\d+)", ctx.focus, re.I)
    week = min(max(int(match.group(1)), 1), 52) if match else d.num("week", 1, 52)
    monday = date.fromisocalendar(year, week, 1)
    shifts = table.texts("shifts")
    grid: list[tuple[str, ...]] = []
    for agent in staff:
        cells = [d.pick(f"shift:{agent.id}:{i}", shifts) for i in range(5)]
        saturday = d.chance(f"sat:{agent.id}", table.integer("saturday_percent"))
        cells.append(table.text("saturday") if saturday else table.text("off"))
        grid.append((agent.name, *cells))
    days = (monday + timedelta(days=i) for i in range(6))
    return {
        "on_call": False,
        "week": week,
        "monday": monday,
        "sunday": monday + timedelta(days=6),
        "days": [f"{lay.WEEKDAYS[day.weekday()]} {day.month}/{day.day}" for day in days],
        "grid": grid,
    }


# --------------------------------------------------------------------- public


def _public_pamphlet(ctx: _Ctx, scope: Scope) -> Vars:
    lots = ctx.pack.table("clinic").texts("parking_lots")
    return {"parking": ctx.draw.pick("lot", lots)}


def _generic(ctx: _Ctx, scope: Scope) -> Vars:
    return {"topic": ctx.focus or ctx.label.document_type}


_FAMILIES: dict[str, Callable[[_Ctx, Scope], Vars]] = {
    "lab report": _lab_report,
    "prescription": _prescription,
    "clinical note": _visit_note("clinical_note"),
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
    "mental health assessment": _visit_note("mental_health_assessment"),
    "meeting agenda": _meeting_agenda,
    "policy memo": _policy_memo,
    "staff schedule": _staff_schedule,
    "public pamphlet": _public_pamphlet,
}

#: The document types with a calculation of their own (a template of the same name in
#: ``content/templates`` uses it; any other type is written from the generic template).
DOCUMENT_TYPES = tuple(_FAMILIES)


# ------------------------------------------------------------------ the frame


def _period(pack: ContentPack) -> tuple[date, date]:
    period = pack.table("clinic").node("period")
    first, last = period.node("first"), period.node("last")
    for node in (first, last):
        if not isinstance(node.value, date):
            raise PrivacyCIError(f"{node.where}: expected a date (YYYY-MM-DD)")
    assert isinstance(first.value, date) and isinstance(last.value, date)
    if last.value < first.value:
        raise PrivacyCIError(f"{period.where}: last is before first")
    return first.value, last.value


class GeneratedContent:
    """Documents written from their labels with the templates of a ``content/`` folder.

    Args:
        corpus: the corpus whose labels, people and assignments the documents use.
        folder: the content folder (tables ``*.yaml`` and ``templates/*.tmpl``).

    Raises:
        PrivacyCIError: a table or template cannot be read (naming file and line).
    """

    def __init__(self, corpus: Corpus, folder: Path) -> None:
        self.corpus = corpus
        self.folder = Path(folder)
        self.pack = load_pack(self.folder)
        self._people: dict[str, Person] = {}

    def describe(self) -> str:
        return f"generated from the templates and tables in {self.folder}"

    def content(self, doc_id: str) -> str:
        return self.render(self.corpus.label(doc_id))

    def _person(self, person_id: str, agent: Agent | None) -> Person:
        found = self._people.get(person_id)
        if found is None:
            found = self._people[person_id] = make_person(self.pack, self.corpus, person_id, agent)
        return found

    def _scope(self, ctx: _Ctx) -> Scope:
        label = ctx.label
        return Scope(
            {
                "clinic": self.pack.table("clinic").value,
                "doc_id": label.doc_id,
                "title": label.title,
                "document_type": label.document_type,
                "context": label.originating_context,
                "focus": ctx.focus,
                "date": ctx.when,
                "year": ctx.when.year,
                "yy": ctx.when.year % 100,
                "name": ctx.name,
                "subject": ctx.subject,
                "person": Lazy(lambda: ctx.person),
                "doctor": Lazy(lambda: ctx.staff("Doctor")),
                "nurse": Lazy(lambda: ctx.staff("Nurse")),
                "billing": Lazy(lambda: ctx.staff("Billing Specialist")),
                "hr": Lazy(lambda: ctx.staff("HR Manager")),
                "position": Lazy(lambda: _position(ctx)),
                "age": Lazy(lambda: _age(ctx)),
                "height": Lazy(lambda: ctx.person.height_in),
                "bmi": Lazy(lambda: _bmi(ctx)),
                "vitals": Lazy(lambda: _vitals(ctx)),
            }
        )

    def render(self, label: Label) -> str:
        """Write a document's content from its label, deterministically.

        The text depends only on the label, the corpus's people and assignments, and
        the content folder: the same label always yields byte-identical text, in any
        process on any machine. Organization-level documents carry no individual
        identifiers; otherwise exactly the label's ``pii_attributes`` are printed.

        Returns:
            The document text: lines of at most about 78 characters, ending with a newline.
        """
        pack = self.pack
        draw = lay.Draw("doc:" + label.doc_id)
        subject = self._person(label.subject, None) if label.subject is not None else None
        ctx = _Ctx(
            label,
            self.corpus,
            pack,
            draw,
            _focus(label),
            draw.day("date", *_period(pack)),
            subject,
            self._person,
        )
        scope = self._scope(ctx)
        kind = label.document_type.strip().lower()
        template = pack.template(label.document_type)
        own = template_name(label.document_type) in pack.templates
        build = _FAMILIES.get(kind, _generic) if own else _generic
        doc = template.render(scope.child(build(ctx, scope)))
        name_label = doc.name_label or _default_name_label(label)
        if name_label not in NAME_LABELS:
            raise PrivacyCIError(
                f"{template.path}: name label {name_label!r} is not one of {', '.join(NAME_LABELS)}"
            )
        frame = pack.table("frame")
        where = frame.where
        parts = [scope.fill(line, where) for line in frame.texts("letterhead")]
        parts += [
            doc.department,
            lay.RULE,
            doc.heading,
            scope.fill(frame.text("document_id"), where),
        ]
        if label.extra_sensitive:
            sensitive = frame.node("sensitive")
            reason = (label.extra_sensitive_reason or sensitive.text("default_reason")).strip()
            notice = next(
                (
                    n.text("text")
                    for n in sensitive.nodes("notices")
                    if n.text("match") in reason.lower()
                ),
                sensitive.text("default_notice"),
            )
            banner = scope.child({"reason": reason}).fill(sensitive.text("banner"), where)
            parts += ["", banner, textwrap.fill(scope.fill(notice, where), lay.WIDTH)]
        identifiers: list[str] = []
        no_individuals = label.sensitivity_tier in {
            SensitivityTier.PUBLIC,
            SensitivityTier.INTERNAL,
        }
        if subject is not None and not no_individuals:
            identifiers = _identifier_lines(label, subject, name_label)
        meta = [lay.field_line(line) for line in doc.meta]
        if identifiers or meta:
            parts += ["", *identifiers, *meta]
        for block in doc.blocks:
            parts += ["", block]
        footer = frame.node("footers").get(label.sensitivity_tier.value)
        footer_text = "" if footer is None else scope.fill(footer.text(), footer.where)
        parts += ["", lay.THIN_RULE, textwrap.fill(footer_text, lay.WIDTH)]
        return "\n".join(line.rstrip() for line in "\n".join(parts).split("\n")) + "\n"


# ------------------------------------------------------------------------ API


def render_document(label: Label, corpus: Corpus) -> str:
    """Write a document's content from its label with the corpus's templates.

    Args:
        label: the document's CI label (its title, type, subject, tier, PII list...);
            it need not be one of the corpus's labels (an edited copy renders too).
        corpus: a corpus whose folder has a ``content/`` folder of templates.

    Raises:
        PrivacyCIError: the corpus's content is not generated from templates.
    """
    source = corpus.content_source
    if not isinstance(source, GeneratedContent):
        raise PrivacyCIError(
            f"the corpus's documents are {source.describe()}, not generated from templates"
        )
    return source.render(label)


def render_corpus(corpus: Corpus) -> dict[str, str]:
    """Every document's content, from the corpus's content source.

    Returns:
        doc_id -> document text, in label-file order.
    """
    return {label.doc_id: corpus.content(label.doc_id) for label in corpus.labels}


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


def write_documents(documents: Mapping[str, str], folder: Path) -> list[Path]:
    """Write one ``<doc_id>.txt`` per document (UTF-8, as given); `folder` is created."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for doc_id, text in documents.items():
        path = folder / f"{doc_id}.txt"
        path.write_bytes(text.encode("utf-8"))
        paths.append(path)
    return paths


def write_corpus_documents(corpus: Corpus, folder: Path) -> list[Path]:
    """Write one ``<doc_id>.txt`` per document (UTF-8, ``\\n`` line ends as generated).

    Args:
        corpus: the corpus whose documents to write (from its content source).
        folder: where to write; created if missing. Existing files of the same
            names are overwritten; other files are left alone.

    Returns:
        The paths written, in label-file order.
    """
    return write_documents(render_corpus(corpus), folder)
