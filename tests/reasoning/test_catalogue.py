"""The packaged HIPAA condition catalogue: structure, coverage, cue hygiene, and the
loader's messages for malformed files."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from privacy_ci.knowledge import KnowledgeBase, load_knowledge_base
from privacy_ci.reasoning import Catalogue, CatalogueError, Effect, load_catalogue

# Every norm group that governs uses and disclosures, as paragraph prefixes: each must
# be the paragraph of an entry, a condition or a ground.
REQUIRED_PARAGRAPHS = (
    "164.502(a)",
    "164.502(a)(5)(i)",
    "164.502(a)(5)(ii)",
    "164.502(b)",
    "164.502(e)",
    "164.502(g)",
    "164.504(e)",
    "164.504(f)",
    "164.506(b)",
    "164.506(c)(1)",
    "164.506(c)(2)",
    "164.506(c)(3)",
    "164.506(c)(4)",
    "164.508(a)(1)",
    "164.508(a)(2)",
    "164.508(a)(3)",
    "164.508(a)(4)",
    "164.508(c)",
    "164.510(a)",
    "164.510(b)",
    "164.512(a)",
    "164.512(b)",
    "164.512(c)",
    "164.512(d)",
    "164.512(e)(1)(i)",
    "164.512(e)(1)(ii)",
    "164.512(f)(1)(ii)(A)",
    "164.512(f)(1)(ii)(C)",
    "164.512(f)(2)",
    "164.512(f)(3)",
    "164.512(f)(4)",
    "164.512(f)(5)",
    "164.512(f)(6)",
    "164.512(g)(1)",
    "164.512(g)(2)",
    "164.512(h)",
    "164.512(i)(1)(i)",
    "164.512(i)(1)(ii)",
    "164.512(i)(1)(iii)",
    "164.512(j)",
    "164.512(k)",
    "164.512(l)",
    "164.514(a)",
    "164.514(b)",
    "164.514(e)",
    "164.522(a)",
    "164.522(b)",
    "164.524",
)

# Where the text prohibits, a prohibiting entry must say so.
REQUIRED_PROHIBITIONS = (
    "164.502(a)",
    "164.502(a)(5)(i)",
    "164.502(a)(5)(ii)",
    "164.508(a)(2)",
    "164.508(a)(3)",
)


@pytest.fixture(autouse=True)
def _data(shared_data: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PRIVACY_CI_DATA", str(shared_data))


# Phrases the brief for the catalogue names although the regulation words them
# differently ("written contract or other written agreement ... with the business
# associate"), and the everyday adjective for the rule's "mental health" (a
# psychiatric record is health information; the rule never uses the word); every
# other cue must be the regulation's or the annotations' wording.
NOT_VERBATIM = frozenset({"business associate agreement", "psychiatric"})


@pytest.fixture(scope="module")
def kb(shared_data: Path) -> KnowledgeBase:
    return load_knowledge_base("hipaa")


@pytest.fixture(scope="module")
def catalogue(kb: KnowledgeBase) -> Catalogue:
    return load_catalogue("hipaa", kb=kb)


def under(paragraph: str, prefix: str) -> bool:
    return paragraph == prefix or (paragraph.startswith(prefix) and paragraph[len(prefix)] == "(")


def every_cue(catalogue: Catalogue) -> list[tuple[str, str]]:
    """(where, phrase) for every phrase the engine matches against a narrative."""
    app = catalogue.applicability
    out = [("applicability.information_cues", c) for c in app.information_cues]
    for g in app.grounds:
        out += [(f"ground {g.id}", c) for c in (*g.cues.met, *g.cues.not_met)]
    for n in catalogue.norms:
        out += [(f"{n.id} purposes", p) for p in n.pattern.purposes]
        for c in n.conditions:
            out += [(f"condition {c.id}", p) for p in (*c.cues.met, *c.cues.not_met)]
    return out


# ------------------------------------------------------------------------ structure
def test_structure(catalogue: Catalogue) -> None:
    assert catalogue.regulation == "hipaa"
    conditions = [c for n in catalogue.norms for c in n.conditions]
    assert 45 <= len(catalogue.norms) <= 80
    assert 60 <= len(conditions) <= 120
    ids = [n.id for n in catalogue.norms] + [c.id for c in conditions]
    ids += [g.id for g in catalogue.applicability.grounds]
    assert len(ids) == len(set(ids)), "an id is used twice"
    for item in (*conditions, *catalogue.applicability.grounds):
        assert item.question.endswith("?"), item.id
    for cond in conditions:
        assert cond.cues.met, f"condition {cond.id} has no cue that states it as met"
    for norm in catalogue.norms:
        assert norm.title.strip(), norm.id
        if norm.effect is Effect.PROHIBIT:
            # a prohibition without conditions would forbid every flow its pattern fits
            assert norm.conditions, norm.id


def test_applicability(catalogue: Catalogue) -> None:
    app = catalogue.applicability
    assert {"cover entity", "business associate"} <= set(app.senders)
    assert app.information and app.information_cues
    grounds = {g.id: g.paragraph for g in app.grounds}
    assert grounds["employment-record"] == "160.103(Protected health information)(2)(iii)"
    assert grounds["education-record"] == "160.103(Protected health information)(2)(i)"
    assert "sender-not-covered" in grounds and "individual-own-information" in grounds
    # de-identification is governed by 164.514 (a permitting entry), not a ground: the
    # development cases label de-identified and limited data set flows permitted
    assert not any(under(p, "164.514") for p in grounds.values())
    assert catalogue.norm("164.514(b)-de-identified-information").effect is Effect.PERMIT
    assert "limited data set" in app.identifying_cues


def test_covers_every_norm_group(catalogue: Catalogue) -> None:
    paragraphs = [n.paragraph for n in catalogue.norms]
    paragraphs += [c.paragraph for n in catalogue.norms for c in n.conditions]
    paragraphs += [g.paragraph for g in catalogue.applicability.grounds]
    missing = [p for p in REQUIRED_PARAGRAPHS if not any(under(q, p) for q in paragraphs)]
    assert not missing, f"no entry, condition or ground for {missing}"
    prohibiting = [n for n in catalogue.norms if n.effect is Effect.PROHIBIT]
    missing = [
        p
        for p in REQUIRED_PROHIBITIONS
        if not any(
            under(n.paragraph, p) or any(under(c.paragraph, p) for c in n.conditions)
            for n in prohibiting
        )
    ]
    assert not missing, f"no prohibiting entry for {missing}"


def test_cues_are_short_phrases(catalogue: Catalogue) -> None:
    long = [(where, cue) for where, cue in every_cue(catalogue) if len(cue.split()) > 4]
    assert not long, f"cues are 1-4 words: {long}"


_DROP = frozenset({"a", "an", "the", "such", "its", "their", "s"})


def _stem(word: str) -> str:
    """A light stemmer: enough for "signed"/"sign", "objections"/"objection"."""
    for suffix in ("ies", "ied", "ing", "ed", "es", "s"):
        if word.endswith(suffix) and not word.endswith("ss") and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)] + ("y" if suffix in ("ies", "ied") else "")
            break
    return word[:-1] if word.endswith("e") and len(word) > 4 else word


def _words(text: str) -> str:
    return (
        " "
        + " ".join(_stem(w) for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in _DROP)
        + " "
    )


def test_cues_come_from_the_regulation(kb: KnowledgeBase, catalogue: Catalogue) -> None:
    """Every cue and purpose is the regulation's or the KB annotations' own wording (or a
    plain inflection of it): contiguous words of a tree node, an annotation or a graph term."""
    texts = [node.text for node in kb.tree.nodes.values()]
    for norm in kb.norms.values():
        texts += [f for f in (norm.information_type, norm.purpose, norm.consent_form) if f]
        texts += [f for f in (norm.sender_role, norm.recipient_role, norm.subject_role) if f]
        texts += [*norm.sender, *norm.recipient, *norm.subject]
    for graph in (kb.role_graph, kb.attribute_graph):
        assert graph is not None
        texts += list(graph.terms)
    corpus = "|".join(_words(t) for t in texts)  # "|": no phrase spans two texts
    foreign = [
        (where, cue)
        for where, cue in every_cue(catalogue)
        if cue not in NOT_VERBATIM and _words(cue) not in corpus
    ]
    assert not foreign, f"cues not found in the regulation or its annotations: {foreign}"


def test_no_long_cue_occurs_in_a_real_case(catalogue: Catalogue) -> None:
    """Cues come from the regulation, never from case narratives: no phrase of five or
    more words may be found in a GoldCoin real case (the only place real cases are read)."""
    from privacy_ci.cases import load_dataset

    texts = [
        " ".join(case.text.lower().split()) for case in load_dataset("real", resolve_gold=False)
    ]
    assert texts
    leaked = [
        (where, cue)
        for where, cue in every_cue(catalogue)
        if len(cue.split()) >= 5 and any(" ".join(cue.lower().split()) in t for t in texts)
    ]
    assert not leaked, f"cue phrases found in real case texts: {leaked}"


# ------------------------------------------------------------------- malformed files
GOOD = """\
regulation: hipaa
version: 1
applicability:
  paragraph: 160.103(Protected health information)
  senders: [cover entity]
  information: [medical health]
  grounds:
    - id: employment-record
      paragraph: 160.103(Protected health information)(2)(iii)
      question: Is it an employment record?
      cues:
        met: [employment record]
