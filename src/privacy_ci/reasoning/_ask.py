"""`Questionnaire`: the law asks for the facts it needs, one step at a time
(``privacy-ci ask``, and any UI that drives it).

A session starts from facts the user gives, a narrative, or both
(`Questionnaire.start`). Facts given are taken as they are. Facts the offline reader
finds in the narrative are pre-filled but not yet trusted: each one the verdict rests
on, or that would change it if it were otherwise, is shown with its quote for
confirmation (`Step` of kind ``confirm``); the user confirms it (`confirm`: it
becomes given, quote kept), changes it (`answer`) or clears it (`reject`: unknown,
and not asked again). Read facts that could not change the verdict are never shown;
the final step lists them.

Then the law asks. Each step applies the law book to the facts so far
(`privacy_ci.reasoning.apply_law`): when the verdict is determined (every value of
every unknown fact gives it) the session ends with a ``verdict`` step naming the
deciding rule; otherwise the next ``question`` is the first of
`LawDecision.questions` (the unknown facts the verdict hinges on, in the order the
rules need them, each with the verdict per answer) that the user has not left
unknown. When every remaining question was left unknown, the session ends with the
verdict on the fact schema's presumptions (``determined: false``), which says so.

Only the first step reads the narrative (spaCy, embeddings); every later step is the
law alone on a handful of facts. A decision is remembered per set of values (values
no rule tells apart count as one), so confirming a fact or leaving it unknown costs
nothing; with ``prefetch=True`` (``privacy-ci ask``) a background thread decides each
possible answer to the question shown while the user reads it, so the next step is
usually ready when the answer comes (a needed decision never waits behind others:
the queue is dropped and it is computed at once).

    q = Questionnaire("hipaa")
    step = q.start(facts={"holder": "covered_entity", "information": "phi"})
    while step.kind is not StepKind.VERDICT:
        q.answer(step.fact, ...)        # or q.confirm(step.fact) / q.reject(step.fact)
        step = q.next_step()
    print(step.decision.explanation())
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from privacy_ci.ci import Flow, Verdict
from privacy_ci.reasoning._facts import FactError, Facts, FactValue, Source
from privacy_ci.reasoning._law import LawBook, LawDecision, Question, Rule, apply_law, load_law

if TYPE_CHECKING:
    from privacy_ci.reasoning._judge import FactJudge

__all__ = ["Choice", "Questionnaire", "Step", "StepKind"]

_UNTRUSTED = (Source.READ, Source.ANSWERED)  # found by a reader: confirmed before trusted

_Key = tuple[tuple[str, str], ...]


class StepKind(StrEnum):
    """What a step asks of the user."""

    CONFIRM = "confirm"  # is this fact, read from the narrative, right?
    QUESTION = "question"  # what is this fact?
    VERDICT = "verdict"  # the answer: nothing more to ask
    ERROR = "error"  # the last answer could not be taken (the session goes on)


@dataclass(frozen=True)
class Choice:
    """One value a step offers.

    Args:
        value: the value's name (what an answer sends).
        label: its short label.
        description: what it means.
        verdicts: for a question, the verdicts this answer leaves possible (one:
            it decides); empty for a confirmation.
        rule: the rule that decides when this answer decides.
    """

    value: str
    label: str
    description: str
    verdicts: tuple[Verdict, ...] = ()
    rule: str | None = None

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "value": self.value,
            "label": self.label,
            "description": self.description,
        }
        if self.verdicts:
            out["verdicts"] = [v.value for v in self.verdicts]
            out["rule"] = self.rule
        return out


@dataclass(frozen=True)
class Step:
    """One step of a session.

    Args:
        kind: confirm, question, verdict or error.
        decision: the law on the facts so far (for a verdict step: the answer).
        facts: the facts so far.
        fact: the fact a confirm or question step is about.
        question: its question.
        paragraph: the paragraph it comes from.
        choices: its values (for a question, with the verdict each leads to).
        read: for a confirm step, the reader's value with its quote.
        text: for a question, the verdict per answer in words.
        presumed: the value taken if it is left unknown (None: no presumption).
        unconfirmed: for a verdict step, read facts never shown (they could not
            change the verdict).
        message: for an error step, what was wrong.
    """

    kind: StepKind
    decision: LawDecision | None = None
    facts: Facts | None = None
    fact: str | None = None
    question: str = ""
    paragraph: str = ""
    choices: tuple[Choice, ...] = ()
    read: FactValue | None = None
    text: str = ""
    presumed: str | None = None
    unconfirmed: tuple[str, ...] = ()
    message: str = ""

    @classmethod
    def error(cls, message: str, fact: str | None = None) -> Step:
        """An error step (a bad answer; the session goes on)."""
        return cls(StepKind.ERROR, fact=fact, message=message)

    def as_dict(self) -> dict[str, Any]:
        """The step as one JSON object of ``privacy-ci ask --json-steps``."""
        out: dict[str, Any] = {"kind": self.kind.value}
        if self.kind is StepKind.ERROR:
            if self.fact is not None:
                out["fact"] = self.fact
            out["message"] = self.message
            return out
        assert self.decision is not None and self.facts is not None
        if self.kind is StepKind.VERDICT:
            out.update(self.decision.as_dict())
            out["facts"] = self.facts.as_dict()
            out["unconfirmed"] = list(self.unconfirmed)
            out["explanation"] = self.decision.explanation()
            return out
        out.update(fact=self.fact, question=self.question, paragraph=self.paragraph)
        if self.kind is StepKind.CONFIRM:
            assert self.read is not None
            out.update(self.read.as_dict())
            out["label"] = next(c.label for c in self.choices if c.value == self.read.value)
        else:
            out["text"] = self.text
            out["presumed"] = self.presumed
        out["values"] = [c.as_dict() for c in self.choices]
        out["leaning"] = {
            "verdict": self.decision.verdict.value,
            "determined": self.decision.determined,
            "rule": self.decision.rule.as_dict(),
        }
        return out


class Questionnaire:
    """A session of questions about one disclosure (see the module docstring).

    Args:
        regulation: whose facts and law.
        judge: the fact judge whose reader reads a narrative (built on first use;
            a session without a narrative never loads it).
        prefetch: decide the possible answers of the step shown in a background
            thread (call `close` when done, or use the session as a context manager).
    """

    def __init__(
        self, regulation: str = "hipaa", *, judge: FactJudge | None = None, prefetch: bool = False
    ) -> None:
        self.regulation = regulation
        self.book: LawBook = load_law(regulation)
        self.schema = self.book.schema
        # value -> the first value of its class: one decision serves the whole class
        self._rep = {
            fact: {v: group[0] for group in groups for v in group}
            for fact, groups in self.book.classes.items()
        }
        self._judge = judge
        self._facts = Facts(self.schema)
        self._pending: list[str] = []  # read facts awaiting confirmation, schema order
        self._skipped: set[str] = set()  # left unknown by the user: never asked again
        self._decisions: dict[_Key, LawDecision] = {}
        self._step: Step | None = None
        self._prefetch = prefetch
        self._pool: ThreadPoolExecutor | None = None
        self._futures: dict[_Key, Future[LawDecision]] = {}
        self._lock = threading.Lock()
        self.asked: list[str] = []
        """The facts shown (confirm or question), in order."""

    def __enter__(self) -> Questionnaire:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the background decisions (a no-op without `prefetch`)."""
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
            self._futures.clear()

    # -- state -------------------------------------------------------------------------------
    @property
    def facts(self) -> Facts:
        """The facts so far (given, confirmed, answered, and read ones not yet confirmed)."""
        return self._facts

    @property
    def pending(self) -> tuple[str, ...]:
        """Read facts not confirmed yet."""
        return tuple(self._pending)

    @property
    def done(self) -> bool:
        """Whether the current step is the verdict."""
        return self.next_step().kind is StepKind.VERDICT

    def start(
        self,
        narrative: str | None = None,
        facts: Facts | Mapping[str, Any] | None = None,
        flow: Flow | None = None,
    ) -> Step:
        """Begin a session: the given facts, and what the reader finds in `narrative`
        and `flow` (given facts win). Returns the first step.

        Raises:
            FactError: a given fact or value is unknown (naming it).
        """
        if facts is None:
            given = Facts(self.schema)
        elif isinstance(facts, Facts):
            given = facts
        else:
            given = Facts.from_mapping(self.schema, facts)
        read = Facts(self.schema)
        if (narrative and narrative.strip()) or flow is not None:
            read = self._reader().read(narrative, flow)
        self._facts = read.with_facts(dict(given))
        self._pending = [
            name
            for name, fact in self._facts.items()
            if name not in given and fact.source in _UNTRUSTED
        ]
        self._skipped = set()
        self.asked = []
        self._step = None
        return self.next_step()

    def _reader(self) -> FactJudge:
        if self._judge is None:
            from privacy_ci.reasoning._judge import FactJudge

            self._judge = FactJudge(self.regulation)
        return self._judge

    # -- answers -----------------------------------------------------------------------------
    def answer(self, fact: str, value: str | None) -> None:
        """State a fact (any fact, at any time); None leaves it unknown (`reject`).

        Raises:
            FactError: an unknown fact or value (naming it and what is allowed).
        """
        if value is None:
            self.reject(fact)
            return
        self.schema.check(fact, value)
        before = self._facts.get(fact)
        if fact in self._pending and before is not None and before.value == value:
            self.confirm(fact)  # the same value: a confirmation, quote kept
            return
        self._set(fact, FactValue(value, Source.GIVEN, note="answered in ask"))

    def confirm(self, fact: str) -> None:
        """Take a read fact as given (its quote kept).

        Raises:
            FactError: the fact is unknown, or has no read value awaiting confirmation.
        """
        self.schema.spec(fact)
        if fact not in self._pending:
            waiting = ", ".join(self._pending) or "none"
            raise FactError(
                f"fact {fact!r} has no read value awaiting confirmation (awaiting: {waiting})"
            )
        read = self._facts[fact]
        how = f"confirmed; {read.note}" if read.note else "confirmed"
        self._set(fact, replace(read, source=Source.GIVEN, note=how))

    def reject(self, fact: str) -> None:
        """Leave a fact unknown (clearing a read or earlier value); it is not asked again.

        Raises:
            FactError: the fact is unknown.
        """
        self.schema.spec(fact)
        self._facts = self._facts.without([fact])
        self._pending = [f for f in self._pending if f != fact]
        self._skipped.add(fact)
        self._step = None

    def _set(self, fact: str, value: FactValue) -> None:
        self._facts = self._facts.with_facts({fact: value})
        self._pending = [f for f in self._pending if f != fact]
        self._skipped.discard(fact)
        self._step = None

    # -- steps -------------------------------------------------------------------------------
    def decision(self) -> LawDecision:
        """The law on the facts so far (remembered per set of values)."""
        return self._rebind(self._decide(self._facts))

    def _key(self, facts: Facts) -> _Key:
        return tuple((k, self._rep[k].get(v, v)) for k, v in facts.plain().items())

    def _decide(self, facts: Facts) -> LawDecision:
        key = self._key(facts)
        waiting: Future[LawDecision] | None = None
        with self._lock:
            found = self._decisions.get(key)
            if found is None:
                future = self._futures.pop(key, None)
                if future is not None and not future.cancel():
                    waiting = future  # being decided now: wait for it
                for other in self._futures.values():  # needed now: nothing queued first
                    other.cancel()
                self._futures.clear()
        if found is not None:
            return found
        found = waiting.result() if waiting is not None else apply_law(self.book, facts)
        with self._lock:
            self._decisions[key] = found
        return found

    def _background(self, key: _Key, facts: Facts) -> LawDecision:
        found = apply_law(self.book, facts)
        with self._lock:
            self._decisions.setdefault(key, found)
            self._futures.pop(key, None)
        return found

    def _rebind(self, found: LawDecision) -> LawDecision:
        """A remembered decision told with the current facts' values and provenance (the
        same class of values, or a confirmation: the same law, other words)."""
        facts = self._facts
        used = {k: facts.get(k, v) for k, v in found.used.items()}
        misses = tuple(
            replace(
                miss,
                failing=tuple(
                    (f, facts.value(f) if f in facts else v, needs) for f, v, needs in miss.failing
                ),
            )
            for miss in found.near_misses
        )
        return replace(found, used=used, near_misses=misses, facts=facts)

    def _prefetch_answers(self, fact: str) -> None:
        """Decide, in the background, each answer the user may give about `fact`."""
        if not self._prefetch:
            return
        options = [self._facts.without([fact])]
        for group in self.book.classes[fact]:
            options.append(self._facts.with_facts({fact: FactValue(group[0], Source.GIVEN)}))
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(1, thread_name_prefix="ask-prefetch")
            for facts in options:
                key = self._key(facts)
                if key not in self._decisions and key not in self._futures:
                    self._futures[key] = self._pool.submit(self._background, key, facts)

    def next_step(self) -> Step:
        """The current step: a confirmation, a question, or the verdict."""
        if self._step is None:
            self._step = self._compute()
            if self._step.fact is not None and self._step.kind is not StepKind.VERDICT:
                self.asked.append(self._step.fact)
                self._prefetch_answers(self._step.fact)
        return self._step

    def verdict(self) -> Step:
        """The verdict step on the facts so far, whatever is left to ask."""
        decision = self.decision()
        return Step(StepKind.VERDICT, decision, self._facts, unconfirmed=tuple(self._pending))

    def _compute(self) -> Step:
        decision = self.decision()
        for name in self._pending:  # schema order: the flow's facts first
            if self._matters(name, decision):
                return self._confirm_step(name, decision)
        if decision.determined:
            return self.verdict()
        for question in decision.questions:
            if question.fact not in self._skipped and question.fact not in self._facts:
                return self._question_step(question, decision)
        return self.verdict()

    def _matters(self, name: str, decision: LawDecision) -> bool:
        """Whether the verdict rests on a read fact: its rule reads it, or another value
        of it would change the verdict on the facts and presumptions."""
        if name in decision.used:
            return True
        on = {**self._facts.plain()}
        for spec in self.schema:
            if spec.presume is not None and spec.name not in on:
                on[spec.name] = spec.presume
        current = on[name]
        for group in self.book.classes[name]:
            if current in group:
                continue
            if self._first_rule({**on, name: group[0]}).effect.verdict is not decision.verdict:
                return True
        return False

    def _first_rule(self, known: Mapping[str, str]) -> Rule:
        """The first rule that applies (one that still hinges on an unknown fact is not)."""
        for rule in self.book.rules:
            if rule.status(known) is True:
                return rule
        return self.book.default

    def _choices(self, fact: str, question: Question | None = None) -> tuple[Choice, ...]:
        spec = self.schema.spec(fact)
        leads: dict[str, tuple[tuple[Verdict, ...], str | None]] = {}
        for branch in question.branches if question is not None else ():
            for value in branch.values:
                # a rule is named only where this one answer decides by it
                sole = branch.rule is not None and len(branch.values) == 1
                leads[value] = (branch.verdicts, branch.rule.id if sole and branch.rule else None)
        return tuple(
            Choice(v.name, v.label, v.description, *leads.get(v.name, ((), None)))
            for v in spec.values.values()
        )

    def _confirm_step(self, name: str, decision: LawDecision) -> Step:
        spec = self.schema.spec(name)
        return Step(
            StepKind.CONFIRM,
            decision,
            self._facts,
            fact=name,
            question=spec.question,
            paragraph=spec.paragraph,
            choices=self._choices(name),
            read=self._facts[name],
            presumed=spec.presume,
        )

    def _question_step(self, question: Question, decision: LawDecision) -> Step:
        spec = self.schema.spec(question.fact)
        return Step(
            StepKind.QUESTION,
            decision,
            self._facts,
            fact=question.fact,
            question=spec.question,
            paragraph=spec.paragraph,
            choices=self._choices(question.fact, question),
            text=question.text,
            presumed=spec.presume,
        )
