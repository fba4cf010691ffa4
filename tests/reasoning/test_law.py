"""The law engine (`privacy_ci.reasoning._law`) proved against the law book itself.

Every rule of ``law/hipaa.yaml`` is tested for both outcomes, from cases generated
out of the YAML (a rule added later is covered without touching this file): a small
solver finds a complete fact set on which the rule decides, and for each literal of
its ``when`` and each alternative of its ``unless``, a fact set one fact away on
which it does not. The solver and the verdict rule it checks against are written
here from the YAML and the documented semantics (first rule in precedence order whose
``when`` holds and ``unless`` does not, else the default), independently of the
engine's own code. Then: the precedence cases by name, unknown facts (determined,
questions, presumptions) against exhaustive completions, and the facts' validation.
"""

from __future__ import annotations

import itertools
import json
import math
import random
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from privacy_ci.ci import Verdict
from privacy_ci.errors import PrivacyCIError
from privacy_ci.reasoning._facts import (
    FactError,
    FactValue,
    Source,
    load_fact_schema,
    load_facts_file,
    parse_fact_args,
)
from privacy_ci.reasoning._law import LawBook, LawDecision, apply_law, facts_from, load_law

Tri = bool | None
Known = Mapping[str, str]

# ------------------------------------------------------------- the YAML, read here
_PACKAGE = resources.files("privacy_ci.reasoning")
RAW_LAW: dict[str, Any] = yaml.safe_load(
    Path(str(_PACKAGE / "law" / "hipaa.yaml")).read_text(encoding="utf-8")
)
RAW_FACTS: dict[str, Any] = yaml.safe_load(
    Path(str(_PACKAGE / "facts" / "hipaa.yaml")).read_text(encoding="utf-8")
)


def _name(value: Any) -> str:
    """A value name as the files mean it (YAML 1.1 reads a bare yes/no as a boolean)."""
    return "yes" if value is True else "no" if value is False else str(value)


VALUES: dict[str, tuple[str, ...]] = {
    _name(fact): tuple(_name(v) for v in spec["values"])
    for fact, spec in RAW_FACTS["facts"].items()
}
PRESUME: dict[str, str] = {
    _name(fact): _name(spec["presume"])
    for fact, spec in RAW_FACTS["facts"].items()
    if spec.get("presume") is not None
}
FACTS: tuple[str, ...] = tuple(VALUES)
CORE: tuple[str, ...] = tuple(f for f in FACTS if f not in PRESUME)  # the flow itself

# The documented precedence, and what each group's rules say (require: a permission
# the regulation makes mandatory).
GROUPS = ("not_applicable", "prohibit", "require", "permit")
VERDICT_OF = {
    "not_applicable": Verdict.NOT_APPLICABLE,
    "prohibit": Verdict.PROHIBIT,
    "require": Verdict.PERMIT,
    "permit": Verdict.PERMIT,
}


@dataclass(frozen=True)
class RefRule:
    id: str
    group: str
    when: Any
    unless: Any = None


REF_RULES: tuple[RefRule, ...] = tuple(
    RefRule(str(raw["id"]), group, raw["when"], raw.get("unless"))
    for group in GROUPS
    for raw in RAW_LAW["groups"].get(group) or []
)
DEFAULT_ID = str(RAW_LAW["default"]["id"])
DEFAULT_VERDICT = VERDICT_OF[str(RAW_LAW["default"].get("effect", "prohibit"))]
RULE_IDS = tuple(r.id for r in REF_RULES)
BY_ID = {r.id: r for r in REF_RULES}


# ----------------------------------------------------- the reference verdict rule
def _and(results: list[Tri]) -> Tri:
    if any(r is False for r in results):
        return False
    return None if any(r is None for r in results) else True


def _or(results: list[Tri]) -> Tri:
    if any(r is True for r in results):
        return True
    return None if any(r is None for r in results) else False


def _not(result: Tri) -> Tri:
    return None if result is None else not result


def _wanted(raw: Any) -> frozenset[str]:
    return frozenset(_name(v) for v in (raw if isinstance(raw, list) else [raw]))


def ref_eval(cond: Any, known: Known) -> Tri:
    """A raw YAML condition's value in Kleene's three-valued logic (absent: unknown)."""
    if set(cond) == {"not"}:
        return _not(ref_eval(cond["not"], known))
    if set(cond) == {"all"}:
        return _and([ref_eval(c, known) for c in cond["all"]])
    if set(cond) == {"any"}:
        return _or([ref_eval(c, known) for c in cond["any"]])
    return _and(
        [
            None if fact not in known else known[fact] in _wanted(wanted)
            for fact, wanted in cond.items()
        ]
    )


def ref_literals(cond: Any) -> Iterator[tuple[str, frozenset[str]]]:
    if set(cond) == {"not"}:
        yield from ref_literals(cond["not"])
    elif set(cond) in ({"all"}, {"any"}):
        for part in next(iter(cond.values())):
            yield from ref_literals(part)
    else:
        for fact, wanted in cond.items():
            yield str(fact), _wanted(wanted)


