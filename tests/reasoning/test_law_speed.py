"""The law engine's search (`privacy_ci.reasoning._law`) against the plain recursion
it replaced (issue 25: every ``ask`` step under 100 ms).

The reference below is the engine as first written: at each node, every rule's
condition evaluated afresh; the first rule that applies decides, or the first that
hinges on an unknown fact branches on that fact's first unknown value (schema order),
one branch per class of values; the whole tree built. The verdict, determined flag,
deciding rule, facts used, presumptions, questions (with their branches and words),
near misses and the exhausted flag must be the same on every development pair's gold
facts with every fact and every two facts removed, and on random partial facts.
The engine must never run out on these. Where the reference ran out of branches (its
limit was 3000 nodes; it does on about one gold set in seven), the exact answer is the
reference's without a limit (seconds each: one in ten of those is run so, and every one
where the questions come from the tree or the verdict was not yet seen to be
undetermined); for the others, the leaves reached already give two verdicts, so the
verdict is undetermined, the questions need no tree, and the reference's answer is
exact but for its exhausted flag.
"""

from __future__ import annotations

import itertools
import json
import random
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path

import pytest

from privacy_ci.ci import Verdict
from privacy_ci.reasoning import _law
from privacy_ci.reasoning._facts import Facts, FactValue, presumed
from privacy_ci.reasoning._law import (
    MAX_NODES,
    Branch,
    LawBook,
    LawDecision,
    Question,
    Rule,
    apply_law,
    load_law,
)

REFERENCE_LIMIT = 3000  # the reference's own limit (the engine's as first written)


# ================================================================ the reference
@dataclass(frozen=True)
class _RefNode:
    verdicts: tuple[Verdict, ...]
    rule: Rule | None = None
    fact: str | None = None
    children: tuple[tuple[tuple[str, ...], _RefNode], ...] = ()


class _RefExplorer:
    def __init__(self, book: LawBook, limit: float) -> None:
        self.book = book
        self.limit = limit
        self.nodes = 0
        self.exhausted = False
        self.order = {spec.name: i for i, spec in enumerate(book.schema)}
        self.leaves: set[Verdict] = set()  # the verdicts of the leaves reached

    def first(self, known: Mapping[str, str]) -> tuple[Rule | None, Rule | None]:
        for rule in self.book.rules:
            status = rule.status(known)
            if status is True:
                return rule, None
            if status is None:
                return None, rule
        return self.book.default, None

    def explore(self, known: dict[str, str]) -> _RefNode:
        self.nodes += 1
        rule, hinge = self.first(known)
        if rule is not None:
            self.leaves.add(rule.effect.verdict)
            return _RefNode(verdicts=(rule.effect.verdict,), rule=rule)
        assert hinge is not None
        fact = min((f for f in hinge.facts() if f not in known), key=self.order.__getitem__)
        if self.nodes > self.limit:
            self.exhausted = True
            return _RefNode(verdicts=tuple(Verdict), fact=fact)
        children = []
        for group in self.book.classes[fact]:
            children.append((group, self.explore({**known, fact: group[0]})))
        verdicts = tuple(v for v in Verdict if any(v in c.verdicts for _, c in children))
        return _RefNode(verdicts=verdicts, fact=fact, children=tuple(children))


def _ref_first_on_presumptions(book: LawBook, known: Mapping[str, str]) -> Rule:
    for rule in book.rules:
        if rule.status(known) is True:
            return rule
    return book.default


def _ref_questions(
    book: LawBook,
    known: Mapping[str, str],
    presumptions: Mapping[str, str],
    deciding: Rule,
    first: Sequence[str] = (),
    limit: int = 4,
) -> tuple[Question, ...]:
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
            rule = _ref_first_on_presumptions(book, {**base, spec.name: group[0]})
            by_verdict.setdefault(rule.effect.verdict, []).extend(group)
            rules.setdefault(rule.effect.verdict, rule)
        if len(by_verdict) < 2:
            continue
        branches = tuple(
            Branch(tuple(values), (verdict,), rules[verdict])
            for verdict, values in by_verdict.items()
        )
        rank = first_read[spec.name] + (0 if spec.name in mine else len(book.rules))
        found.append((rank, _law._question(spec, branches, base.get(spec.name))))
    found.sort(key=lambda item: item[0])
    return tuple(q for _, q in found[:limit])


