"""The CI document label (Tables III and IV of the Conductor paper) and its files.

Parsing and validation are separate from deciding: a label file is read into
`Label` values here, with one precise message per problem; the gate only reads
already-validated labels (and denies anything else with `Rule.INVALID_LABEL`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from enum import StrEnum
from pathlib import Path
from typing import Any

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_serializer,
    field_validator,
    model_validator,
)

from privacy_ci._files import read_user_file
from privacy_ci._structured import (
    MAX_INPUT_BYTES_ENV,
    DuplicateKeyError,
    InputLimitError,
    load_json,
    load_yaml,
    max_input_bytes,
)
from privacy_ci.errors import PrivacyCIError, ValidationFailed


class SensitivityTier(StrEnum):
    """The seven sensitivity tiers of Table V."""

    PUBLIC = "public"
    INTERNAL = "internal"
    PII_BASIC = "pii_basic"
    CLINICAL_STANDARD = "clinical_standard"
    CLINICAL_SENSITIVE = "clinical_sensitive"
    FINANCIAL = "financial"
    EMPLOYMENT = "employment"


class SubjectType(StrEnum):
    """Who a document is about (the data-subject parameter, Table III)."""

    PATIENT = "patient"
    EMPLOYEE = "employee"
    CONTRACTOR = "contractor"
    INDIVIDUAL = "individual"
    ORGANIZATION = "organization"


def check_role_name(value: object) -> str:
    """Check one role name as written in a label, ACL or requester.

    Role names are matched exactly (as Cedar does), so anything that would only
    match after normalisation is an error here rather than a silent fix.

    Args:
        value: the raw value from the file.

    Returns:
        The role name, unchanged.

    Raises:
        ValueError: with what is wrong and what was expected.
    """
    # ValueError, not PrivacyCIError: this runs inside pydantic validators (which
    # report it as a ValidationError) and callers outside them convert it.
    if not isinstance(value, str):
        raise ValueError(f"a role must be a string, got {type(value).__name__} {value!r}")
    if value == "":
        raise ValueError("a role must not be empty")
    if value != value.strip():
        raise ValueError(f"role {value!r} has leading or trailing whitespace")
    if value in {"*", "all", "any"} or "*" in value:
        raise ValueError(f"role {value!r} is a wildcard; list every permitted role by name")
    if "," in value or ";" in value:
        raise ValueError(f"role {value!r} holds several roles in one string; write a list")
    if any(not ch.isprintable() for ch in value):
        raise ValueError(f"role {value!r} contains a control or invisible character")
    return value


class Label(BaseModel):
    """A document's CI label.

    Only `permitted_receiver_roles` and `sensitivity_tier` (with `subject`)
    decide; `document_type`, `extra_sensitive` and `governing_principle`
    explain; the rest is recorded for provenance (Table IV).
    """

    model_config = ConfigDict(frozen=True, extra="forbid", strict=False)

    doc_id: str = Field(min_length=1, description="Stable identifier of the document.")
    title: str = Field(default="", description="Human-readable title.")
    sensitivity_tier: SensitivityTier
    permitted_receiver_roles: frozenset[str] = Field(
        description="The document's ACL: the roles that may receive it."
    )
    subject: str | None = Field(
        description="Identifier of the data subject, or null for organization-level documents."
    )
    subject_type: SubjectType
    document_type: str = Field(min_length=1)
    extra_sensitive: bool
    extra_sensitive_reason: str | None = None
    governing_principle: str = Field(min_length=1)
    originating_context: str = Field(min_length=1)
    pii_attributes: tuple[str, ...] = ()
    implied_attributes: tuple[str, ...] = ()
    assignment_required: bool

    # The validators raise ValueError: pydantic reports it as a ValidationError,
    # which loading turns into ValidationFailed (a PrivacyCIError).
    @field_validator("permitted_receiver_roles", mode="before")
    @classmethod
    def _acl_is_a_list(cls, value: object) -> object:
        if isinstance(value, str):
            raise ValueError(
                f"expected a list of role names, got the string {value!r}"
                " (write e.g. [Doctor, Nurse])"
            )
        if not isinstance(value, (list, tuple, set, frozenset)):
            raise ValueError(f"expected a list of role names, got {type(value).__name__}")
        seen: set[str] = set()
        for item in value:
            role = check_role_name(item)
            if role in seen:
                raise ValueError(f"role {role!r} is listed twice")
            seen.add(role)
        return frozenset(seen)

    @field_validator("subject")
    @classmethod
    def _subject_is_an_identifier(cls, value: str | None) -> str | None:
        if value is not None and (value == "" or any(ch.isspace() or ch in "*,;" for ch in value)):
            raise ValueError(
                f"subject {value!r} must be one identifier (no spaces, '*', ',' or ';') or null"
            )
        return value

    @model_validator(mode="after")
    def _fields_agree(self) -> Label:
        problems = self.consistency_problems()
        if problems:
            raise ValueError("; ".join(problems))
        return self

    @field_serializer("permitted_receiver_roles")
    def _acl_sorted(self, acl: frozenset[str]) -> list[str]:
        return sorted(acl)

    def consistency_problems(self) -> list[str]:
        """Problems between fields that the schema alone cannot catch."""
        problems: list[str] = []
        if (self.subject is None) != (self.subject_type is SubjectType.ORGANIZATION):
            problems.append(
                "subject and subject_type disagree: an organization-level document has"
                " subject null and subject_type organization"
            )
        if self.extra_sensitive and not self.extra_sensitive_reason:
            problems.append("extra_sensitive is true but extra_sensitive_reason is empty")
        return problems


class LabelSet:
    """The validated labels of a corpus, in file order, indexed by document id."""

    def __init__(self, labels: Iterable[Label], source: str = "<memory>") -> None:
        self.source = source
        self._labels: dict[str, Label] = {}
        for label in labels:
            if label.doc_id in self._labels:
                raise ValidationFailed([f"{source}: document {label.doc_id!r} is labelled twice"])
            self._labels[label.doc_id] = label

    def __len__(self) -> int:
        return len(self._labels)

    def __iter__(self) -> Any:
        return iter(self._labels.values())

    def __contains__(self, doc_id: object) -> bool:
        return doc_id in self._labels

    def __getitem__(self, doc_id: str) -> Label:
        return self._labels[doc_id]

    def get(self, doc_id: str) -> Label | None:
        return self._labels.get(doc_id)

    @property
    def ids(self) -> list[str]:
        return list(self._labels)


def format_validation_error(source: str, entry: str, exc: ValidationError) -> list[str]:
    """Turn a pydantic error into one line per problem: file, entry, field, expectation."""
    lines = []
    for err in exc.errors():
        field = ".".join(str(p) for p in err["loc"]) or "(entry)"
        msg = err["msg"]
        if err["type"] == "missing":
            msg = "field is missing"
        elif err["type"] == "extra_forbidden":
            msg = "unknown field (not part of the label schema)"
        elif err["type"] == "enum":
            expected = err.get("ctx", {}).get("expected", "")
            msg = f"got {err.get('input')!r}, expected one of {expected}"
        lines.append(f"{source}: {entry}: field {field}: {msg}")
    return lines


def read_structured(path: Path) -> Any:
    """Read a YAML or JSON file, with errors naming the file and position.

    A key given twice in one mapping is an error (naming the entry, key and lines), and
    so is a file that is not a regular file, one over `max_input_bytes`, a YAML alias,
    nesting deeper than 64 levels or an over-long integer (`InputLimitError`).
    """
    try:
        data = read_user_file(path, limit=max_input_bytes(), env=MAX_INPUT_BYTES_ENV)
        text = data.decode("utf-8")
    except PrivacyCIError as exc:
        raise ValidationFailed([str(exc)]) from None
    except UnicodeDecodeError as exc:
        raise ValidationFailed([f"{path}: not UTF-8 text ({exc.reason})"]) from None
    try:
        if path.suffix.lower() == ".json":
            return load_json(text)
        return load_yaml(text)
    except InputLimitError as exc:  # before the YAML and JSON errors it also is
        raise ValidationFailed([f"{path}: {exc}"]) from None
    except DuplicateKeyError as exc:
        # the last of two equal keys would silently win: a different label or policy
        raise ValidationFailed([f"{path}: {d}" for d in exc.duplicates]) from None
    except json.JSONDecodeError as exc:
        raise ValidationFailed([f"{path}: invalid JSON at line {exc.lineno}: {exc.msg}"]) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise ValidationFailed([f"{path}: invalid YAML{where}: {exc}"]) from None


def parse_labels(raw: object, source: str = "<memory>") -> LabelSet:
    """Validate raw label entries (a list, or a mapping with a `documents` list).

    Args:
        raw: the decoded file content.
        source: the file name used in messages.

    Returns:
        The validated `LabelSet`.

    Raises:
        ValidationFailed: listing every problem in every entry.
    """
    if isinstance(raw, Mapping) and "documents" in raw:
        raw = raw["documents"]
    if not isinstance(raw, list):
        raise ValidationFailed(
            [f"{source}: expected a list of labels (or a mapping with a 'documents' list)"]
        )
    problems: list[str] = []
    labels: list[Label] = []
    seen: set[str] = set()
    for i, entry in enumerate(raw):
        name = f"document #{i + 1}"
        if isinstance(entry, Mapping) and isinstance(entry.get("doc_id"), str):
            name = f"document {entry['doc_id']!r}"
        if not isinstance(entry, Mapping):
            problems.append(f"{source}: {name}: expected a mapping of label fields")
            continue
        try:
            label = Label.model_validate(entry)
        except ValidationError as exc:
            problems.extend(format_validation_error(source, name, exc))
            continue
        if label.doc_id in seen:
            problems.append(f"{source}: {name}: doc_id is used by an earlier document")
        seen.add(label.doc_id)
        labels.append(label)
    if problems:
        raise ValidationFailed(problems)
    return LabelSet(labels, source)


def load_labels(path: Path) -> LabelSet:
    """Read and validate a label file (YAML or JSON)."""
    return parse_labels(read_structured(path), str(path))


def dump_labels(labels: Sequence[Label]) -> list[dict[str, Any]]:
    """Labels as plain data in file order (for YAML/JSON output)."""
    return [label.model_dump(mode="json") for label in labels]