def ref_status(rule: RefRule, known: Known) -> Tri:
    """Whether the rule applies: `when` and not `unless`."""
    lifted: Tri = False if rule.unless is None else ref_eval(rule.unless, known)
    return _and([ref_eval(rule.when, known), _not(lifted)])


def ref_decide(known: Known) -> tuple[str, Verdict]:
    """The first rule, in precedence order, that applies; else the default. On
    incomplete facts: a rule that hinges on an unknown fact is not applied."""
    for rule in REF_RULES:
        if ref_status(rule, known) is True:
            return rule.id, VERDICT_OF[rule.group]
    return DEFAULT_ID, DEFAULT_VERDICT


def ref_on_presumptions(known: Known) -> tuple[str, Verdict]:
    return ref_decide({**PRESUME, **known})


def _classes() -> dict[str, tuple[tuple[str, ...], ...]]:
    """Per fact, one value of each group of values that no literal of the law tells
    apart: enough values to reach every verdict."""
    literals = [
        lit
        for r in REF_RULES
        for cond in (r.when, r.unless)
        if cond is not None
        for lit in ref_literals(cond)
    ]
    out: dict[str, tuple[tuple[str, ...], ...]] = {}
    for fact, values in VALUES.items():
        groups: dict[tuple[bool, ...], list[str]] = {}
        for v in values:
            groups.setdefault(tuple(v in w for f, w in literals if f == fact), []).append(v)
        out[fact] = tuple(tuple(g) for g in groups.values())
    return out


CLASSES = _classes()
# the values the solver tries: the presumption first (base cases read naturally)
DOMAIN: dict[str, tuple[str, ...]] = {
    fact: tuple(sorted((g[0] for g in groups), key=lambda v: v != PRESUME.get(fact)))
    for fact, groups in CLASSES.items()
}


# --------------------------------------------------------------------- the solver
Check = tuple[Callable[[Known], Tri], bool]
"""A constraint: the function's value must never be the second element (an unknown
value on a partial assignment is not yet a violation)."""


def solve(checks: list[Check], first: tuple[str, ...] = ()) -> dict[str, str] | None:
    """A complete fact set (every fact of the schema given) meeting every check, by
    backtracking over the fact classes with three-valued pruning."""
    order = list(dict.fromkeys((*first, *FACTS)))
    assignment: dict[str, str] = {}

    def ok() -> bool:
        return all(fn(assignment) is not bad for fn, bad in checks)

    def go(i: int) -> dict[str, str] | None:
        if i == len(order):
            return dict(assignment)
        fact = order[i]
        for value in DOMAIN[fact]:
            assignment[fact] = value
            if ok():
                found = go(i + 1)
                if found is not None:
                    return found
            del assignment[fact]
        return None

    return go(0) if ok() else None


def status_of(rule: RefRule) -> Callable[[Known], Tri]:
    return lambda known: ref_status(rule, known)


def after_flip(cond: Any, fact: str, value: str) -> Callable[[Known], Tri]:
    """The condition's value once `fact` is changed to `value`."""
    return lambda known: ref_eval(cond, {**known, fact: value})


def literal_of(fact: str, wanted: frozenset[str]) -> Callable[[Known], Tri]:
    return lambda known: None if fact not in known else known[fact] in wanted


def decides_checks(rule_id: str) -> list[Check]:
    """The checks for: `rule_id` (or the default) is the first rule that applies."""
    index = RULE_IDS.index(rule_id) if rule_id != DEFAULT_ID else len(REF_RULES)
    checks: list[Check] = [(status_of(r), True) for r in REF_RULES[:index]]
    if rule_id != DEFAULT_ID:
        checks.append((status_of(BY_ID[rule_id]), False))
    return checks


def rule_facts(rule: RefRule) -> tuple[str, ...]:
    conds = [rule.when] + ([rule.unless] if rule.unless is not None else [])
    return tuple(dict.fromkeys(f for c in conds for f, _ in ref_literals(c)))


def unless_alternatives(rule: RefRule) -> list[Any]:
    if rule.unless is None:
        return []
    return list(rule.unless["any"]) if set(rule.unless) == {"any"} else [rule.unless]


# The flip cases: (rule, "when", literal index, fact) or (rule, "unless", alternative
# index, fact), straight from the YAML.
FLIP_CASES: list[tuple[str, str, int, str]] = []
for _rule in REF_RULES:
    for _i, (_fact, _) in enumerate(ref_literals(_rule.when)):
        FLIP_CASES.append((_rule.id, "when", _i, _fact))
    for _j, _alt in enumerate(unless_alternatives(_rule)):
        for _fact in dict.fromkeys(f for f, _ in ref_literals(_alt)):
            FLIP_CASES.append((_rule.id, "unless", _j, _fact))


