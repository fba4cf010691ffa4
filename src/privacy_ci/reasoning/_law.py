"""The law engine: a regulation's rules over the facts of one disclosure, decided
exactly, with the deciding rule, the facts it used, and the questions that remain.

A law book (``law/<regulation>.yaml``) lists rules in groups, in precedence order
(`PRECEDENCE`): ``not_applicable``, ``prohibit`` (specific prohibitions and limits),
``require``, ``permit``, then a default rule (for HIPAA, 164.502(a): no use or
disclosure except as permitted). A rule applies when its ``when`` condition holds and
its ``unless`` condition does not. The first rule that applies, in precedence order,
decides; none: the default. That is the whole verdict rule, and it is a pure function
of the facts (`apply_law`).

Facts may be unknown. Conditions are then evaluated in three values (true, false,
unknown; Kleene's logic). When the first rule that could decide hinges on an unknown
fact, the engine branches on that fact's values (values that no rule tells apart
are one branch) and on the unknown facts of later hinges, within a budget:

* the verdict is **determined** when every completion of the unknown facts gives it;
* otherwise the engine names the **questions** whose answers decide it, in the order
  the rules need them, each with the verdict per answer ("permitted if a valid
  authorization covers this disclosure; prohibited otherwise"), and gives the
  verdict on the **presumptions** of the fact schema (an authorization nobody
  mentions is presumed absent): rules that still hinge on an unknown fact without a
  presumption are not applied. A verdict that rests on a presumption says so; an
  unknown fact never becomes a permission silently.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from importlib import resources
from pathlib import Path
from typing import Any

from privacy_ci.ci import Verdict
from privacy_ci.reasoning._facts import (
    FactError,
    Facts,
    FactSchema,
    FactSpec,
    FactValue,
    Source,
    load_fact_schema,
    presumed,
)

__all__ = [
    "PRECEDENCE",
    "Branch",
    "Condition",
    "Effect",
    "LawBook",
    "LawDecision",
    "NearMiss",
    "Question",
    "Rule",
    "apply_law",
    "load_law",
]

Tri = bool | None
"""A three-valued truth: True, False, or None (unknown)."""


class Effect(StrEnum):
    """What a rule does when it applies."""

    NOT_APPLICABLE = "not_applicable"
    PROHIBIT = "prohibit"
    REQUIRE = "require"
    PERMIT = "permit"

    @property
    def verdict(self) -> Verdict:
        if self is Effect.NOT_APPLICABLE:
            return Verdict.NOT_APPLICABLE
        if self is Effect.PROHIBIT:
            return Verdict.PROHIBIT
        return Verdict.PERMIT


PRECEDENCE: tuple[Effect, ...] = (
    Effect.NOT_APPLICABLE,
    Effect.PROHIBIT,
    Effect.REQUIRE,
    Effect.PERMIT,
)
"""The order the rule groups are tried in (then the default rule)."""

MAX_NODES = 3000
"""Branches explored per decision before the engine stops looking for completions."""


# ---------------------------------------------------------------------- conditions
@dataclass(frozen=True)
class Condition:
    """A condition over facts: a literal (``fact`` in ``values``) or a combination.

    Args:
        kind: ``fact``, ``all``, ``any`` or ``not``.
        fact / values: for a literal, the fact and the values that satisfy it.
        parts: for a combination, its conditions.
    """

    kind: str
    fact: str = ""
    values: frozenset[str] = frozenset()
    parts: tuple[Condition, ...] = ()

    def evaluate(self, known: Mapping[str, str]) -> Tri:
        """Kleene's three-valued value of the condition over the known facts."""
        if self.kind == "fact":
            value = known.get(self.fact)
            return None if value is None else value in self.values
        if self.kind == "not":
            inner = self.parts[0].evaluate(known)
            return None if inner is None else not inner
        results = [p.evaluate(known) for p in self.parts]
        if self.kind == "all":
            if any(r is False for r in results):
                return False
            return None if any(r is None for r in results) else True
        if any(r is True for r in results):
            return True
        return None if any(r is None for r in results) else False

    def literals(self) -> Iterator[Condition]:
        if self.kind == "fact":
            yield self
        for part in self.parts:
            yield from part.literals()

    def facts(self) -> tuple[str, ...]:
        """The facts it reads, in order of first mention."""
        return tuple(dict.fromkeys(lit.fact for lit in self.literals()))

    def describe(self, schema: FactSchema) -> str:
        if self.kind == "fact":
            spec = schema.spec(self.fact)
            labels = " or ".join(
                spec.label(v) for v in sorted(self.values, key=list(spec.values).index)
            )
            return f"{self.fact}: {labels}"
        if self.kind == "not":
            return f"not ({self.parts[0].describe(schema)})"
        joiner = " and " if self.kind == "all" else " or "
        return "(" + joiner.join(p.describe(schema) for p in self.parts) + ")"