def _ref_hinges(book: LawBook, root: _RefNode, limit: int = 4) -> tuple[Question, ...]:
    out: list[Question] = []
    idle: list[Question] = []  # facts on the way whose every answer leaves the same open
    queue, seen = [root], set()
    while queue and len(seen) < limit:  # (facts considered, asked or not)
        node = queue.pop(0)
        if node.fact is None or len(node.verdicts) < 2:
            continue
        branches: tuple[Branch, ...] = ()
        if node.fact not in seen:
            seen.add(node.fact)
            spec = book.schema.spec(node.fact)
            merged: dict[tuple[Verdict, ...], list[str]] = {}
            for values, child in node.children:
                merged.setdefault(child.verdicts, []).extend(values)
            branches = tuple(Branch(tuple(v), k) for k, v in merged.items())
        # a fact every answer of which leaves the same verdicts open asks nothing here
        if branches:
            parts = []
            for b in branches:
                what = " or ".join(_law._verdict_word(v) for v in b.verdicts)
                labels = " or ".join(spec.label(v) for v in b.values[:4])
                more = " ..." if len(b.values) > 4 else ""
                parts.append(f"{what} if {labels}{more}")
            found = Question(node.fact, spec.question, branches, "; ".join(parts))
            (out if len(branches) > 1 else idle).append(found)
        queue.extend(child for _, child in node.children)
    return tuple(out or idle)


def _ref_leaf_rule(node: _RefNode, verdict: Verdict) -> Rule:
    if node.rule is not None:
        return node.rule
    for _, child in node.children:
        if verdict in child.verdicts:
            return _ref_leaf_rule(child, verdict)
    raise AssertionError("a verdict the tree allows has a leaf")


def reference_apply_law(
    book: LawBook, facts: Facts, limit: float = REFERENCE_LIMIT
) -> tuple[LawDecision, bool, set[Verdict]]:
    """The engine as first written (`apply_law` over the whole tree), whether it used
    the `_hinges` fallback, and the verdicts of the leaves its tree reached."""
    known = facts.plain()
    explorer = _RefExplorer(book, limit)
    root = explorer.explore(dict(known))
    presumptions = presumed(book.schema, facts)
    on_presumptions = {**known, **{k: v.value for k, v in presumptions.items()}}
    rule = _ref_first_on_presumptions(book, on_presumptions)
    determined = len(root.verdicts) == 1 and not explorer.exhausted
    leaning: dict[str, FactValue] = {}
    if determined:
        verdict = root.verdicts[0]
        if root.rule is not None:
            rule = root.rule
        elif rule.effect.verdict is not verdict:
            rule = _ref_leaf_rule(root, verdict)
    else:
        verdict = rule.effect.verdict
        read = _law._read_by(book, rule, on_presumptions)
        leaning = {k: v for k, v in presumptions.items() if k in read}
    values = {**known, **{k: v.value for k, v in leaning.items()}}
    used: dict[str, FactValue] = {}
    for name in _law._read_by(book, rule, values):
        if name in facts:
            used[name] = facts[name]
        elif name in leaning:
            used[name] = leaning[name]
    misses = _law._near_misses(book, on_presumptions, known) if rule is book.default else ()
    questions: tuple[Question, ...] = ()
    hinged = False
    if not determined:
        first = [f for miss in misses for f, _, _ in miss.failing]
        questions = _ref_questions(
            book, known, {k: v.value for k, v in presumptions.items()}, rule, first
        )
        if not questions:
            hinged = True
            questions = _ref_hinges(book, root)
        for q in questions:
            if q.fact in presumptions:
                leaning.setdefault(q.fact, presumptions[q.fact])
                used.setdefault(q.fact, presumptions[q.fact])
    decision = LawDecision(
        verdict, determined, rule, used, leaning, questions, misses, explorer.exhausted, facts
    )
    return decision, hinged, explorer.leaves


# ================================================================== the inputs
@pytest.fixture(scope="module")
def book() -> LawBook:
    return load_law("hipaa")


def _gold() -> list[dict[str, str]]:
    path = Path(str(resources.files("privacy_ci.cases") / "packaged" / "hipaa-pairs-dev.jsonl"))
    lines = path.read_text(encoding="utf-8").splitlines()
    return [json.loads(line)["facts"] for line in lines if line.strip()]


def _removals() -> list[dict[str, str]]:
    """Every gold fact set with each fact and each two facts removed (each set once)."""
    out: dict[tuple[tuple[str, str], ...], dict[str, str]] = {}
    for gold in _gold():
        for size in (0, 1, 2):
            for gone in itertools.combinations(sorted(gold), size):
                partial = {k: v for k, v in gold.items() if k not in gone}
                out.setdefault(tuple(sorted(partial.items())), partial)
    return list(out.values())


def _random_partials(book: LawBook, count: int, seed: int) -> list[dict[str, str]]:
    """Random partial fact sets from the schema: each fact known with a random chance
    (a set per case between nearly empty and nearly complete), any value."""
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        chance = rng.choice((0.15, 0.3, 0.5, 0.7, 0.85))
        out.append(
            {
                spec.name: rng.choice(list(spec.values))
                for spec in book.schema
                if rng.random() < chance
            }
        )
    return out