def flip_pair(rule_id: str, where: str, index: int, fact: str) -> tuple[dict[str, str], str]:
    """A complete fact set on which `rule_id` decides and a value of `fact` on which
    it does not, because of this literal (when) or this alternative (unless)."""
    rule = BY_ID[rule_id]
    base_checks = decides_checks(rule_id)
    first = (fact, *rule_facts(rule))
    for value in DOMAIN[fact]:
        checks = list(base_checks)
        if where == "when":
            _, wanted = list(ref_literals(rule.when))[index]
            # the literal changes, and with it the rule's `when` fails
            checks.append((literal_of(fact, wanted), value in wanted))
            checks.append((after_flip(rule.when, fact, value), True))
        else:
            # this alternative lifts the rule once the fact is changed
            alt = unless_alternatives(rule)[index]
            checks.append((after_flip(alt, fact, value), False))
        found = solve(checks, first)
        if found is not None:
            return found, value
    raise AssertionError(
        f"rule {rule_id}: no complete fact set on which it decides and {where} #{index} "
        f"({fact}) is the one fact that stops it: a dead literal or a shadowed rule"
    )


# ---------------------------------------------------------------------- helpers
@pytest.fixture(scope="module")
def book() -> LawBook:
    return load_law("hipaa")


def decide(book: LawBook, known: Known) -> LawDecision:
    return apply_law(book, facts_from(dict(known)))


def complete(**given: str) -> dict[str, str]:
    """A complete fact set: a covered entity's PHI to someone else for another purpose,
    every other fact at its presumption, then `given`."""
    base = {
        "holder": "covered_entity",
        "information": "phi",
        "recipient": "other",
        "purpose": "other",
        **PRESUME,
    }
    out = {**base, **given}
    assert set(out) == set(FACTS), "a complete fact set names every fact"
    return out


def assert_decided(decision: LawDecision, rule_id: str, verdict: Verdict) -> None:
    assert (decision.rule.id, decision.verdict) == (rule_id, verdict), decision.explanation()
    assert decision.determined
    assert decision.presumed == {}
    assert decision.questions == ()


# ==================================================== 1. every rule, both outcomes
def test_the_engine_reads_the_book_in_documented_precedence(book: LawBook) -> None:
    assert [r.id for r in book.rules] == list(RULE_IDS)
    assert [VERDICT_OF[r.effect.value] for r in book.rules] == [
        VERDICT_OF[r.group] for r in REF_RULES
    ]
    assert book.default.id == DEFAULT_ID
    assert book.default.effect.verdict is DEFAULT_VERDICT
    # the engine's value classes are the ones the law tells apart
    assert {f: set(map(tuple, g)) for f, g in book.classes.items()} == {
        f: set(g) for f, g in CLASSES.items()
    }


def test_flip_cases_cover_every_literal_and_alternative() -> None:
    for rule in REF_RULES:
        whens = [c for c in FLIP_CASES if c[0] == rule.id and c[1] == "when"]
        assert len(whens) == len(list(ref_literals(rule.when))) > 0
        alts = {c[2] for c in FLIP_CASES if c[0] == rule.id and c[1] == "unless"}
        assert alts == set(range(len(unless_alternatives(rule))))


@pytest.mark.parametrize("rule_id", [*RULE_IDS, DEFAULT_ID])
def test_rule_decides_on_a_complete_fact_set(book: LawBook, rule_id: str) -> None:
    facts = solve(decides_checks(rule_id), rule_facts(BY_ID[rule_id]) if rule_id in BY_ID else ())
    assert facts is not None, f"{rule_id}: no complete fact set on which it decides"
    assert set(facts) == set(FACTS)
    expected = VERDICT_OF[BY_ID[rule_id].group] if rule_id in BY_ID else DEFAULT_VERDICT
    decision = decide(book, facts)
    assert_decided(decision, rule_id, expected)
    assert decision.rule is book.rule(rule_id)
    assert not decision.exhausted
    # every fact it used was given, with its value
    assert all(decision.used[k].value == facts[k] for k in decision.used)
    assert all(v.source is Source.GIVEN for v in decision.used.values())


@pytest.mark.parametrize(
    ("rule_id", "where", "index", "fact"),
    FLIP_CASES,
    ids=[f"{r}/{w}{i}/{f}" for r, w, i, f in FLIP_CASES],
)
def test_rule_does_not_decide_one_fact_away(
    book: LawBook, rule_id: str, where: str, index: int, fact: str
) -> None:
    base, value = flip_pair(rule_id, where, index, fact)
    flipped = {**base, fact: value}
    assert [k for k in FACTS if base[k] != flipped[k]] == [fact]

    on_base = decide(book, base)
    assert_decided(on_base, rule_id, VERDICT_OF[BY_ID[rule_id].group])

    on_flipped = decide(book, flipped)
    assert on_flipped.rule.id != rule_id, (
        f"{rule_id} still decides with {fact}={value}: {on_flipped.explanation()}"
    )
    assert_decided(on_flipped, *ref_decide(flipped))


# ======================================================= 2. precedence, by name
PSYCHOTHERAPY_FOR_TREATMENT = complete(
    information="psychotherapy_notes", recipient="health_care_provider", purpose="treatment"
)


def test_psychotherapy_notes_without_authorization_are_prohibited_even_for_treatment(
    book: LawBook,
) -> None:
    facts = PSYCHOTHERAPY_FOR_TREATMENT
    # 164.506(c)(2) alone would permit it: it does for other PHI ...
    assert_decided(
        decide(book, {**facts, "information": "phi"}), "164.506(c)(2)-treatment", Verdict.PERMIT
    )
    assert ref_status(BY_ID["164.506(c)(2)-treatment"], facts) is True
    # ... but the prohibition comes first
    assert_decided(decide(book, facts), "164.508(a)(2)-psychotherapy-notes", Verdict.PROHIBIT)