def _condition(raw: Any, schema: FactSchema, where: str) -> Condition:
    if not isinstance(raw, Mapping) or not raw:
        raise FactError(f"{where}: a condition is a non-empty mapping")
    keys = set(raw)
    if (keys <= {"all", "any"} and len(keys) == 1) or keys == {"not"}:
        (kind,) = keys
        inner = raw[kind]
        if kind == "not":
            return Condition("not", parts=(_condition(inner, schema, where),))
        if not isinstance(inner, list) or not inner:
            raise FactError(f"{where}: {kind!r} takes a non-empty list of conditions")
        return Condition(kind, parts=tuple(_condition(c, schema, where) for c in inner))
    literals = []
    for fact, wanted in raw.items():
        values = wanted if isinstance(wanted, list) else [wanted]
        names = []
        for v in values:
            v = "yes" if v is True else "no" if v is False else v
            if not isinstance(v, str):
                raise FactError(f"{where}: fact {fact!r}: value {v!r} is not a value name")
            schema.check(str(fact), v, f"{where}: ")
            names.append(v)
        literals.append(Condition("fact", str(fact), frozenset(names)))
    return literals[0] if len(literals) == 1 else Condition("all", parts=tuple(literals))


# --------------------------------------------------------------------------- rules
@dataclass(frozen=True)
class Rule:
    """One rule of the law book.

    Args:
        id: its identifier (the paragraph and a short name).
        paragraph: the regulation paragraph it states.
        title: what it says, in a line.
        effect: what it does when it applies.
        when: the facts it needs.
        unless: the facts that lift it (None: nothing does).
        order: its place in the precedence order (0 first).
    """

    id: str
    paragraph: str
    title: str
    effect: Effect
    when: Condition
    unless: Condition | None = None
    order: int = 0

    def status(self, known: Mapping[str, str]) -> Tri:
        """Whether it applies: ``when`` and not ``unless`` (three-valued)."""
        when = self.when.evaluate(known)
        if when is False:
            return False
        lifted = False if self.unless is None else self.unless.evaluate(known)
        if lifted is True:
            return False
        if when is True and lifted is False:
            return True
        return None

    def facts(self) -> tuple[str, ...]:
        both = self.when.facts() + (self.unless.facts() if self.unless else ())
        return tuple(dict.fromkeys(both))

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "paragraph": self.paragraph,
            "title": self.title,
            "effect": self.effect.value,
        }


@dataclass(frozen=True)
class LawBook:
    """A regulation's rules in precedence order, over its fact schema."""

    regulation: str
    version: int
    schema: FactSchema
    rules: tuple[Rule, ...]
    default: Rule

    @property
    def version_id(self) -> str:
        return f"{self.regulation}-law-v{self.version}"

    def rule(self, rule_id: str) -> Rule:
        for r in (*self.rules, self.default):
            if r.id == rule_id:
                return r
        raise FactError(f"no rule {rule_id!r} in the {self.regulation} law book")

    @functools.cached_property
    def classes(self) -> dict[str, tuple[tuple[str, ...], ...]]:
        """Per fact, its values grouped so that no rule tells two of a group apart."""
        literals = [
            lit for r in self.rules for c in (r.when, r.unless) if c for lit in c.literals()
        ]
        out: dict[str, tuple[tuple[str, ...], ...]] = {}
        for spec in self.schema:
            mine = [lit for lit in literals if lit.fact == spec.name]
            groups: dict[tuple[bool, ...], list[str]] = {}
            for value in spec.values:
                groups.setdefault(tuple(value in lit.values for lit in mine), []).append(value)
            out[spec.name] = tuple(tuple(g) for g in groups.values())
        return out