def _compare(
    book: LawBook, known: Mapping[str, str], exact: bool = True
) -> tuple[LawDecision, bool, bool]:
    """The engine against the reference on `known`: the decision, whether the
    reference used the `_hinges` fallback, and whether it ran out of branches.

    Where the reference ran out, its answer is the one without a limit: run so when
    `exact`, when the fallback's tree is needed, or unless the leaves it reached before
    running out already give two verdicts; in that last case the verdict is proved
    undetermined, the questions need no tree, and the reference's answer is exact but
    for its exhausted flag."""
    facts = Facts.from_mapping(book.schema, known)
    got = apply_law(book, facts)
    want, hinged, leaves = reference_apply_law(book, facts)
    ran_out = want.exhausted
    if ran_out:
        if exact or hinged or len(leaves) < 2:
            want, hinged, _ = reference_apply_law(book, facts, limit=float("inf"))
        else:
            want = replace(want, exhausted=False)
    assert not got.exhausted, known
    assert got.as_dict() == want.as_dict(), known
    assert (got.verdict, got.rule, got.determined) == (want.verdict, want.rule, want.determined)
    assert [q.fact for q in got.questions] == [q.fact for q in want.questions], known
    return got, hinged, ran_out


# =================================================================== the tests
@pytest.mark.slow
def test_the_search_matches_the_plain_recursion_on_every_gold_fact_set_less_two_facts(
    book: LawBook,
) -> None:
    cases = _removals()
    assert len(cases) > 1000
    determined = undetermined = ran_out = 0
    for known in cases:
        # without a limit, a reference that ran out takes a second or more: one in ten
        got, _, out = _compare(book, known, exact=ran_out % 10 == 0)
        determined += got.determined
        undetermined += not got.determined
        ran_out += out
    assert determined and undetermined and ran_out  # every kind of decision compared


@pytest.mark.slow
def test_the_search_matches_the_plain_recursion_on_random_partial_facts(book: LawBook) -> None:
    for known in _random_partials(book, 300, seed=25):
        _compare(book, known, exact=False)


def test_the_two_facts_fallback_matches_the_plain_recursion(book: LawBook) -> None:
    """Partial facts on which no single answer changes the verdict: the questions come
    from the tree breadth first (`_hinges`), which the engine builds only as needed."""
    found = 0
    for known in _random_partials(book, 3000, seed=7):
        facts = Facts.from_mapping(book.schema, known)
        presumptions = {k: v.value for k, v in presumed(book.schema, facts).items()}
        rule = _ref_first_on_presumptions(book, {**known, **presumptions})
        if _ref_questions(book, known, presumptions, rule) or len(known) < 6:
            continue
        found += _compare(book, known)[1]
        if found >= 8:
            break
    assert found >= 8


def test_nothing_known_is_decided_within_the_limit(book: LawBook) -> None:
    """No facts at all: the reference runs out of branches; the engine does not, and
    gives the same answer (undetermined, the same questions) without the flag."""
    facts = Facts(book.schema)
    old, hinged, leaves = reference_apply_law(book, facts)
    assert old.exhausted and not hinged and len(leaves) > 1
    got = apply_law(book, facts)
    assert not got.exhausted and not got.determined
    assert got.as_dict() == {**old.as_dict(), "exhausted": False}


def test_a_search_that_runs_out_says_so(book: LawBook, monkeypatch: pytest.MonkeyPatch) -> None:
    """With a tiny limit, the engine reports that it ran out, and the verdict is the
    one on the presumptions, never called determined."""
    known = {"holder": "covered_entity", "information": "phi", "recipient": "employer"}
    facts = Facts.from_mapping(book.schema, known)
    full = apply_law(book, facts)
    assert not full.determined and not full.exhausted
    monkeypatch.setattr(_law, "MAX_NODES", 1)
    short = apply_law(book, facts)
    assert short.exhausted and not short.determined
    assert short.as_dict() == {**full.as_dict(), "exhausted": True}
    assert MAX_NODES > 1


def test_partial_facts_are_decided_fast(book: LawBook) -> None:
    """The engine on gold facts less one or two: far under the 100 ms of an ask step
    (loose bounds: the machine may be loaded)."""
    cases = _removals()[::5]
    times = []
    for known in cases:
        facts = Facts.from_mapping(book.schema, known)
        start = time.perf_counter()
        apply_law(book, facts)
        times.append(time.perf_counter() - start)
    times.sort()
    assert times[len(times) // 2] < 0.02
    assert times[-1] < 0.5


def test_the_compiled_conditions_agree_with_the_conditions(book: LawBook) -> None:
    """Each rule's compiled status is `Rule.status`, on random partial facts."""
    engine = book._engine
    for known in _random_partials(book, 400, seed=3):
        for rule, status in zip(book.rules, engine.status, strict=True):
            assert status(known) is rule.status(known), (rule.id, known)
