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
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
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
"""Nodes of the search expanded per decision before the engine stops looking for
completions (the decision then says it was `LawDecision.exhausted`). No decision on
the development pairs' facts, nor on tens of thousands of random partial fact sets,
comes near it: the most seen is about 1300, most take under ten."""


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
    def _engine(self) -> _Engine:
        """The book compiled for the search."""
        return _Engine(self)

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


# ------------------------------------------------------------------------- search
# The search is the first-applicable-rule rule over the completions of the unknown
# facts, made cheap: conditions compiled once per book; rule statuses carried down as
# bit masks (a branch rechecks only the rules that read the fact it sets); a state
# (the rules still in play and the values of the facts they read) met again is the
# same node; and a node is expanded only as far as the question asked needs: whether
# a verdict other than the first branch's is possible at all (`_Explorer.reach` stops
# at the first found, and skips a branch whose rules in play give none of the verdicts
# sought). The branching fact and the order of the branches are the plain recursion's
# (the first unknown fact, in schema order, of the first rule in play; the value
# classes in order), so the first leaf and the breadth-first questions of `_hinges`
# are the same.

_Eval = Callable[[Mapping[str, str]], Tri]


def _compile(cond: Condition) -> _Eval:
    """`Condition.evaluate` as a closure (no dispatch on the kind at each call)."""
    if cond.kind == "fact":
        name, values = cond.fact, cond.values

        def literal(known: Mapping[str, str]) -> Tri:
            value = known.get(name)
            return None if value is None else value in values

        return literal
    parts = tuple(_compile(p) for p in cond.parts)
    if cond.kind == "not":
        inner = parts[0]

        def negation(known: Mapping[str, str]) -> Tri:
            result = inner(known)
            return None if result is None else not result

        return negation
    # Kleene: one False decides "all", one True decides "any"; else unknown if any is
    decisive = cond.kind != "all"

    def combination(known: Mapping[str, str]) -> Tri:
        unknown = False
        for part in parts:
            result = part(known)
            if result is None:
                unknown = True
            elif result is decisive:
                return decisive
        return None if unknown else not decisive

    return combination


def _compile_rule(rule: Rule) -> _Eval:
    """`Rule.status` as a closure."""
    when = _compile(rule.when)
    unless = _compile(rule.unless) if rule.unless is not None else None

    def status(known: Mapping[str, str]) -> Tri:
        applies = when(known)
        if applies is False:
            return False
        lifted = False if unless is None else unless(known)
        if lifted is True:
            return False
        if applies is True and lifted is False:
            return True
        return None

    return status


_VERDICTS = frozenset(Verdict)


class _State:
    """A node of the search: the facts so far, the rule that decides (a leaf) or the
    fact it branches on, and what is known so far of the verdicts below it."""

    __slots__ = (
        "cut",
        "excluded",
        "fact",
        "false",
        "found",
        "kids",
        "known",
        "live",
        "names",
        "rule",
        "true",
    )

    def __init__(
        self,
        known: dict[str, str],
        masks: tuple[int, int, int],
        rule: Rule | None,
        fact: str | None,
        profile: tuple[tuple[str, ...], frozenset[Verdict]],
    ) -> None:
        self.known = known
        self.live, self.false, self.true = masks  # rules in play, not applying, applying
        self.rule = rule
        self.fact = fact
        self.names, possible = profile  # the facts the rules in play read, their verdicts
        # every state has a verdict below it: one possible verdict is found
        self.found: set[Verdict] = set(possible) if len(possible) == 1 else set()
        self.excluded: set[Verdict] = set(_VERDICTS - possible)  # no completion gives these
        self.kids: list[_State] | None = None  # the branches made so far (None: not expanded)
        self.cut = False  # the search ran out here: no branches, every verdict possible


