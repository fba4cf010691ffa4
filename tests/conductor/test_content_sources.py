"""Where a corpus's documents come from: generated from ``content/`` templates (Riverside),
or plain files in ``documents/`` (a user's corpus); a corpus with neither says so."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from privacy_ci.cli.main import app
from privacy_ci.conductor import (
    ContentSource,
    Corpus,
    DocumentFolder,
    GeneratedContent,
    corpus_digest,
    load_corpus,
    render_corpus,
    render_document,
    riverside_dir,
    write_corpus_documents,
)
from privacy_ci.conductor._content import DOCUMENT_TYPES
from privacy_ci.errors import PrivacyCIError
from privacy_ci.labeling._labeler import render_user_prompt

# corpus_digest(render_corpus(load_corpus())) recorded before the Riverside content left
# the code for content/ (issue 12): the 105 documents must stay byte-identical.
RIVERSIDE_DIGEST = "sha256:b2d77191c1060193bf403345ee38764f8a82ec0b0bb1a2411ea4b48d162cf891"

CORPUS_FILES = ("policy.yaml", "agents.yaml", "labels.yaml", "assignments.yaml")
RENDERER_MODULES = ("_content.py", "_layout.py", "_templates.py", "_sources.py")

runner = CliRunner()


def _bare_corpus(tmp_path: Path) -> Path:
    """The Riverside corpus files without any content folder."""
    folder = tmp_path / "corpus"
    folder.mkdir()
    for name in CORPUS_FILES:
        shutil.copy(riverside_dir() / name, folder / name)
    return folder


def _user_texts(corpus: Corpus) -> dict[str, str]:
    """Hand-written documents with what a file may hold: Markdown, CRLF, non-ASCII."""
    return {
        label.doc_id: f"# {label.title}\r\n\r\nNotes for {label.doc_id}: caf\u00e9, 5 \u00b5g.\n"
        for label in corpus.labels
    }


@pytest.fixture
def user_corpus(tmp_path: Path, corpus: Corpus) -> tuple[Path, dict[str, str]]:
    folder = _bare_corpus(tmp_path)
    documents = folder / "documents"
    documents.mkdir()
    texts = _user_texts(corpus)
    for i, (doc_id, text) in enumerate(texts.items()):
        suffix = ".md" if i % 2 else ".txt"
        (documents / f"{doc_id}{suffix}").write_bytes(text.encode("utf-8"))
    return folder, texts


# ------------------------------------------------------------------ Riverside


def test_riverside_documents_are_unchanged(corpus: Corpus) -> None:
    documents = render_corpus(corpus)
    assert len(documents) == 105
    assert corpus_digest(documents) == RIVERSIDE_DIGEST


def test_riverside_content_is_generated_from_its_content_folder(corpus: Corpus) -> None:
    source = corpus.content_source
    assert isinstance(source, GeneratedContent) and isinstance(source, ContentSource)
    assert source.folder == riverside_dir() / "content"
    assert str(source.folder) in source.describe()
    label = corpus.label("RMC-RX-001")
    assert corpus.content("RMC-RX-001") == render_document(label, corpus)
    assert set(DOCUMENT_TYPES) == {label.document_type for label in corpus.labels}
    templates = {p.stem for p in (source.folder / "templates").glob("*.tmpl")}
    assert {t.replace(" ", "_") for t in DOCUMENT_TYPES} | {"_generic"} == templates


def test_no_organisation_is_written_in_the_renderer_code() -> None:
    """Names, addresses, numbers and partners of the clinic live in content/, not in code."""
    content = riverside_dir() / "content"
    clinic = yaml.safe_load((content / "clinic.yaml").read_text(encoding="utf-8"))
    people = yaml.safe_load((content / "people.yaml").read_text(encoding="utf-8"))
    facts = {v for v in clinic.values() if isinstance(v, str)}
    facts |= {s for v in clinic.values() if isinstance(v, list) for s in v if isinstance(s, str)}
    facts |= {p["name"] for p in people["payers"]} | set(people["streets"])
    facts |= {"Riverside", "(951)", "Northgate", "mail.example", people["company"]}
    facts -= {"north", "east"}  # parking lots: ordinary words
    for module in RENDERER_MODULES:
        code = (riverside_dir().parents[1] / module).read_text(encoding="utf-8")
        found = sorted(f for f in facts if f in code)
        assert not found, (module, found)


def test_the_content_folder_writes_the_letterhead(tmp_path: Path, corpus: Corpus) -> None:
    folder = Path(shutil.copytree(riverside_dir(), tmp_path / "corpus"))
    clinic = folder / "content" / "clinic.yaml"
    text = clinic.read_text(encoding="utf-8")
    text = text.replace("name: Riverside Medical Clinic", "name: Lakeside Family Practice")
    clinic.write_text(text.replace("phone: (951) 555-0100", "phone: (555) 010-0199"), "utf-8")
    lakeside = load_corpus(folder)
    letter = lakeside.content("RMC-REF-001")
    assert letter.startswith("Lakeside Family Practice\n") and "Tel (555) 010-0199" in letter
    assert "Riverside Medical Clinic" not in letter
    # only the clinic changed (paragraphs wrap anew): the label still draws the same details
    words = " ".join(letter.split()).replace("Lakeside Family Practice", "Riverside Medical Clinic")
    words = words.replace("(555) 010-0199", "(951) 555-0100")
    assert words == " ".join(corpus.content("RMC-REF-001").split())


def test_a_new_document_type_can_have_a_template(tmp_path: Path, corpus: Corpus) -> None:
    folder = Path(shutil.copytree(riverside_dir(), tmp_path / "corpus"))
    (folder / "content" / "templates" / "visitor_log.tmpl").write_text(
        "department: Front Desk\nheading: VISITOR LOG\n\n--- meta\nDate: ${date|long}\n\n"
        "--- table\nTime | Visitor\n08:10 | Courier\n",
        encoding="utf-8",
    )
    edited = load_corpus(folder)
    label = edited.label("RMC-MEM-001").model_copy(
        update={"title": "Visitor log", "document_type": "visitor log"}
    )
    text = render_document(label, edited)
    assert "\nFront Desk\n" in text and "\nVISITOR LOG\n" in text
    assert re.search(r"^Time\s+Visitor\n08:10\s+Courier$", text, re.M)


def test_template_and_table_mistakes_name_the_file_and_line(tmp_path: Path) -> None:
    folder = Path(shutil.copytree(riverside_dir(), tmp_path / "corpus"))
    template = folder / "content" / "templates" / "lab_report.tmpl"
    original = template.read_text(encoding="utf-8")
    template.write_text(original + "\n--- poem\nroses\n", encoding="utf-8")
    with pytest.raises(PrivacyCIError, match=r"lab_report\.tmpl:\d+: a block is one of"):
        load_corpus(folder).content("RMC-LAB-001")

    template.write_text(original.replace("${panel.specimen}", "${panel.colour}"), "utf-8")
    with pytest.raises(PrivacyCIError, match=r"lab_report\.tmpl:\d+: unknown name \$\{panel"):
        load_corpus(folder).content("RMC-LAB-001")

    template.write_text(original, encoding="utf-8")
    drugs = folder / "content" / "drugs.yaml"
    drugs.write_text(drugs.read_text("utf-8").replace("form: tablet", "form: 7", 1), "utf-8")
    with pytest.raises(PrivacyCIError, match=r"drugs\.yaml: drugs\[0\]\.form: expected text"):
        load_corpus(folder).content("RMC-RX-001")


# ------------------------------------------------------------ a user's corpus


def test_a_documents_folder_gives_the_texts_as_written(
    user_corpus: tuple[Path, dict[str, str]],
) -> None:
    folder, texts = user_corpus
    corpus = load_corpus(folder)
    assert isinstance(corpus.content_source, DocumentFolder)
    assert str(folder / "documents") in corpus.content_source.describe()
    for doc_id, text in texts.items():
        assert corpus.content(doc_id) == text  # byte for byte: CRLF and UTF-8 kept
    assert render_corpus(corpus) == texts
    written = write_corpus_documents(corpus, folder / "out")
    assert [p.read_bytes() for p in written] == [t.encode("utf-8") for t in texts.values()]
    with pytest.raises(PrivacyCIError, match="not generated from templates"):
        render_document(corpus.label("RMC-LAB-001"), corpus)


def test_the_cli_labeler_and_store_read_a_documents_folder(
    user_corpus: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    from privacy_ci.store import DocumentStore, load_corpus_into

    folder, texts = user_corpus
    shown = runner.invoke(
        app, ["conductor", "show", "RMC-CN-003", "--corpus", str(folder), "--json"]
    )
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.stdout)["content"] == texts["RMC-CN-003"]

    out = tmp_path / "written"
    wrote = runner.invoke(
        app, ["conductor", "documents", "--out", str(out), "--corpus", str(folder), "--json"]
    )
    assert wrote.exit_code == 0, wrote.output
    assert json.loads(wrote.stdout)["sha256"] == corpus_digest(texts)
    assert (out / "RMC-CN-003.txt").read_bytes() == texts["RMC-CN-003"].encode("utf-8")

    corpus = load_corpus(folder)
    assert texts["RMC-LAB-002"] in render_user_prompt(corpus, "RMC-LAB-002")

    with DocumentStore(f"sqlite:///{tmp_path / 'store.db'}") as store:
        assert load_corpus_into(store, corpus) == 105
        assert store.fetch_content(["RMC-LAB-002"]) == {"RMC-LAB-002": texts["RMC-LAB-002"]}


def test_a_missing_document_names_the_document_and_the_path(
    user_corpus: tuple[Path, dict[str, str]],
) -> None:
    folder, _ = user_corpus
    for path in (folder / "documents").glob("RMC-DS-002.*"):
        path.unlink()
    expected = folder / "documents" / "RMC-DS-002.txt"
    # a label without its file is a problem of the folder: found when it is loaded
    with pytest.raises(PrivacyCIError, match="'RMC-DS-002': field doc_id") as caught:
        load_corpus(folder)
    assert str(expected) in str(caught.value)
    source = DocumentFolder(folder / "documents")
    with pytest.raises(PrivacyCIError, match="RMC-DS-002") as caught:
        source.content("RMC-DS-002")
    assert str(expected) in str(caught.value) and "does not exist" in str(caught.value)
    shown = runner.invoke(app, ["conductor", "show", "RMC-DS-002", "--corpus", str(folder)])
    assert shown.exit_code != 0 and "RMC-DS-002" in shown.output
    assert source.content("RMC-DS-001")  # the others are still there


def test_document_files_must_be_one_per_document(tmp_path: Path) -> None:
    folder = DocumentFolder(tmp_path)
    (tmp_path / "A-1.txt").write_text("a", encoding="utf-8")
    (tmp_path / "A-1.md").write_text("a", encoding="utf-8")
    with pytest.raises(PrivacyCIError, match="two files"):
        folder.content("A-1")
    with pytest.raises(PrivacyCIError, match="cannot name a file"):
        folder.content("../A-1")
    (tmp_path / "B-1.txt").write_bytes(b"\xff\xfe")
    with pytest.raises(PrivacyCIError, match=r"B-1\.txt: not UTF-8"):
        folder.content("B-1")


# ---------------------------------------------------------------- no content


def test_a_corpus_without_content_says_so(tmp_path: Path, corpus: Corpus) -> None:
    from privacy_ci.store import DocumentStore, load_corpus_into

    folder = _bare_corpus(tmp_path)
    bare = load_corpus(folder)  # policy, agents, labels and assignments are enough to load
    with pytest.raises(PrivacyCIError, match="has no document content") as caught:
        bare.content("RMC-LAB-001")
    assert "documents/" in str(caught.value) and "content/" in str(caught.value)
    with pytest.raises(PrivacyCIError, match="has no document content"):
        render_document(bare.label("RMC-LAB-001"), bare)
    with pytest.raises(PrivacyCIError, match="unknown document"):
        bare.content("NOT-A-DOC")

    with DocumentStore(f"sqlite:///{tmp_path / 'store.db'}") as store:
        with pytest.raises(PrivacyCIError, match="has no document content"):
            load_corpus_into(store, bare)
        assert load_corpus_into(store, bare, content=False) == 105  # labels only

    in_memory = Corpus(corpus.policy, corpus.directory, corpus.labels, corpus.assignments)
    with pytest.raises(PrivacyCIError, match="no folder, so no document content"):
        in_memory.content("RMC-LAB-001")


def test_content_and_documents_together_are_refused(
    user_corpus: tuple[Path, dict[str, str]],
) -> None:
    folder, _ = user_corpus
    shutil.copytree(riverside_dir() / "content", folder / "content")
    with pytest.raises(PrivacyCIError, match=r"both content/.*and documents/"):
        load_corpus(folder).content("RMC-LAB-001")