def test_psychotherapy_notes_with_a_valid_authorization_are_permitted(book: LawBook) -> None:
    decision = decide(book, {**PSYCHOTHERAPY_FOR_TREATMENT, "authorization": "valid"})
    assert_decided(decision, "164.508(a)(1)-authorization", Verdict.PERMIT)
    assert decision.used["authorization"].value == "valid"


def test_agreed_restriction_yields_to_a_disclosure_required_by_law(book: LawBook) -> None:
    restricted = complete(restriction="agreed_restriction", recipient="government_agency")
    assert_decided(
        decide(book, restricted), "164.522(a)(1)(iii)-agreed-restriction", Verdict.PROHIBIT
    )
    assert_decided(
        decide(book, {**restricted, "required_by_law": "yes"}),
        "164.512(a)-required-by-law",
        Verdict.PERMIT,
    )


def test_marketing_needs_an_authorization(book: LawBook) -> None:
    marketing = complete(recipient="marketer", purpose="marketing")
    assert_decided(decide(book, marketing), "164.508(a)(3)-marketing", Verdict.PROHIBIT)
    assert_decided(
        decide(book, {**marketing, "authorization": "valid"}),
        "164.508(a)(1)-authorization",
        Verdict.PERMIT,
    )
    # an authorization that does not cover it is no authorization
    assert_decided(
        decide(book, {**marketing, "authorization": "not_covering"}),
        "164.508(a)(3)-marketing",
        Verdict.PROHIBIT,
    )
    # 164.508(a)(3)(i): face to face, or a gift of nominal value, needs none
    assert_decided(
        decide(book, {**marketing, "marketing_exception": "yes"}),
        "164.508(a)(3)(i)-marketing-exception",
        Verdict.PERMIT,
    )


def test_sale_for_research_is_excepted_only_for_a_cost_based_fee(book: LawBook) -> None:
    """164.502(a)(5)(ii)(B)(2)(ii): research is no sale where the only remuneration is a
    reasonable cost-based fee, which the fact model records as remuneration "no"."""
    sale = complete(
        remuneration="yes",
        recipient="researcher",
        purpose="research",
        research_approval="irb_waiver",
    )
    assert_decided(decide(book, sale), "164.502(a)(5)(ii)-sale", Verdict.PROHIBIT)
    # 164.512(i) alone would permit it
    assert ref_status(BY_ID["164.512(i)-research"], sale) is True
    cost_based = {**sale, "remuneration": "no"}
    assert_decided(decide(book, cost_based), "164.512(i)-research", Verdict.PERMIT)
    # research still needs its basis
    no_basis = {**cost_based, "research_approval": "none"}
    assert_decided(decide(book, no_basis), DEFAULT_ID, Verdict.PROHIBIT)
    # an authorization (stating the remuneration) lifts the prohibition
    assert_decided(
        decide(book, {**sale, "authorization": "valid"}),
        "164.508(a)(1)-authorization",
        Verdict.PERMIT,
    )
    # as do the sale's own exceptions, e.g. public health
    public_health = {**sale, "purpose": "public_health", "recipient": "public_health_authority"}
    assert_decided(decide(book, public_health), "164.512(b)(1)(i)-public-health", Verdict.PERMIT)


WORST = {  # every prohibition's trigger at once
    "information": "psychotherapy_notes",
    "purpose": "marketing",
    "remuneration": "yes",
    "restriction": "agreed_restriction",
    "individual_response": "objected",
    "minimum_necessary": "exceeded",
}
BEST = {  # every permission's basis at once
    "authorization": "valid",
    "required_by_law": "yes",
    "legal_process": "court_order",
    "serious_threat": "yes",
    "recipient": "subject",
}


@pytest.mark.parametrize("holder", ["employer", "school", "individual", "other"])
@pytest.mark.parametrize("facts", [WORST, BEST], ids=["worst", "best"])
def test_a_holder_the_rule_does_not_cover_beats_everything(
    book: LawBook, holder: str, facts: dict[str, str]
) -> None:
    assert_decided(
        decide(book, complete(holder=holder, **facts)),
        "holder-not-covered",
        Verdict.NOT_APPLICABLE,
    )
    # and with nothing but the holder known, it is already determined
    assert_decided(decide(book, {"holder": holder}), "holder-not-covered", Verdict.NOT_APPLICABLE)


def test_the_default_rule_prohibits_when_nothing_permits(book: LawBook) -> None:
    decision = decide(book, complete(recipient="media_or_public", purpose="other"))
    assert_decided(decision, "164.502(a)-general-rule", Verdict.PROHIBIT)
    assert decision.rule is book.default
    misses = {m.rule.id: m.failing for m in decision.near_misses}
    assert misses["164.508(a)(1)-authorization"] == (("authorization", "absent", ("valid",)),)
    assert misses["164.512(a)-required-by-law"] == (("required_by_law", "no", ("yes",)),)
    # only permissions and requirements are near misses
    assert all(m.rule.effect.value in ("permit", "require") for m in decision.near_misses)