def _parse_book(data: Any, schema: FactSchema, where: str) -> LawBook:
    if not isinstance(data, Mapping):
        raise FactError(f"{where}: expected regulation, version, groups and default")
    groups, default = data.get("groups"), data.get("default")
    if not isinstance(groups, Mapping) or not isinstance(default, Mapping):
        raise FactError(f"{where}: needs 'groups' (by effect) and a 'default' rule")
    unknown = sorted(set(map(str, groups)) - {e.value for e in Effect})
    if unknown:
        raise FactError(
            f"{where}: unknown rule group(s) {unknown}; expected {[e.value for e in PRECEDENCE]}"
        )
    rules: list[Rule] = []
    seen: set[str] = set()
    for effect in PRECEDENCE:
        for raw in groups.get(effect.value) or []:
            rid = raw.get("id") if isinstance(raw, Mapping) else None
            if not isinstance(rid, str) or rid in seen:
                raise FactError(
                    f"{where}: group {effect.value}: a rule without an id, or an id used"
                    f" twice ({rid!r})"
                )
            seen.add(rid)
            at = f"{where}: rule {rid}"
            paragraph, title = raw.get("paragraph"), raw.get("title")
            if not isinstance(paragraph, str) or not isinstance(title, str):
                raise FactError(f"{at}: needs a paragraph and a title")
            when = _condition(raw.get("when"), schema, at)
            unless = _condition(raw["unless"], schema, at) if raw.get("unless") else None
            rules.append(Rule(rid, paragraph, title, effect, when, unless, len(rules)))
    try:
        fallback = Rule(
            str(default["id"]),
            str(default["paragraph"]),
            str(default["title"]),
            Effect(default.get("effect", "prohibit")),
            Condition("all", parts=()),
            None,
            len(rules),
        )
    except (KeyError, ValueError) as exc:
        raise FactError(
            f"{where}: the default rule needs id, paragraph, title, effect ({exc})"
        ) from None
    return LawBook(
        str(data.get("regulation")), int(data.get("version", 1)), schema, tuple(rules), fallback
    )


@functools.cache
def load_law(regulation: str = "hipaa") -> LawBook:
    """The packaged law book of a regulation (validated against its fact schema).

    Raises:
        FactError: the regulation has no law book, or the book names an unknown fact
            or value (naming the rule).
    """
    schema = load_fact_schema(regulation)
    path = Path(str(resources.files("privacy_ci.reasoning") / "law" / f"{regulation}.yaml"))
    if not path.is_file():
        raise FactError(f"no law book for regulation {regulation!r}")
    from privacy_ci._structured import load_yaml

    book = _parse_book(
        load_yaml(path.read_text(encoding="utf-8")), schema, f"law/{regulation}.yaml"
    )
    if book.regulation != regulation:
        raise FactError(f"law/{regulation}.yaml: says regulation {book.regulation!r}")
    return book


# ------------------------------------------------------------------------ deciding
@dataclass(frozen=True)
class Branch:
    """One answer to a question, and what follows from it.

    Args:
        values: the fact's values that lead here (told apart by no rule).
        verdicts: the verdicts still possible after this answer (one: decided).
        rule: the deciding rule, when this answer decides.
    """

    values: tuple[str, ...]
    verdicts: tuple[Verdict, ...]
    rule: Rule | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "values": list(self.values),
            "verdicts": [v.value for v in self.verdicts],
            "rule": None if self.rule is None else self.rule.id,
        }


@dataclass(frozen=True)
class Question:
    """A fact whose answer the verdict hinges on, with the verdict per answer."""

    fact: str
    question: str
    branches: tuple[Branch, ...]
    text: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "fact": self.fact,
            "question": self.question,
            "text": self.text,
            "branches": [b.as_dict() for b in self.branches],
        }


@dataclass(frozen=True)
class NearMiss:
    """A permission that would apply but for the facts that fail it."""

    rule: Rule
    failing: tuple[tuple[str, str | None, tuple[str, ...]], ...]  # fact, its value, values needed

    def as_dict(self) -> dict[str, Any]:
        return {
            "rule": self.rule.id,
            "paragraph": self.rule.paragraph,
            "title": self.rule.title,
            "failing": [
                {"fact": f, "value": v, "needs": list(needs)} for f, v, needs in self.failing
            ],
        }


