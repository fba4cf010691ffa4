"""The offline fact reader (`FactReader`): each fact read from positive, negated,
paraphrased and hypothetical sentences, negation bounded by the dependency parse, the
CI fields read by their head nouns and meaning, and every fact's quote pointing into
the narrative. The sentences are written for these tests from the regulation's
vocabulary; none comes from an evaluation set."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from privacy_ci.ci import Flow, Party, TransmissionPrinciple
from privacy_ci.reasoning import FactReader, Source

# (fact, sentence, the value read; None: not read, the fact stays unknown)
SENTENCES = [
    # authorization: signed in many words, denied in many words, not covering
    ("authorization", "Before the records went out, the patient signed a HIPAA release naming her lawyer.", "valid"),
    ("authorization", "Mr. Diaz put his signature on the clinic's authorization form that morning.", "valid"),
    ("authorization", "The release had been signed by the patient two weeks earlier.", "valid"),
    ("authorization", "She gave the office written permission to send the file to her insurer.", "valid"),
    ("authorization", "No release was ever signed.", "absent"),
    ("authorization", "The patient refused to sign the authorization.", "absent"),
    ("authorization", "He never signed anything allowing the disclosure.", "absent"),
    ("authorization", "The clinic had no authorization from the patient.", "absent"),
    ("authorization", "Her authorization had expired the month before.", "not_covering"),
    ("authorization", "Not one of the residents ever signed anything for the newsletter.", "absent"),
    ("authorization", "Nobody asked the patients to sign an authorization.", "absent"),
    ("authorization", "Neither he nor his wife put anything in writing.", "absent"),
    ("authorization", "The consent form sat in his folder, unsigned, for a month.", "absent"),
    ("authorization", "In March she sent a letter taking that permission back.", "not_covering"),
    ("authorization", "The ethics board approved a waiver of authorization for the study.", None),
    ("authorization", "He revoked the authorization in a letter to the practice.", "not_covering"),
    # asked to sign is no signing
    ("authorization", "The nurse asked her to sign a release, but she declined.", None),
    # legal process: who signed what, and requests that are only promised
    ("legal_process", "A judge signed an order directing the hospital to produce the chart.", "court_order"),
    ("legal_process", "The court ordered the clinic to hand over the records.", "court_order"),
    ("legal_process", "Detectives arrived with a search warrant for the pharmacy's files.", "warrant"),
    ("legal_process", "The request came as a subpoena from the grand jury.", "grand_jury_subpoena"),
    ("legal_process", "Opposing counsel served a subpoena for the records.", "subpoena_without_assurances"),
    ("legal_process", "The officer phoned and asked for the patient's chart.", "informal_request"),
    ("legal_process", "The detective said a warrant would arrive later that week.", None),
    # the individual's response
    ("individual_response", "The patient told the nurse it was fine to update her daughter.", "agreed"),
    ("individual_response", "He asked the doctor not to tell his wife anything.", "objected"),
    ("individual_response", "She objected to any call to her employer.", "objected"),
    ("individual_response", "The man was unconscious when the ambulance brought him in.", "incapacitated_or_emergency"),
    ("individual_response", "Nobody asked the patient whether she minded.", "not_given_chance"),
    ("individual_response", "She did not object when the nurse mentioned calling her son.", "did_not_object"),
    # who is negated decides: the asking ("was not asked") or what was asked for
    ("individual_response", "The volunteer, who was never asked and signed nothing, was furious.", "not_given_chance"),
    ("individual_response", "Weeks before, she had asked that nothing about the pregnancy reach her father.", "objected"),
    ("individual_response", "He was asked only to consent to the surgery; no one asked him about his family.", "not_given_chance"),
    ("individual_response", "The form said she could ask not to be listed; she returned it without asking for anything.", "did_not_object"),
    ("individual_response", "The psychologist keeps her process notes apart from the billing file.", None),
    # required by law: a law's requirement, and its absence said in several ways
    ("required_by_law", "State law requires clinics to report every case of measles.", "yes"),
    ("required_by_law", "A state statute obliges hospitals to report dog bites to animal control.", "yes"),
    ("required_by_law", "No law required the report.", "no"),
    ("required_by_law", "Nothing in the state's code calls for such reports.", "no"),
    # restrictions
    ("restriction", "The clinic agreed to her request to restrict disclosures to her parents.", "agreed_restriction"),
    ("restriction", "He paid for the visit out of pocket and asked that his insurer not be billed.", "self_pay_restriction"),
    ("restriction", "The practice refused to accept any restriction on its disclosures.", None),
    # remuneration, and a copying fee that is none
    ("remuneration", "The pharmacy sold the list of customers to a marketing firm.", "yes"),
    ("remuneration", "The drug maker paid the clinic fifty dollars for each patient name.", "yes"),
    ("remuneration", "The clinic received nothing for the data.", "no"),
    ("remuneration", "The hospital charged only the usual cost-based fee for copying the records.", None),
    # a serious threat
    ("serious_threat", "The patient said he would shoot his supervisor the next day.", "yes"),
    ("serious_threat", "She threatened to kill her neighbor.", "yes"),
    ("serious_threat", "He made no threat against anyone.", "no"),
    # agreements
    ("business_associate_agreement", "The vendor had signed a business associate agreement with the clinic.", "present"),
    ("business_associate_agreement", "There was no business associate agreement with the transcription firm.", "absent"),
    ("data_use_agreement", "The university signed a data use agreement before receiving the file.", "present"),
    ("data_use_agreement", "The data use agreement was never signed.", "absent"),
    # research: a waiver approved, and one only applied for
    ("research_approval", "The institutional review board approved a waiver of authorization for the study.", "irb_waiver"),
    ("research_approval", "The study's application to the review board was still pending.", None),
    ("minimum_necessary", "The clinic sent the whole chart, although the insurer needed only one lab result.", "exceeded"),
    ("subject_deceased", "The patient died in the intensive care unit on Sunday.", "yes"),
]  # fmt: skip

# narrower information than the field's "medical records", stated in the narrative
NARROWING = [
    ("The therapist's session notes, kept apart from the chart, were sent.", "psychotherapy_notes"),
    (
        "Every name, address and record number was stripped from the file before it went out.",
        "de_identified",
    ),
    ("The man died in 1961, and his old hospital file was sent in 2024.", "decedent_over_50"),
]


@pytest.fixture(scope="module")
def reader() -> FactReader:
    return FactReader()


@pytest.mark.parametrize(("fact", "sentence", "value"), SENTENCES)
def test_each_fact_read_from_a_sentence(
    reader: FactReader, fact: str, sentence: str, value: str | None
) -> None:
    facts = reader.read(sentence)
    assert facts.value(fact) == value, (fact, sentence, facts.get(fact))
    if value is not None:
        read = facts[fact]
        assert read.source is Source.READ
        assert read.start is not None and read.end is not None
        assert sentence[read.start : read.end] == read.quote  # the quote is the narrative's
        assert read.note  # how it was read: a cue, a frame, a meaning


@pytest.mark.parametrize(("sentence", "value"), NARROWING)
def test_the_narrative_narrows_the_information_a_field_names(
    reader: FactReader, sentence: str, value: str
) -> None:
    facts = reader.read(sentence, Flow(information_type="medical records"))
    assert facts.value("information") == value


def test_a_negation_reaches_only_its_own_statement(reader: FactReader) -> None:
    # the court order is stated plainly; the negation belongs to another clause
    facts = reader.read(
        "The judge ordered the clinic to produce the chart, and the patient did not sign"
        " any release."
    )
    assert facts.value("legal_process") == "court_order"
    assert facts.value("authorization") == "absent"
    # a negated statement elsewhere in the sentence leaves a signed release signed
    facts = reader.read("She signed the release, not knowing where the records would go.")
    assert facts.value("authorization") == "valid"


def test_a_protective_order_against_a_person_is_no_qualified_protective_order(
    reader: FactReader,
) -> None:
    collision = reader.read(
        "The lawyer's letter mentioned a protective order, but that was the order she had"
        " obtained against her ex-husband."
    )
    assert collision.value("legal_process") != "subpoena_with_assurances"
    qualified = reader.read("The parties obtained a qualified protective order for the records.")
    assert qualified.value("legal_process") == "subpoena_with_assurances"


@pytest.mark.parametrize(
    ("field", "text", "fact", "value"),
    [
        ("sender", "Healthcare Provider", "holder", "covered_entity"),
        ("sender", "staff member of the hospital", "holder", "covered_entity"),
        ("sender", "life insurance company", "holder", "other"),
        ("sender", "Security Guard", "holder", "other"),
        ("recipient", "the patient's family doctor", "recipient", "health_care_provider"),
        ("recipient", "police department", "recipient", "law_enforcement"),
        ("recipient", "outside billing company", "recipient", "business_associate"),
        ("recipient", "the patient's adult son", "recipient", "family_or_friend"),
        ("purpose", "workers' compensation claim", "purpose", "workers_compensation"),
        ("purpose", "evidence in a personal injury lawsuit", "purpose", "judicial_proceeding"),
        ("information_type", "credit report", "information", "not_health"),
        ("information_type", "psychotherapy notes", "information", "psychotherapy_notes"),
        ("information_type", "de-identified health information", "information", "de_identified"),
    ],
)
def test_ci_fields_are_read_by_their_heads_and_meaning(
    reader: FactReader, field: str, text: str, fact: str, value: str
) -> None:
    flow = {
        "sender": Flow(sender=Party(role=text)),
        "recipient": Flow(recipient=Party(role=text)),
        "purpose": Flow(principle=TransmissionPrinciple(purpose=text)),
        "information_type": Flow(information_type=text),
    }[field]
    facts = reader.read_fields(flow)
    assert facts.value(fact) == value
    assert facts[fact].source is Source.GIVEN and facts[fact].quote == text


def test_a_covered_entitys_records_are_health_information(reader: FactReader) -> None:
    """Applicability from the holder and the information, not from a list of health
    words: what a hospital holds about its patients is health information even when the
    field does not say so."""
    flow = Flow(sender=Party(role="hospital"), information_type="orthopedic treatment records")
    assert reader.read_fields(flow).value("information") == "phi"
    flow = Flow(sender=Party(role="hospital"), information_type="emergency visit records")
    assert reader.read_fields(flow).value("information") == "phi"


def test_the_flow_is_read_from_the_narrative_when_no_field_gives_it(reader: FactReader) -> None:
    facts = reader.read("The clinic faxed her lab results to her employer.")
    assert facts.value("holder") == "covered_entity"
    assert facts.value("recipient") == "employer"
    assert facts.value("information") == "phi"
    assert facts["recipient"].quote == "her employer"


@pytest.mark.parametrize(
    ("sentence", "recipient"),
    [
        # the small parser hangs "to ..." on the information, or reads the second
        # object of "sent X Y" as X's apposition: the recipient is still found
        (
            "A charge nurse faxed a summary of the chart and the circumstances of the death"
            " to the county medical examiner's office, which certifies causes of death.",
            "coroner_or_funeral_director",
        ),
        (
            "The nurse manager sent the county health department, which tracks outbreaks,"
            " the boy's name and the dates he was contagious.",
            "public_health_authority",
        ),
    ],
)
def test_the_recipient_is_found_where_the_parser_misplaces_it(
    reader: FactReader, sentence: str, recipient: str
) -> None:
    facts = reader.read(sentence)
    assert facts.value("recipient") == recipient, facts.get("recipient")


def test_no_judges_signature_is_no_order(reader: FactReader) -> None:
    facts = reader.read("No judge had signed anything; the lawyer simply sent a letter.")
    assert facts.value("legal_process") not in ("court_order", "warrant")


def test_a_hypothetical_subpoena_is_no_subpoena(reader: FactReader) -> None:
    facts = reader.read(
        "Staff heard that a subpoena might be coming, but none ever arrived; the"
        " attorney's email was the only request."
    )
    assert facts.value("legal_process") != "subpoena_without_assurances"


class _CountingEmbedder:
    """A stand-in embedding model (a unit test of the cache, not of reading quality)."""

    model = "counting@test"

    def __init__(self) -> None:
        self.calls: list[int] = []

    def encode(self, texts: list[str]) -> np.ndarray:
        self.calls.append(len(texts))
        rng = np.random.default_rng(len(texts))
        return rng.normal(size=(len(texts), 8)).astype(np.float32)


def test_the_guides_example_vectors_are_embedded_once_per_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PRIVACY_CI_CACHE", str(tmp_path))
    first = _CountingEmbedder()
    rows, bank = FactReader(embedder=first)._bank  # type: ignore[arg-type]
    assert first.calls and first.calls[0] == len({r[2] for r in rows})
    again = _CountingEmbedder()
    rows2, bank2 = FactReader(embedder=again)._bank  # type: ignore[arg-type]
    assert again.calls == [] and rows2 == rows  # read from the cache, not embedded
    assert np.array_equal(bank, bank2)
    # another model's vectors are never reused
    other = _CountingEmbedder()
    other.model = "another@test"
    assert FactReader(embedder=other)._bank[0] == rows  # type: ignore[arg-type]
    assert other.calls
    # a damaged cache entry is rebuilt, not an error
    for npy in tmp_path.rglob("examples.npy"):
        npy.write_bytes(b"not an array")
    fixed = _CountingEmbedder()
    fixed.model = "another@test"
    assert FactReader(embedder=fixed)._bank[0] == rows  # type: ignore[arg-type]
    assert fixed.calls