class _Engine:
    """A law book compiled for the search (built once per book)."""

    def __init__(self, book: LawBook) -> None:
        order = {spec.name: i for i, spec in enumerate(book.schema)}
        self.book = book
        self.rules = book.rules
        self.status = tuple(_compile_rule(r) for r in book.rules)
        self.all = (1 << len(book.rules)) - 1
        # per rule, its facts in the schema's order (a hinge branches on the first unknown)
        self.facts = tuple(tuple(sorted(r.facts(), key=order.__getitem__)) for r in book.rules)
        readers: dict[str, list[int]] = {}
        for i, names in enumerate(self.facts):
            for name in names:
                readers.setdefault(name, []).append(i)
        self.readers = {k: tuple(v) for k, v in readers.items()}
        self.first_read = {name: at[0] for name, at in self.readers.items()}
        self.leaves = tuple(self._leaf(r) for r in book.rules)
        self.default_leaf = self._leaf(book.default)
        self._profiles: dict[tuple[int, bool], tuple[tuple[str, ...], frozenset[Verdict]]] = {}

    @staticmethod
    def _leaf(rule: Rule) -> _State:
        return _State({}, (0, 0, 0), rule, None, ((), frozenset({rule.effect.verdict})))

    def masks(self, known: Mapping[str, str]) -> tuple[int, int]:
        """The rules that do not apply and those that do, as bit masks."""
        false = true = 0
        for i, status in enumerate(self.status):
            result = status(known)
            if result is False:
                false |= 1 << i
            elif result is True:
                true |= 1 << i
        return false, true

    def profile(self, live: int, ends_true: bool) -> tuple[tuple[str, ...], frozenset[Verdict]]:
        """For the rules in play: the facts they read, and the verdicts they can give."""
        found = self._profiles.get((live, ends_true))
        if found is None:
            names: dict[str, None] = {}
            verdicts = set()
            for i, rule in enumerate(self.rules):
                if live >> i & 1:
                    names.update(dict.fromkeys(self.facts[i]))
                    verdicts.add(rule.effect.verdict)
            if not ends_true:
                verdicts.add(self.book.default.effect.verdict)
            found = self._profiles[(live, ends_true)] = (tuple(names), frozenset(verdicts))
        return found

    def first_true(self, known: Mapping[str, str]) -> Rule:
        """The first rule that applies (one that hinges on an unknown fact does not)."""
        for rule, status in zip(self.rules, self.status, strict=True):
            if status(known) is True:
                return rule
        return self.book.default


class _Explorer:
    """The verdicts the unknown facts still allow, over a tree of branches built as
    far as needed (see the comment above `_compile`)."""

    def __init__(self, book: LawBook, limit: int | None = None) -> None:
        self.engine = book._engine
        self.classes = book.classes
        self.limit = MAX_NODES if limit is None else limit
        self.nodes = 0  # states expanded
        self.exhausted = False
        self.memo: dict[tuple[int, tuple[str | None, ...]], _State] = {}
        # per rule, its status per values of the facts it reads (met again and again)
        self.seen: list[dict[tuple[str | None, ...], Tri]] = [{} for _ in book.rules]

    def root(self, known: Mapping[str, str]) -> _State:
        false, true = self.engine.masks(known)
        return self._state(dict(known), false, true)

    def _state(self, known: dict[str, str], false: int, true: int) -> _State:
        engine = self.engine
        live = engine.all & ~false
        if not live:
            return engine.default_leaf
        low = live & -live
        at = low.bit_length() - 1
        if true & low:
            return engine.leaves[at]
        # the first rule that applies ends the rules in play (it goes on applying below)
        applies = true & live
        if applies:
            live &= ((applies & -applies) << 1) - 1
        profile = engine.profile(live, bool(applies))
        key = (live, tuple(map(known.get, profile[0])))
        state = self.memo.get(key)
        if state is None:
            fact = next(n for n in engine.facts[at] if n not in known)
            state = self.memo[key] = _State(known, (live, false, true), None, fact, profile)
        return state

    def _child(self, state: _State, value: str) -> _State:
        assert state.fact is not None
        engine = self.engine
        known = {**state.known, state.fact: value}
        live, false, true = state.live, state.false, state.true
        for i in engine.readers[state.fact]:
            bit = 1 << i
            if live & bit and not true & bit:  # a rule that applies goes on applying
                values = tuple(map(known.get, engine.facts[i]))
                seen = self.seen[i]
                if values in seen:
                    result = seen[values]
                else:
                    result = seen[values] = engine.status[i](known)
                if result is False:
                    false |= bit
                elif result is True:
                    true |= bit
        return self._state(known, false, true)

    def branches(self, state: _State) -> Iterator[_State]:
        """The branches of a state, one per class of values of its fact, in order (each
        made when first needed)."""
        assert state.fact is not None
        if state.kids is None:
            state.kids = []
            self.nodes += 1
            if self.nodes > self.limit:  # as if every verdict were possible
                self.exhausted = state.cut = True
                state.found, state.excluded = set(_VERDICTS), set()
        if state.cut:
            return
        kids = state.kids
        for k, group in enumerate(self.classes[state.fact]):
            if k == len(kids):
                kids.append(self._child(state, group[0]))
            yield kids[k]

    def children(self, state: _State) -> tuple[tuple[tuple[str, ...], _State], ...]:
        """Every branch of a state, with the values that lead to it."""
        assert state.fact is not None
        return tuple(zip(self.classes[state.fact], self.branches(state), strict=False))

    def reach(self, state: _State, wanted: set[Verdict], one: bool = False) -> set[Verdict]:
        """The verdicts of `wanted` that some completion below `state` gives (with
        `one`: stop at the first found)."""
        todo = wanted - state.found - state.excluded
        if todo and not (one and state.found & wanted):
            for child in self.branches(state):
                got = self.reach(child, todo, one)
                state.found |= got
                todo -= got
                if not todo or (one and got):
                    break
            else:  # every branch searched: none gives the rest
                state.excluded |= todo - state.found
        return state.found & wanted

    def several(self, state: _State) -> bool:
        """Whether the completions below `state` give more than one verdict."""
        if len(state.found) > 1:
            return True
        if len(state.excluded) >= len(_VERDICTS) - 1:
            return False
        one = next(iter(state.found)) if state.found else self.first_leaf(state).effect.verdict
        return bool(self.reach(state, set(_VERDICTS - {one}), one=True))

    def verdicts(self, state: _State) -> tuple[Verdict, ...]:
        """Every verdict some completion below `state` gives."""
        found = self.reach(state, set(_VERDICTS))
        return tuple(v for v in Verdict if v in found)

    def first_leaf(self, state: _State) -> Rule:
        """The rule at the end of the first branch (the first value class at each)."""
        while state.rule is None:
            assert state.fact is not None
            state = self._child(state, self.classes[state.fact][0][0])
        return state.rule


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
    engine = book._engine
    base = {**known, **presumptions}
    mine = set(deciding.facts()) | set(first)
    first_read = engine.first_read
    # the rules that apply on the facts and presumptions: another value of one fact
    # changes only the rules that read it
    applying = [i for i, status in enumerate(engine.status) if status(base) is True]
    found: list[tuple[int, Question]] = []
    for spec in book.schema:
        if spec.name in known or spec.name not in first_read:
            continue
        readers = engine.readers[spec.name]
        # the first rule that applies whatever this fact is
        bound = next((i for i in applying if i not in readers), len(book.rules))
        by_verdict: dict[Verdict, list[str]] = {}
        rules: dict[Verdict, Rule] = {}
        for group in book.classes[spec.name]:
            trial = {**base, spec.name: group[0]}
            at = next((i for i in readers if i < bound and engine.status[i](trial) is True), bound)
            rule = book.rules[at] if at < len(book.rules) else book.default
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
    return book._engine.first_true(known)


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
    root = explorer.root(known)
    presumptions = presumed(book.schema, facts)
    on_presumptions = {**known, **{k: v.value for k, v in presumptions.items()}}
    rule = _first_on_presumptions(book, on_presumptions)
    # determined: no completion gives a verdict other than the first branch's
    first_leaf = explorer.first_leaf(root)
    verdict = first_leaf.effect.verdict
    others = explorer.reach(root, set(_VERDICTS - {verdict}), one=True)
    determined = not others and not explorer.exhausted
    leaning: dict[str, FactValue] = {}
    if determined:
        if root.rule is not None:
            rule = root.rule
        elif rule.effect.verdict is not verdict:  # several rules give it: name one
            rule = first_leaf  # the first leaf (every leaf gives the verdict)
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
        ) or _hinges(book, explorer, root)
        # the presumptions the verdict rests on: those its rule reads, and those whose
        # answer would change it (a restriction presumed absent keeps a prohibition away)
        for q in questions:
            if q.fact in presumptions:
                leaning.setdefault(q.fact, presumptions[q.fact])
                used.setdefault(q.fact, presumptions[q.fact])
    return LawDecision(
        verdict, determined, rule, used, leaning, questions, misses, explorer.exhausted, facts
    )