@dataclass(frozen=True)
class LawDecision:
    """The law's answer for one set of facts.

    Args:
        verdict: the verdict (on the facts alone when `determined`, else on the
            presumptions).
        determined: whether every completion of the unknown facts gives `verdict`.
        rule: the rule that decided (on the presumptions when not determined).
        used: the facts the deciding rule read, with their provenance (presumed ones
            marked so).
        presumed: the presumptions the verdict rests on.
        questions: the unknown facts the verdict hinges on, in the order the rules
            need them, each with the verdict per answer.
        near_misses: for a verdict by the default rule, the permissions that nearly
            apply and the facts that fail them.
        exhausted: the branch budget ran out before every completion was seen.
    """

    verdict: Verdict
    determined: bool
    rule: Rule
    used: dict[str, FactValue]
    presumed: dict[str, FactValue]
    questions: tuple[Question, ...] = ()
    near_misses: tuple[NearMiss, ...] = ()
    exhausted: bool = False
    facts: Facts | None = field(default=None, repr=False)

    @property
    def effect(self) -> Effect:
        return self.rule.effect

    @property
    def required(self) -> bool:
        return self.rule.effect is Effect.REQUIRE

    def as_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict.value,
            "determined": self.determined,
            "rule": self.rule.as_dict(),
            "used": {k: v.as_dict() for k, v in self.used.items()},
            "presumed": {k: v.value for k, v in self.presumed.items()},
            "questions": [q.as_dict() for q in self.questions],
            "near_misses": [n.as_dict() for n in self.near_misses],
            "exhausted": self.exhausted,
        }

    def explanation(self) -> str:
        """A few lines for people: verdict, the rule, the facts, what would change it."""
        how = "" if self.determined else " (on presumptions)"
        lines = [f"verdict: {self.verdict.value}{how}: {self.rule.paragraph} {self.rule.title}"]
        for name, fact in self.used.items():
            where = {
                Source.GIVEN: "given",
                Source.READ: f'read: "{fact.quote}"' if fact.quote else "read",
                Source.ANSWERED: f'answered: "{fact.quote}"' if fact.quote else "answered",
                Source.PRESUMED: "presumed: not stated",
            }[fact.source]
            lines.append(f"  {name} = {fact.value} ({where})")
        for q in self.questions:
            lines.append(f"  open: {q.question} {q.text}")
        for miss in self.near_misses[:3]:
            fails = "; ".join(
                f"{f} is {v or 'unknown'}, needs {' or '.join(n)}" for f, v, n in miss.failing
            )
            lines.append(f"  not permitted by {miss.rule.paragraph} ({miss.rule.title}): {fails}")
        return "\n".join(lines)


class _Explorer:
    """Every verdict the unknown facts still allow, as a tree of branches."""

    def __init__(self, book: LawBook) -> None:
        self.book = book
        self.nodes = 0
        self.exhausted = False
        self.order = {spec.name: i for i, spec in enumerate(book.schema)}

    def first(self, known: Mapping[str, str]) -> tuple[Rule | None, Rule | None]:
        """The first rule that applies, or the first that hinges on an unknown fact."""
        for rule in self.book.rules:
            status = rule.status(known)
            if status is True:
                return rule, None
            if status is None:
                return None, rule
        return self.book.default, None

    def explore(self, known: dict[str, str]) -> _Node:
        self.nodes += 1
        rule, hinge = self.first(known)
        if rule is not None:
            return _Node(verdicts=(rule.effect.verdict,), rule=rule)
        assert hinge is not None
        fact = min((f for f in hinge.facts() if f not in known), key=self.order.__getitem__)
        if self.nodes > MAX_NODES:
            self.exhausted = True
            return _Node(verdicts=tuple(Verdict), fact=fact)
        children = []
        for group in self.book.classes[fact]:
            child = self.explore({**known, fact: group[0]})
            children.append((group, child))
        verdicts = tuple(v for v in Verdict if any(v in c.verdicts for _, c in children))
        return _Node(verdicts=verdicts, fact=fact, children=tuple(children))


@dataclass(frozen=True)
class _Node:
    verdicts: tuple[Verdict, ...]
    rule: Rule | None = None
    fact: str | None = None
    children: tuple[tuple[tuple[str, ...], _Node], ...] = ()