# ============================================================ 3. unknown facts
def completions(known: Known, unknown: tuple[str, ...]) -> Iterator[dict[str, str]]:
    for values in itertools.product(*(DOMAIN[f] for f in unknown)):
        yield {**known, **dict(zip(unknown, values, strict=True))}


def expected_questions(known: Known) -> set[str]:
    """The unknown facts one answer of which changes the verdict on the presumptions."""
    base = {**PRESUME, **known}
    read = {f for r in REF_RULES for f in rule_facts(r)}
    out = set()
    for fact in FACTS:
        if fact in known or fact not in read:
            continue
        verdicts = {ref_decide({**base, fact: v})[1] for v in VALUES[fact]}
        if len(verdicts) > 1:
            out.add(fact)
    return out


def check_partial(book: LawBook, known: Known) -> LawDecision:
    """What holds of every decision: provenance, the verdict on the presumptions, and
    questions whose answers do what they say."""
    facts = facts_from(dict(known))
    decision = apply_law(book, facts)
    assert VERDICT_OF[decision.rule.effect.value] is decision.verdict or (
        decision.rule is book.default and decision.verdict is DEFAULT_VERDICT
    )
    # provenance: given facts as given, presumed ones marked and listed
    for name, value in decision.used.items():
        if name in facts:
            assert value == facts[name]
        else:
            assert decision.presumed[name] is value
    for name, value in decision.presumed.items():
        assert name not in facts
        assert value.source is Source.PRESUMED
        assert value.value == PRESUME[name]
        assert decision.used[name] is value
    if decision.determined:
        assert decision.presumed == {} and decision.questions == ()
        return decision
    assert not decision.exhausted
    rule_id, verdict = ref_on_presumptions(known)
    assert (decision.rule.id, decision.verdict) == (rule_id, verdict)
    # the questions: exactly the facts that flip it (at most four, the engine's limit)
    asked = [q.fact for q in decision.questions]
    assert len(asked) == len(set(asked))
    expected = expected_questions(known)
    if not expected:
        # no single answer changes it (two together do): the facts the law hinges on,
        # each with the verdicts its answers leave possible
        assert asked and all(q.fact not in known for q in decision.questions)
        # each asked fact splits the verdicts, unless none does alone (then the facts
        # the law hinges on are listed as they are)
        informative = [q for q in decision.questions if len(q.branches) > 1]
        assert informative in ([], list(decision.questions))
        for q in decision.questions:
            assert len({b.verdicts for b in q.branches}) == len(q.branches)
        return decision
    if len(expected) <= 4:
        assert set(asked) == expected
    else:
        assert len(asked) == 4 and set(asked) <= expected
    # the deciding rule's own facts (and a near permission's) are asked first
    mine = set(rule_facts(BY_ID[rule_id])) if rule_id in BY_ID else set()
    mine |= {f for miss in decision.near_misses for f, _, _ in miss.failing}
    ranks = [0 if f in mine else 1 for f in asked]
    assert ranks == sorted(ranks)
    for q in decision.questions:
        assert q.question == book.schema.spec(q.fact).question
        answers = [v for b in q.branches for v in b.values]
        assert sorted(answers) == sorted(VALUES[q.fact])
        assert len({b.verdicts for b in q.branches}) == len(q.branches) > 1
        for branch in q.branches:
            assert branch.rule is not None
            for answer in branch.values:
                answered = apply_law(book, facts.with_facts({q.fact: FactValue(answer)}))
                assert answered.verdict is branch.verdicts[0], (q.fact, answer)
    return decision


CORE_GIVEN = {
    "holder": "covered_entity",
    "information": "phi",
    "recipient": "researcher",
    "purpose": "research",
}


def test_a_permission_that_needs_an_unknown_fact_is_not_determined(book: LawBook) -> None:
    decision = check_partial(book, CORE_GIVEN)
    assert not decision.determined
    assert (decision.verdict, decision.rule.id) == (Verdict.PROHIBIT, DEFAULT_ID)
    assert "research_approval" in expected_questions(CORE_GIVEN)
    # the permission the flow nearly meets, and the fact that fails it
    misses = {m.rule.id: m.failing for m in decision.near_misses}
    assert misses["164.512(i)-research"] == (
        ("research_approval", "none", ("irb_waiver", "preparatory_review", "decedents_research")),
    )
    for question in decision.questions:
        assert question.text.startswith("permitted if")
        assert question.text.endswith("prohibited otherwise")
    # answered: a permission, still resting on the other presumptions
    answered = check_partial(book, {**CORE_GIVEN, "research_approval": "irb_waiver"})
    assert (answered.verdict, answered.rule.id) == (Verdict.PERMIT, "164.512(i)-research")
    assert not answered.determined  # e.g. an agreed restriction would still prohibit it


def test_the_fact_the_flows_own_permission_needs_is_asked(book: LawBook) -> None:
    decision = apply_law(book, facts_from(CORE_GIVEN))
    assert "research_approval" in [q.fact for q in decision.questions]


