"""Scores of the facts-then-law judge on cases that carry gold facts and pair ids.

A case file may state the facts of each disclosure (``facts``, `Case.gold_facts`)
and group cases into minimal pairs (``pair_id``, `Case.pair_id`). On such cases a
run is scored three ways, so that a wrong verdict can be put down to the law or to
the reading:

1. **The law from gold facts** (`law_from_gold`): the regulation's law book applied
   to each case's gold facts (`privacy_ci.reasoning.apply_law`; the schema's
   presumptions fill the facts the writer left unstated). It does not depend on
   the run: it tests the law engine and the gold facts together, and must be exact.
2. **Reading, per fact** (`reading_scores`): for a method whose records carry the
   facts it decided on (the ``ci-reasoner``'s ``reason`` step, ``checklist-qa``'s
   ``combine`` step: the last step whose parsed result is a judgment, with ``facts``
   and the law's ``decision``; facts a step only read, such as checklist-qa's
   ``read`` step before the model's answers, are not the method's final facts), each
   gold fact is *right* (the method's value equals the gold value), *wrong* (another
   value) or *missing* (the method has no value for it, e.g. it was presumed). Only
   facts present in the gold count; a failed case's facts are all missing.
3. **End to end** (`end_to_end`): the run's verdicts on the same cases, beside the
   model-free baselines' (the whole run is also scored as every run is, `score_run`).

Cases with pair ids add pair accuracy and the flip rate (`pair_scores`), for the run
and for the model-free baselines on the same cases. Cases sharing a pair id form one
group, however many they are (a case file refuses a pair id of one case,
`privacy_ci.cases.load_case_file`): a group of three or more is right when every
member is, and flips when its verdicts are not all the same.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from privacy_ci.cases import Case, Protocol
from privacy_ci.evaluation._baselines import Baseline
from privacy_ci.evaluation._metrics import Pair, pair_scores, wilson_interval

__all__ = [
    "end_to_end",
    "gold_fact_metrics",
    "law_from_gold",
    "pair_groups",
    "reading_scores",
    "record_facts",
]

_SHOWN_CASES = 50  # case ids listed per wrong or missing fact (the counts are exact)


def record_facts(record: Mapping[str, Any]) -> dict[str, str] | None:
    """The facts a method decided on, from its record (fact -> value), or None.

    The last step whose parsed result is a judgment (a ``facts`` object and the law's
    ``decision``, `privacy_ci.reasoning.FactJudgment.as_dict`) wins: a method's final
    facts come after any it only read. A fact's entry is either a value name or an
    object with ``value`` (`privacy_ci.reasoning.FactValue.as_dict`).

    Args:
        record: a run record (``records.jsonl`` line).

    Returns:
        fact -> value; None when no step of the record is a judgment with facts (a
        failed case, or a method that records none).
    """
    for step in reversed(record.get("steps") or []):
        parsed = step.get("parsed") if isinstance(step, Mapping) else None
        if not isinstance(parsed, Mapping) or "decision" not in parsed:
            continue
        facts = parsed.get("facts")
        if not isinstance(facts, Mapping):
            continue
        out: dict[str, str] = {}
        for name, entry in facts.items():
            value = entry.get("value") if isinstance(entry, Mapping) else entry
            if isinstance(value, str):
                out[str(name)] = value
        return out
    return None


def law_from_gold(cases: Sequence[Case], protocol: Protocol) -> dict[str, Any] | None:
    """The law book applied to each case's gold facts, scored against the labels.

    Args:
        cases: the scored cases (those without gold facts are skipped).
        protocol: their protocol (labels are compared as its task's classes).

    Returns:
        ``{"n", "correct", "accuracy", "accuracy_ci", "determined", "law", "wrong"}``
        (``wrong``: per case id, the gold and the law's verdict and rule); None when no
        case carries gold facts. When the regulation has no law book: ``{"n",
        "error"}``.
    """
    from privacy_ci.reasoning import FactError, Facts, apply_law, load_law

    gold = [c for c in cases if c.gold_facts is not None]
    if not gold:
        return None
    regulation = gold[0].regulation
    try:
        book = load_law(regulation)
    except FactError as exc:
        return {"n": len(gold), "error": f"no law book: {exc}"}
    correct = determined = 0
    wrong: list[dict[str, Any]] = []
    for case in gold:
        assert case.gold_facts is not None
        decision = apply_law(book, Facts.from_mapping(book.schema, case.gold_facts))
        determined += decision.determined
        if protocol.target(decision.verdict) == protocol.target(case.label):
            correct += 1
            continue
        wrong.append(
            {
                "case": case.id,
                "gold": case.label.value,
                "law": decision.verdict.value,
                "rule": decision.rule.id,
                "determined": decision.determined,
            }
        )
    n = len(gold)
    return {
        "n": n,
        "correct": correct,
        "accuracy": round(correct / n, 6),
        "accuracy_ci": wilson_interval(correct, n).as_dict(),
        "determined": determined,
        "law": book.version_id,
        "wrong": wrong,
    }


def reading_scores(
    cases: Sequence[Case], records: Mapping[str, Mapping[str, Any]]
) -> dict[str, Any] | None:
    """Right / wrong / missing per gold fact, for a method whose records carry facts.

    Args:
        cases: the scored cases (those without gold facts are skipped).
        records: case id -> its record.

    Returns:
        ``{"cases", "facts": {fact: {"gold", "right", "wrong", "missing",
        "missing_presumed", "accuracy", "accuracy_ci", "confusions", "wrong_cases",
        "missing_cases"}}, "overall": {...}, "all_right_cases"}`` in the fact schema's
        order (``missing_presumed``: missing facts whose presumption equals the gold
        value; ``confusions``: ``"gold -> read"`` counts); None when no case with
        gold facts has a record carrying facts (the method reports none).
    """
    gold_cases = [c for c in cases if c.gold_facts is not None and c.id in records]
    read = {c.id: record_facts(records[c.id]) for c in gold_cases}
    if not any(v is not None for v in read.values()):
        return None
    from privacy_ci.reasoning import FactError, load_fact_schema

    try:
        schema = load_fact_schema(gold_cases[0].regulation)
        order = [spec.name for spec in schema]
        presumptions = {spec.name: spec.presume for spec in schema}
    except FactError:  # (cases are validated on load; a hand-made Case may lack a schema)
        order, presumptions = [], {}
    tallies: dict[str, dict[str, Any]] = {}
    all_right = 0
    for case in gold_cases:
        assert case.gold_facts is not None
        found = read[case.id] or {}
        every = True
        for name, value in case.gold_facts.items():
            t = tallies.setdefault(
                name,
                {
                    "gold": 0,
                    "right": 0,
                    "wrong": 0,
                    "missing": 0,
                    "missing_presumed": 0,
                    "confusions": Counter(),
                    "wrong_cases": [],
                    "missing_cases": [],
                },
            )
            t["gold"] += 1
            got = found.get(name)
            if got == value:
                t["right"] += 1
                continue
            every = False
            if got is None:
                t["missing"] += 1
                t["missing_presumed"] += presumptions.get(name) == value
                t["missing_cases"].append(case.id)
            else:
                t["wrong"] += 1
                t["confusions"][f"{value} -> {got}"] += 1
                t["wrong_cases"].append(case.id)
        all_right += every
    names = [n for n in order if n in tallies] + sorted(n for n in tallies if n not in order)
    facts: dict[str, Any] = {}
    for name in names:
        t = tallies[name]
        facts[name] = {
            "gold": t["gold"],
            "right": t["right"],
            "wrong": t["wrong"],
            "missing": t["missing"],
            "missing_presumed": t["missing_presumed"],
            "accuracy": round(t["right"] / t["gold"], 6),
            "accuracy_ci": wilson_interval(t["right"], t["gold"]).as_dict(),
            "confusions": dict(t["confusions"].most_common()),
            "wrong_cases": t["wrong_cases"][:_SHOWN_CASES],
            "missing_cases": t["missing_cases"][:_SHOWN_CASES],
        }
    total = sum(t["gold"] for t in tallies.values())
    right = sum(t["right"] for t in tallies.values())
    return {
        "cases": len(gold_cases),
        "without_facts": sum(1 for v in read.values() if v is None),
        "facts": facts,
        "overall": {
            "gold": total,
            "right": right,
            "wrong": sum(t["wrong"] for t in tallies.values()),
            "missing": sum(t["missing"] for t in tallies.values()),
            "accuracy": round(right / total, 6) if total else 0.0,
            "accuracy_ci": wilson_interval(right, total).as_dict(),
        },
        "all_right_cases": all_right,
    }


def end_to_end(
    cases: Sequence[Case],
    predicted: Mapping[str, str | None],
    protocol: Protocol,
) -> dict[str, Any]:
    """Accuracy of verdicts on the cases with gold facts (the third score).

    Args:
        cases: the scored cases (those without gold facts are skipped).
        predicted: case id -> the predicted verdict value (None: unparsed, wrong).
        protocol: their protocol (the task's classes are compared).

    Returns:
        ``{"n", "correct", "accuracy", "accuracy_ci"}`` over the cases with gold facts
        that `predicted` has.
    """
    from privacy_ci.ci import Verdict

    scored = [c for c in cases if c.gold_facts is not None and c.id in predicted]
    correct = 0
    for case in scored:
        verdict = predicted[case.id]
        if verdict is not None and protocol.target(Verdict(verdict)) == protocol.target(case.label):
            correct += 1
    n = len(scored)
    return {
        "n": n,
        "correct": correct,
        "accuracy": round(correct / n, 6) if n else 0.0,
        "accuracy_ci": wilson_interval(correct, n).as_dict(),
    }


def pair_groups(
    cases: Sequence[Case], predicted: Mapping[str, str | None], protocol: Protocol
) -> tuple[list[list[Pair]], int]:
    """The scored cases' minimal pairs as (gold, predicted) classes per member.

    Args:
        cases: the scored cases, in order.
        predicted: case id -> the predicted verdict value (None: unparsed).
        protocol: their protocol (the task's classes are compared).

    Returns:
        ``(groups, incomplete)``: the pairs with every member in `predicted`, in order
        of first appearance, and how many pair ids have a member missing from it.
    """
    from privacy_ci.ci import Verdict

    members: dict[str, list[Case]] = {}
    for case in cases:
        if case.pair_id is not None:
            members.setdefault(case.pair_id, []).append(case)
    groups: list[list[Pair]] = []
    incomplete = 0
    for group in members.values():
        if not all(c.id in predicted for c in group):
            incomplete += 1
            continue
        out: list[Pair] = []
        for case in group:
            verdict = predicted[case.id]
            out.append(
                (
                    protocol.target(case.label),
                    None if verdict is None else protocol.target(Verdict(verdict)),
                )
            )
        groups.append(out)
    return groups, incomplete


def gold_fact_metrics(
    cases: Sequence[Case],
    records: Mapping[str, Mapping[str, Any]],
    protocol: Protocol,
    baselines: Sequence[Baseline] = (),
    *,
    bootstrap: int = 1000,
    seed: int = 0,
) -> dict[str, Any]:
    """The metrics blocks of a run on cases with gold facts or pair ids.

    Args:
        cases: the scored cases, in order.
        records: case id -> its record (``verdict``, ``steps``).
        protocol: the dataset's protocol.
        baselines: the model-free baselines to pair-score beside the run.
        bootstrap / seed: the pair intervals' resamples and seed.

    Returns:
        ``{"gold_facts": {...}}`` when some case carries gold facts (``law_from_gold``,
        ``reading`` (None when the method records no facts), ``reading_note``,
        ``end_to_end`` (the run's accuracy on those cases) and ``baselines``: name ->
        the baseline's `end_to_end` on them),
        ``{"pairs": {...}}`` when some case carries a pair id (the run's `PairScores`
        and ``baselines``: name -> its `PairScores`); {} when neither.
    """
    out: dict[str, Any] = {}
    verdicts = {c.id: records[c.id].get("verdict") for c in cases if c.id in records}
    if any(c.gold_facts is not None for c in cases):
        reading = reading_scores(cases, records)
        out["gold_facts"] = {
            "cases": sum(1 for c in cases if c.gold_facts is not None),
            "law_from_gold": law_from_gold(cases, protocol),
            "reading": reading,
            "reading_note": (
                "facts read by the method against the gold facts: right / wrong / missing "
                "per fact present in the gold"
                if reading is not None
                else "the method's records carry no facts: reading is not scored"
            ),
            "end_to_end": end_to_end(cases, verdicts, protocol),
            "baselines": {
                b.name: end_to_end(cases, {k: v.value for k, v in b.predictions.items()}, protocol)
                for b in baselines
            },
        }
    if any(c.pair_id is not None for c in cases):
        kw: dict[str, Any] = {"bootstrap": bootstrap, "seed": seed}
        groups, incomplete = pair_groups(cases, verdicts, protocol)
        block = pair_scores(groups, incomplete=incomplete, **kw).as_dict()
        block["baselines"] = {}
        for baseline in baselines:
            predicted = {k: v.value for k, v in baseline.predictions.items()}
            base_groups, base_incomplete = pair_groups(cases, predicted, protocol)
            block["baselines"][baseline.name] = pair_scores(
                base_groups, incomplete=base_incomplete, **kw
            ).as_dict()
        out["pairs"] = block
    return out