def _questions(
    book: LawBook,
    known: Mapping[str, str],
    presumptions: Mapping[str, str],
    deciding: Rule,
    first: Sequence[str] = (),
    limit: int = 4,
) -> tuple[Question, ...]:
    """The unknown facts whose answer changes the verdict on the presumptions, each
    with the verdict per answer (the others left at their presumptions): first those
    the deciding rule reads and those a nearly applicable permission fails on
    (`first`), then by the first rule, in precedence order, that reads them."""
    base = {**known, **presumptions}
    mine = set(deciding.facts()) | set(first)
    first_read: dict[str, int] = {}
    for rule in book.rules:
        for name in rule.facts():
            first_read.setdefault(name, rule.order)
    found: list[tuple[int, Question]] = []
    for spec in book.schema:
        if spec.name in known or spec.name not in first_read:
            continue
        by_verdict: dict[Verdict, list[str]] = {}
        rules: dict[Verdict, Rule] = {}
        for group in book.classes[spec.name]:
            rule = _first_on_presumptions(book, {**base, spec.name: group[0]})
            by_verdict.setdefault(rule.effect.verdict, []).extend(group)
            rules.setdefault(rule.effect.verdict, rule)
        if len(by_verdict) < 2:
            continue
        branches = tuple(
            Branch(tuple(values), (verdict,), rules[verdict])
            for verdict, values in by_verdict.items()
        )
        rank = first_read[spec.name] + (0 if spec.name in mine else len(book.rules))
        found.append((rank, _question(spec, branches, base.get(spec.name))))
    found.sort(key=lambda item: item[0])
    return tuple(q for _, q in found[:limit])


def _question(spec: FactSpec, branches: tuple[Branch, ...], presumed: str | None) -> Question:
    parts = []
    # the presumed answer's side last, as "otherwise": "permitted if a valid
    # authorization covers it; prohibited otherwise"; else the shorter side first
    ordered = sorted(branches, key=lambda b: (presumed in b.values, len(b.values)))
    for i, b in enumerate(ordered):
        what = _verdict_word(b.verdicts[0])
        if i == len(ordered) - 1 and len(ordered) > 1:
            parts.append(f"{what} otherwise")
            continue
        labels = " or ".join(spec.label(v) for v in b.values)
        parts.append(f"{what} if {labels}")
    return Question(spec.name, spec.question, tuple(ordered), "; ".join(parts))


def _verdict_word(verdict: Verdict) -> str:
    return {
        Verdict.PERMIT: "permitted",
        Verdict.PROHIBIT: "prohibited",
        Verdict.NOT_APPLICABLE: "not applicable",
    }[verdict]


def _first_on_presumptions(book: LawBook, known: Mapping[str, str]) -> Rule:
    """The first rule that applies on the facts and presumptions; a rule that still
    hinges on an unknown fact is not applied."""
    for rule in book.rules:
        if rule.status(known) is True:
            return rule
    return book.default


def _near_misses(
    book: LawBook, values: Mapping[str, str], stated: Mapping[str, str]
) -> tuple[NearMiss, ...]:
    """Permissions whose facts about the flow itself (the facts without a presumption:
    holder, information, recipient, purpose) all hold and that fail on one condition
    only (an authorization, a legal process, the individual's response ...): what
    would have to be true, and the question that would settle it. A permission with
    one condition and no flow fact is listed when that condition was stated.
    """
    core = {spec.name for spec in book.schema if spec.presume is None}
    out = []
    for rule in book.rules:
        if rule.effect not in (Effect.PERMIT, Effect.REQUIRE):
            continue
        parts = rule.when.parts if rule.when.kind == "all" else (rule.when,)
        if not all(p.kind == "fact" for p in parts):
            continue
        failed = [p for p in parts if p.evaluate(values) is not True]
        held = [p for p in parts if p.evaluate(values) is True]
        if len(failed) != 1 or failed[0].fact in core or any(p.fact not in core for p in held):
            continue
        (bad,) = failed
        if not held and bad.fact not in stated:
            continue
        needs = tuple(v for v in book.schema.spec(bad.fact).values if v in bad.values)
        out.append(NearMiss(rule, ((bad.fact, values.get(bad.fact), needs),)))
    return tuple(out)