def test_an_unknown_authorization_never_permits(book: LawBook) -> None:
    known = {
        "holder": "covered_entity",
        "information": "phi",
        "recipient": "marketer",
        "purpose": "marketing",
    }
    decision = check_partial(book, known)
    assert not decision.determined
    assert decision.verdict is Verdict.PROHIBIT
    assert decision.rule.id == "164.508(a)(3)-marketing"
    assert decision.presumed["authorization"].value == "absent"
    assert decision.used["authorization"].source is Source.PRESUMED
    assert decision.questions[0].fact == "authorization"  # the deciding rule's first
    assert "permitted if a valid authorization covers it" in decision.questions[0].text


def test_a_permission_resting_on_a_presumption_says_so(book: LawBook) -> None:
    known = {
        "holder": "covered_entity",
        "information": "phi",
        "recipient": "family_or_friend",
        "purpose": "care_involvement",
    }
    decision = check_partial(book, known)
    assert not decision.determined
    assert (decision.verdict, decision.rule.id) == (
        Verdict.PERMIT,
        "164.510(b)-involvement-in-care",
    )
    presumed = decision.presumed["individual_response"]
    assert presumed.value == "did_not_object" and presumed.source is Source.PRESUMED
    assert decision.used["individual_response"] is presumed
    assert "presumed" in decision.explanation()
    assert "individual_response" in {q.fact for q in decision.questions}
    # an objection, answered, prohibits
    objected = decide(book, {**known, "individual_response": "objected"})
    assert (objected.verdict, objected.rule.id) == (Verdict.PROHIBIT, "164.510-objection")


def test_with_no_facts_at_all_nothing_is_determined(book: LawBook) -> None:
    decision = apply_law(book, facts_from({}))
    assert not decision.determined
    assert decision.questions


SETTINGS = settings(
    max_examples=200,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.filter_too_much],
)

complete_facts = st.fixed_dictionaries({f: st.sampled_from(VALUES[f]) for f in FACTS})


@SETTINGS
@given(facts=complete_facts)
def test_complete_facts_are_determined_by_the_precedence_rule(
    book: LawBook, facts: dict[str, str]
) -> None:
    assert_decided(decide(book, facts), *ref_decide(facts))


@st.composite
def biased_complete_facts(draw: st.DrawFn) -> dict[str, str]:
    """A complete fact set on which a drawn rule decides, then a few facts redrawn:
    the examples land near every rule, not only on the default."""
    target = draw(st.sampled_from([*RULE_IDS, DEFAULT_ID]))
    base = SOLVED.get(target)
    if base is None:
        base = solve(decides_checks(target)) or {f: VALUES[f][0] for f in FACTS}
        SOLVED[target] = base
    changed = draw(st.sets(st.sampled_from(FACTS), max_size=3))
    return {**base, **{f: draw(st.sampled_from(VALUES[f])) for f in sorted(changed)}}


SOLVED: dict[str, dict[str, str]] = {}


@SETTINGS
@given(facts=biased_complete_facts())
def test_complete_facts_near_each_rule_are_determined_by_the_precedence_rule(
    book: LawBook, facts: dict[str, str]
) -> None:
    assert_decided(decide(book, facts), *ref_decide(facts))


@SETTINGS
@given(facts=biased_complete_facts(), forget=st.sets(st.sampled_from(FACTS), max_size=4))
def test_determined_means_every_completion_agrees(
    book: LawBook, facts: dict[str, str], forget: set[str]
) -> None:
    unknown = tuple(f for f in FACTS if f in forget)
    assume(math.prod(len(DOMAIN[f]) for f in unknown) <= 2000)
    known = {k: v for k, v in facts.items() if k not in forget}
    verdicts = {ref_decide(c)[1] for c in completions(known, unknown)}
    decision = check_partial(book, known)
    assert not decision.exhausted
    assert decision.determined == (len(verdicts) == 1), (known, verdicts)
    if decision.determined:
        assert {decision.verdict} == verdicts


@SETTINGS
@given(
    known=st.fixed_dictionaries({f: st.sampled_from(VALUES[f]) for f in CORE}),
    seed=st.integers(0, 2**32 - 1),
)
def test_the_flow_alone_questions_and_completions(
    book: LawBook, known: dict[str, str], seed: int
) -> None:
    """Holder, information, recipient and purpose given, every other fact unknown."""
    decision = check_partial(book, known)
    unknown = [f for f in FACTS if f not in known]
    if not decision.determined:
        return
    # determined: no completion disagrees (one fact at a time, then random ones)
    rng = random.Random(seed)
    samples = [{**known, **PRESUME, f: v} for f in unknown for v in VALUES[f]]
    samples += [{**known, **{f: rng.choice(VALUES[f]) for f in unknown}} for _ in range(100)]
    assert {ref_decide(s)[1] for s in samples} == {decision.verdict}


# ============================================================ 4. facts validation
SCHEMA = load_fact_schema("hipaa")