norms:
  - id: 164.512(a)-required-by-law
    paragraph: 164.512(a)
    title: Required by law
    effect: permit
    pattern:
      recipients: [health care provider]
      information: [health]
    conditions:
      - id: required-by-law
        paragraph: 164.512(a)(1)
        question: Is the disclosure required by law?
        cues:
          met: [required by law]
"""

ENTRY = "norms[0] (id '164.512(a)-required-by-law')"
SECOND = GOOD[GOOD.index("  - id: 164.512(a)") :]


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "catalogue.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_good_file_loads(tmp_path: Path, kb: KnowledgeBase) -> None:
    cat = load_catalogue(write(tmp_path, GOOD), kb=kb)
    assert cat.norm("164.512(a)-required-by-law").conditions[0].cues.met == ("required by law",)
    assert list(cat.conditions()) == ["required-by-law"]


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        pytest.param(
            "paragraph: 164.512(a)(1)",
            "paragraph: 164.599(z)(9)",
            [f"{ENTRY}.conditions[0] (id 'required-by-law'): field paragraph", "'164.599(z)(9)'"],
            id="unknown-condition-paragraph",
        ),
        pytest.param(
            "paragraph: 164.512(a)\n",
            "paragraph: 164.512(q)\n",
            [f"{ENTRY}: field paragraph", "'164.512(q)' is not a node of the tree"],
            id="unknown-entry-paragraph",
        ),
        pytest.param(
            "(2)(iii)\n",
            "(2)(ix)\n",
            ["applicability.grounds[0] (id 'employment-record'): field paragraph"],
            id="unknown-ground-paragraph",
        ),
        pytest.param(
            "recipients: [health care provider]",
            "recipients: [astronaut]",
            [f"{ENTRY}: field pattern.recipients", "'astronaut' is not a term of the role graph"],
            id="unknown-role",
        ),
        pytest.param(
            "senders: [cover entity]",
            "senders: [space agency]",
            ["applicability: field senders", "'space agency' is not a term of the role graph"],
            id="unknown-applicability-role",
        ),
        pytest.param(
            "information: [health]",
            "information: [moon dust]",
            [f"{ENTRY}: field pattern.information", "'moon dust' is not a term of the attribute"],
            id="unknown-attribute",
        ),
        pytest.param(
            "        question: Is the disclosure required by law?\n",
            "",
            [f"{ENTRY}: field conditions.0.question", "Field required"],
            id="missing-question",
        ),
        pytest.param(
            "Is the disclosure required by law?",
            "The disclosure is required by law.",
            [f"{ENTRY}: field conditions.0.question", "ends with '?'"],
            id="question-without-question-mark",
        ),
        pytest.param(
            "version: 1\n",
            "version: first\n",
            ["field version", "valid integer"],
            id="wrong-type-version",
        ),
        pytest.param(
            "met: [required by law]",
            "met: required by law",
            [f"{ENTRY}: field conditions.0.cues.met", "list of phrases"],
            id="wrong-type-cues",
        ),
        pytest.param(
            "met: [required by law]",
            "met: [{law: required}]",
            [f"{ENTRY}: field conditions.0.cues.met", "must be a string"],
            id="wrong-type-phrase",
        ),
        pytest.param(
            "effect: permit",
            "effect: allow",
            [f"{ENTRY}: field effect"],
            id="unknown-effect",
        ),
        pytest.param(
            "    title: Required by law\n",
            "    title: Required by law\n    note: extra\n",
            [f"{ENTRY}: field note", "Extra inputs"],
            id="unknown-field",
        ),
        pytest.param(
            "    effect: permit\n",
            "    effect: permit\n    effect: prohibit\n",
            [f"{ENTRY}: duplicate key 'effect' at line 18 (first at line 17)"],
            id="duplicate-key",
        ),
        pytest.param(
            "met: [required by law]",
            "met: [required by law",
            ["not valid YAML", "line"],
            id="bad-yaml",
        ),
    ],
)
def test_malformed_file_names_the_place(
    tmp_path: Path, kb: KnowledgeBase, old: str, new: str, expected: list[str]
) -> None:
    assert old in GOOD
    path = write(tmp_path, GOOD.replace(old, new, 1))
    with pytest.raises(CatalogueError) as info:
        load_catalogue(path, kb=kb)
    message = str(info.value)
    assert message.startswith(str(path)), message
    for part in expected:
        assert part in message, message
    assert len(message.splitlines()) == 1, f"one problem, one line: {message}"


def test_duplicate_ids_name_both_places(tmp_path: Path, kb: KnowledgeBase) -> None:
    path = write(tmp_path, GOOD + SECOND)
    with pytest.raises(CatalogueError) as info:
        load_catalogue(path, kb=kb)
    lines = str(info.value).splitlines()
    assert len(lines) == 2, lines
    assert "norms[1]: norm id '164.512(a)-required-by-law' is used twice" in lines[0]
    assert "condition id 'required-by-law' is used twice" in lines[1]
    assert "norms[0]" in lines[1]


def test_every_problem_is_reported(tmp_path: Path, kb: KnowledgeBase) -> None:
    text = GOOD.replace("recipients: [health care provider]", "recipients: [astronaut]")
    text = text.replace("paragraph: 164.512(a)(1)", "paragraph: 164.599(z)(9)")
    with pytest.raises(CatalogueError) as info:
        load_catalogue(write(tmp_path, text), kb=kb)
    message = str(info.value)
    assert "astronaut" in message and "164.599(z)(9)" in message


def test_empty_or_missing_catalogue(tmp_path: Path, kb: KnowledgeBase) -> None:
    head = GOOD[: GOOD.index("norms:")]
    with pytest.raises(CatalogueError, match="at least one norm entry"):
        load_catalogue(write(tmp_path, head + "norms: []\n"), kb=kb)
    with pytest.raises(CatalogueError, match="expected a mapping"):
        load_catalogue(write(tmp_path, "- a list\n"))
    with pytest.raises(CatalogueError, match="file not found"):
        load_catalogue(tmp_path / "absent.yaml")
    with pytest.raises(CatalogueError, match="file not found"):
        load_catalogue("gdpr")
