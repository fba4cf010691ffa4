"""Facts, then law: the model-free judge behind the ``ci-reasoner`` method.

A regulation's fact model (``facts/<regulation>.yaml``: the facts of a disclosure,
their values, questions and presumptions), its law book (``law/<regulation>.yaml``:
rules over the facts, in precedence order) and the offline reader's guide
(``reading/<regulation>.yaml``). `FactJudge` reads the facts of a case (given facts
win) and applies the law; `Questionnaire` asks for the facts the verdict still needs.

    from privacy_ci.reasoning import FactJudge
    judge = FactJudge("hipaa")
    judgment = judge.judge("A hospital sent ...", flow)   # facts read, then the law
    print(judgment.verdict, judgment.decision.rule.id, judgment.determined)
    print(judgment.explanation())   # the facts used with their quotes, the open questions
"""

from privacy_ci.reasoning._ask import Choice, Questionnaire, Step, StepKind
from privacy_ci.reasoning._facts import (
    FactError,
    Facts,
    FactSchema,
    FactSpec,
    FactValue,
    Source,
    ValueSpec,
    load_fact_schema,
    load_facts_file,
    parse_fact_args,
)
from privacy_ci.reasoning._judge import FactJudge, FactJudgment
from privacy_ci.reasoning._law import (
    PRECEDENCE,
    Branch,
    LawBook,
    LawDecision,
    NearMiss,
    Question,
    Rule,
    apply_law,
    load_law,
)
from privacy_ci.reasoning._nlp import NLPUnavailable
from privacy_ci.reasoning._reading import FactReader, load_reading_guide

__all__ = [
    "PRECEDENCE",
    "Branch",
    "Choice",
    "FactError",
    "FactJudge",
    "FactJudgment",
    "FactReader",
    "FactSchema",
    "FactSpec",
    "FactValue",
    "Facts",
    "LawBook",
    "LawDecision",
    "NLPUnavailable",
    "NearMiss",
    "Question",
    "Questionnaire",
    "Rule",
    "Source",
    "Step",
    "StepKind",
    "ValueSpec",
    "apply_law",
    "load_fact_schema",
    "load_facts_file",
    "load_law",
    "load_reading_guide",
    "parse_fact_args",
]