def test_an_unknown_value_names_the_fact_the_value_and_the_allowed_values() -> None:
    with pytest.raises(FactError) as caught:
        facts_from({"holder": "hospitalx"})
    message = str(caught.value)
    assert "'holder'" in message and "'hospitalx'" in message
    assert all(v in message for v in VALUES["holder"])


def test_an_unknown_key_names_it_and_the_facts() -> None:
    with pytest.raises(FactError) as caught:
        facts_from({"holdr": "covered_entity"})
    message = str(caught.value)
    assert "'holdr'" in message
    assert all(f in message for f in FACTS)


def test_facts_from_key_value_strings() -> None:
    facts = facts_from(["authorization=valid", "holder = covered_entity"])
    assert facts.plain() == {"holder": "covered_entity", "authorization": "valid"}
    with pytest.raises(FactError, match="hospitalx"):
        facts_from(["holder=hospitalx"])


def test_parse_fact_args() -> None:
    facts = parse_fact_args(["authorization=absent"], SCHEMA)
    assert facts.plain() == {"authorization": "absent"}
    assert facts["authorization"].source is Source.GIVEN
    for bad in (["authorization"], ["=absent"], ["authorization="]):
        with pytest.raises(FactError) as caught:
            parse_fact_args(bad, SCHEMA)
        assert "KEY=VALUE" in str(caught.value) and repr(bad[0]) in str(caught.value)
    with pytest.raises(FactError) as unknown:
        parse_fact_args(["authorization=maybe"], SCHEMA)
    assert "'maybe'" in str(unknown.value)
    assert all(v in str(unknown.value) for v in VALUES["authorization"])


GOOD_FACTS: dict[str, Any] = {
    "holder": "covered_entity",
    "information": "psychotherapy_notes",
    "authorization": {
        "value": "valid",
        "source": "read",
        "quote": "she signed a release",
        "start": 4,
        "end": 24,
        "note": "cue",
    },
}
# (name, the file's data, what the error must name)
BAD_FACTS: list[tuple[str, Any, list[str]]] = [
    ("unknown-key", {"holdr": "covered_entity"}, ["'holdr'", "holder"]),
    ("unknown-value", {"holder": "hospitalx"}, ["'hospitalx'", "covered_entity", "other"]),
    ("unknown-object-value", {"holder": {"value": "x"}}, ["'holder'", "'x'"]),
    ("non-object", ["holder", "covered_entity"], ["expected an object", "list"]),
    ("bad-source", {"authorization": {"value": "valid", "source": "guessed"}}, ["'source'"]),
    (
        "negative-offset",
        {"authorization": {"value": "valid", "start": -1, "end": 3}},
        ["'start'", ">= 0"],
    ),
    ("extra-field", {"authorization": {"value": "valid", "page": 3}}, ["'page'"]),
    ("no-value", {"authorization": {"source": "read"}}, ["'value'"]),
    ("number-value", {"holder": 3}, ["'holder'"]),
]


def _write(path: Path, data: Any) -> Path:
    if path.suffix == ".json":
        path.write_text(json.dumps(data), encoding="utf-8")
    else:
        path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


@pytest.mark.parametrize("suffix", [".json", ".yaml"])
def test_load_facts_file_reads_a_valid_file(tmp_path: Path, suffix: str) -> None:
    facts = load_facts_file(_write(tmp_path / f"facts{suffix}", GOOD_FACTS), SCHEMA)
    assert facts.plain() == {
        "holder": "covered_entity",
        "information": "psychotherapy_notes",
        "authorization": "valid",
    }
    read = facts["authorization"]
    assert (read.source, read.quote, read.start, read.end, read.note) == (
        Source.READ,
        "she signed a release",
        4,
        24,
        "cue",
    )


def test_load_facts_file_reads_yaml_booleans_as_yes_and_no(tmp_path: Path) -> None:
    path = tmp_path / "facts.yaml"
    path.write_text("required_by_law: yes\nserious_threat: no\n", encoding="utf-8")
    assert load_facts_file(path, SCHEMA).plain() == {
        "required_by_law": "yes",
        "serious_threat": "no",
    }


@pytest.mark.parametrize("suffix", [".json", ".yaml"])
@pytest.mark.parametrize(("name", "data", "names"), BAD_FACTS, ids=[b[0] for b in BAD_FACTS])
def test_load_facts_file_gives_one_clear_error(
    tmp_path: Path, suffix: str, name: str, data: Any, names: list[str]
) -> None:
    path = _write(tmp_path / f"{name}{suffix}", data)
    with pytest.raises(FactError) as caught:
        load_facts_file(path, SCHEMA)
    message = str(caught.value)
    assert isinstance(caught.value, PrivacyCIError)
    assert str(path) in message and "\n" not in message
    for part in names:
        assert part in message


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("empty.json", ""),
        ("syntax.json", '{"holder": '),
        ("duplicate.json", '{"holder": "covered_entity", "holder": "other"}'),
        ("syntax.yaml", "holder: [covered_entity\n"),
        ("duplicate.yaml", "holder: covered_entity\nholder: other\n"),
        ("scalar.yaml", "covered_entity\n"),
    ],
)
def test_load_facts_file_unparsable(tmp_path: Path, name: str, text: str) -> None:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    with pytest.raises(FactError) as caught:
        load_facts_file(path, SCHEMA)
    assert str(path) in str(caught.value)