def apply_law(book: LawBook, facts: Facts) -> LawDecision:
    """Decide one disclosure (see the module docstring).

    Args:
        book: the regulation's law book.
        facts: the known facts (unknown ones absent).

    Returns:
        The `LawDecision`.
    """
    known = facts.plain()
    explorer = _Explorer(book)
    root = explorer.explore(dict(known))
    presumptions = presumed(book.schema, facts)
    on_presumptions = {**known, **{k: v.value for k, v in presumptions.items()}}
    rule = _first_on_presumptions(book, on_presumptions)
    determined = len(root.verdicts) == 1 and not explorer.exhausted
    leaning: dict[str, FactValue] = {}
    if determined:
        verdict = root.verdicts[0]
        if root.rule is not None:
            rule = root.rule
        elif rule.effect.verdict is not verdict:  # several rules give it: name one
            rule = _leaf_rule(root, verdict)
    else:
        verdict = rule.effect.verdict
        read = _read_by(book, rule, on_presumptions)
        leaning = {k: v for k, v in presumptions.items() if k in read}
    values = {**known, **{k: v.value for k, v in leaning.items()}}
    used: dict[str, FactValue] = {}
    for name in _read_by(book, rule, values):
        if name in facts:
            used[name] = facts[name]
        elif name in leaning:
            used[name] = leaning[name]
    misses = _near_misses(book, on_presumptions, known) if rule is book.default else ()
    questions: tuple[Question, ...] = ()
    if not determined:
        first = [f for miss in misses for f, _, _ in miss.failing]
        questions = _questions(
            book, known, {k: v.value for k, v in presumptions.items()}, rule, first
        ) or _hinges(book, root)
        # the presumptions the verdict rests on: those its rule reads, and those whose
        # answer would change it (a restriction presumed absent keeps a prohibition away)
        for q in questions:
            if q.fact in presumptions:
                leaning.setdefault(q.fact, presumptions[q.fact])
                used.setdefault(q.fact, presumptions[q.fact])
    return LawDecision(
        verdict, determined, rule, used, leaning, questions, misses, explorer.exhausted, facts
    )


def _hinges(book: LawBook, root: _Node, limit: int = 4) -> tuple[Question, ...]:
    """When no single answer changes the verdict (it takes two together), the unknown
    facts the law's first undecided rules hinge on, breadth first, each with the
    verdicts its answers leave possible."""
    out: list[Question] = []
    queue, seen = [root], set()
    while queue and len(out) < limit:
        node = queue.pop(0)
        if node.fact is None or len(node.verdicts) < 2:
            continue
        if node.fact not in seen:
            seen.add(node.fact)
            spec = book.schema.spec(node.fact)
            merged: dict[tuple[Verdict, ...], list[str]] = {}
            for values, child in node.children:
                merged.setdefault(child.verdicts, []).extend(values)
            branches = tuple(Branch(tuple(v), k) for k, v in merged.items())
            parts = []
            for b in branches:
                what = " or ".join(_verdict_word(v) for v in b.verdicts)
                labels = " or ".join(spec.label(v) for v in b.values[:4])
                more = " ..." if len(b.values) > 4 else ""
                parts.append(f"{what} if {labels}{more}")
            out.append(Question(node.fact, spec.question, branches, "; ".join(parts)))
        queue.extend(child for _, child in node.children)
    return tuple(out)


def _leaf_rule(node: _Node, verdict: Verdict) -> Rule:
    if node.rule is not None:
        return node.rule
    for _, child in node.children:
        if verdict in child.verdicts:
            return _leaf_rule(child, verdict)
    raise AssertionError("a verdict the tree allows has a leaf")  # pragma: no cover


def _read_by(book: LawBook, rule: Rule, known: Mapping[str, str]) -> tuple[str, ...]:
    """The facts a decision by `rule` rests on: the rule's own, and those that kept
    every rule before it from applying (the applicability facts, the prohibitions'
    triggers) where they are known."""
    out: dict[str, None] = dict.fromkeys(rule.facts())
    for earlier in book.rules:
        if earlier.order >= rule.order or earlier.effect is not Effect.NOT_APPLICABLE:
            break
        # applicability: the facts that kept a not-applicable rule from applying
        for lit in earlier.when.literals():
            if lit.fact in known and lit.evaluate(known) is False:
                out.setdefault(lit.fact)
    return tuple(f for f in out if f in known)


def decide_facts(facts: Facts, regulation: str | None = None) -> LawDecision:
    """`apply_law` with the packaged law book of the facts' regulation."""
    return apply_law(load_law(regulation or facts.schema.regulation), facts)


def facts_from(data: Mapping[str, Any] | Sequence[str], regulation: str = "hipaa") -> Facts:
    """Facts from a mapping (as a facts file) or ``key=value`` strings (for tests and the
    Python API)."""
    from privacy_ci.reasoning._facts import parse_fact_args

    schema = load_fact_schema(regulation)
    if isinstance(data, Mapping):
        return Facts.from_mapping(schema, data)
    return parse_fact_args(data, schema)