def _hinges(
    book: LawBook, explorer: _Explorer, root: _State, limit: int = 4
) -> tuple[Question, ...]:
    """When no single answer changes the verdict (it takes two together), the unknown
    facts the law's first undecided rules hinge on, breadth first, each with the
    verdicts its answers leave possible."""
    out: list[Question] = []
    idle: list[Question] = []  # facts on the way whose every answer leaves the same open
    queue, seen = deque([root]), set[str]()
    # the tree shares a node where states repeat: a node met again adds nothing that
    # its first visit (no later in breadth-first order) did not
    visited: set[int] = set()

    def new(node: _State) -> bool:  # whether a question below it may be one not yet seen
        return any(n not in seen and n not in node.known for n in node.names)

    while queue and len(seen) < limit:  # (facts considered, asked or not)
        node = queue.popleft()
        if node.fact is None or id(node) in visited or not new(node):
            continue
        if not explorer.several(node):
            continue
        visited.add(id(node))
        children = explorer.children(node)
        branches: tuple[Branch, ...] = ()
        if node.fact not in seen:
            seen.add(node.fact)
            spec = book.schema.spec(node.fact)
            merged: dict[tuple[Verdict, ...], list[str]] = {}
            for values, child in children:
                merged.setdefault(explorer.verdicts(child), []).extend(values)
            branches = tuple(Branch(tuple(v), k) for k, v in merged.items())
        # a fact every answer of which leaves the same verdicts open asks nothing here
        if branches:
            parts = []
            for b in branches:
                what = " or ".join(_verdict_word(v) for v in b.verdicts)
                labels = " or ".join(spec.label(v) for v in b.values[:4])
                more = " ..." if len(b.values) > 4 else ""
                parts.append(f"{what} if {labels}{more}")
            found = Question(node.fact, spec.question, branches, "; ".join(parts))
            (out if len(branches) > 1 else idle).append(found)
        if new(node):
            queue.extend(child for _, child in children)
    return tuple(out or idle)  # (none informative alone: the facts it hinges on)


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