@pytest.mark.xfail(
    strict=True,
    reason="load_facts_file reads an empty YAML file (or one with only comments) as "
    "'no facts' (`if data is None: data = {}`) instead of an error naming the file",
)
@pytest.mark.parametrize("text", ["", "# nothing\n"])
def test_an_empty_yaml_facts_file_is_an_error(tmp_path: Path, text: str) -> None:
    path = tmp_path / "empty.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(FactError, match="empty"):
        load_facts_file(path, SCHEMA)


def test_load_facts_file_missing_and_not_utf8(tmp_path: Path) -> None:
    with pytest.raises(FactError, match="no such facts file"):
        load_facts_file(tmp_path / "absent.json", SCHEMA)
    binary = tmp_path / "binary.yaml"
    binary.write_bytes(b"holder: \xff\xfe\n")
    with pytest.raises(FactError, match="not UTF-8"):
        load_facts_file(binary, SCHEMA)


def test_the_json_schema_accepts_good_facts_and_rejects_bad_ones() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = SCHEMA.json_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    assert list(validator.iter_errors(GOOD_FACTS)) == []
    assert list(validator.iter_errors({})) == []
    every = {f: VALUES[f][-1] for f in FACTS}
    assert list(validator.iter_errors(every)) == []
    for name, data, _ in BAD_FACTS:
        assert list(validator.iter_errors(data)), f"the schema accepts {name}: {data}"
    assert set(schema["properties"]) == set(FACTS)
    for fact in FACTS:
        assert schema["properties"][fact]["oneOf"][0]["enum"] == list(VALUES[fact])


@pytest.mark.parametrize(
    ("name", "data"),
    [
        ("good", GOOD_FACTS),
        *[(b[0], b[1]) for b in BAD_FACTS],
        pytest.param(
            "json-boolean",
            {"required_by_law": True},
            marks=pytest.mark.xfail(
                strict=True,
                reason="Facts.from_mapping turns a boolean into 'yes'/'no' for YAML, so a "
                "JSON file with true is loaded, while FactSchema.json_schema() (type "
                "string) rejects it: the schema and the loader disagree",
            ),
        ),
    ],
)
def test_the_json_schema_and_the_loader_agree(tmp_path: Path, name: str, data: Any) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    valid = not list(jsonschema.Draft202012Validator(SCHEMA.json_schema()).iter_errors(data))
    try:
        load_facts_file(_write(tmp_path / "facts.json", data), SCHEMA)
        loaded = True
    except FactError:
        loaded = False
    assert valid == loaded


# ====================== 5. an agreed restriction yields to 164.512 (164.522(a)(1)(v))
@pytest.mark.parametrize(
    ("given", "rule_id"),
    [
        (
            {
                "legal_process": "court_order",
                "recipient": "court",
                "purpose": "judicial_proceeding",
            },
            "164.512(e)(1)(i)-court-order",
        ),
        (
            {"serious_threat": "yes", "recipient": "law_enforcement", "purpose": "law_enforcement"},
            "164.512(j)(1)(i)-serious-threat",
        ),
        ({"purpose": "directory"}, "164.510(a)-facility-directory"),
        ({"recipient": "hhs_secretary"}, "164.502(a)(2)(ii)-secretary"),
    ],
    ids=["court-order", "serious-threat", "directory", "secretary"],
)
def test_an_agreed_restriction_does_not_prevent_what_164_522_a_1_v_exempts(
    book: LawBook, given: dict[str, str], rule_id: str
) -> None:
    facts = complete(restriction="agreed_restriction", **given)
    assert_decided(decide(book, facts), rule_id, Verdict.PERMIT)


# ================================== 6. where the engine departs from its own contract
UNASKED = {  # a court order, the recipient unknown: a sale if paid and not to an exempt one
    "holder": "covered_entity",
    "information": "phi",
    "purpose": "other",
    "legal_process": "court_order",
}


def test_an_interaction_of_two_unknown_facts_is_not_determined(book: LawBook) -> None:
    recipients_paid = {
        ref_decide({**PRESUME, **UNASKED, "recipient": r, "remuneration": "yes"})[1]
        for r in VALUES["recipient"]
    }
    assert recipients_paid == {Verdict.PERMIT, Verdict.PROHIBIT}
    decision = apply_law(book, facts_from(UNASKED))
    assert not decision.determined
    assert decision.verdict is Verdict.PERMIT


def test_an_undetermined_verdict_names_a_question(book: LawBook) -> None:
    decision = apply_law(book, facts_from(UNASKED))
    assert not decision.determined
    assert decision.questions or decision.presumed


def test_a_presumption_that_keeps_a_prohibition_away_is_listed(book: LawBook) -> None:
    decision = apply_law(
        book,
        facts_from(
            {
                "holder": "covered_entity",
                "information": "phi",
                "recipient": "health_care_provider",
                "purpose": "treatment",
            }
        ),
    )
    assert (decision.verdict, decision.determined) == (Verdict.PERMIT, False)
    assert "restriction" in decision.presumed
