"""Where a corpus's document texts come from: a `ContentSource`.

A corpus folder provides content in one of two ways:

* ``content/``: tables and templates from which every document is generated from its
  label (`privacy_ci.conductor._content.GeneratedContent`; the packaged corpus);
* ``documents/``: one plain file per document, ``<doc_id>.txt`` or ``<doc_id>.md``
  (`DocumentFolder`; a user's own corpus of real or hand-written documents).

A corpus with neither has no content: asking for it is a `PrivacyCIError` that says so.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from privacy_ci.errors import PrivacyCIError

if TYPE_CHECKING:
    from privacy_ci.conductor._corpus import Corpus

__all__ = [
    "CONTENT_FOLDER",
    "DOCUMENTS_FOLDER",
    "DOCUMENT_SUFFIXES",
    "ContentSource",
    "DocumentFolder",
    "content_source_for",
]

CONTENT_FOLDER = "content"
DOCUMENTS_FOLDER = "documents"
DOCUMENT_SUFFIXES = (".txt", ".md")


@runtime_checkable
class ContentSource(Protocol):
    """The text of a corpus's documents, by document id."""

    def content(self, doc_id: str) -> str:
        """The document's full text.

        Raises:
            PrivacyCIError: the document has no text here (the message says where it looked).
        """
        ...

    def describe(self) -> str:
        """Where the texts come from, in a few words (for messages and manifests)."""
        ...


class DocumentFolder:
    """Plain documents in a folder: ``<doc_id>.txt`` or ``<doc_id>.md``, read as UTF-8.

    The text is returned exactly as stored (no newline or whitespace changes).

    Args:
        folder: the folder of documents.
    """

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)

    def describe(self) -> str:
        return f"plain documents in {self.folder}"

    def path(self, doc_id: str) -> Path:
        """The file holding a document.

        Raises:
            PrivacyCIError: the id cannot be a file name, or no file (or two) holds it.
        """
        if not doc_id or doc_id in {".", ".."} or any(c in doc_id for c in "/\\\0"):
            raise PrivacyCIError(f"document id {doc_id!r} cannot name a file in {self.folder}")
        found = [self.folder / (doc_id + s) for s in DOCUMENT_SUFFIXES]
        found = [p for p in found if p.is_file()]
        if not found:
            tried = " or ".join(str(self.folder / (doc_id + s)) for s in DOCUMENT_SUFFIXES)
            raise PrivacyCIError(f"document {doc_id!r} has no content: {tried} does not exist")
        if len(found) > 1:
            raise PrivacyCIError(
                f"document {doc_id!r} has two files, {found[0]} and {found[1]}; keep one"
            )
        return found[0]

    def content(self, doc_id: str) -> str:
        path = self.path(doc_id)
        try:
            return path.read_bytes().decode("utf-8")
        except UnicodeDecodeError as exc:
            raise PrivacyCIError(
                f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})"
            ) from None
        except OSError as exc:
            raise PrivacyCIError(f"{path}: cannot be read ({exc.strerror})") from None


def content_source_for(corpus: Corpus) -> ContentSource:
    """The content source a corpus folder provides (see the module docstring).

    Raises:
        PrivacyCIError: the corpus has no folder, or its folder has neither ``content/``
            nor ``documents/`` (or both), or its ``content/`` cannot be read.
    """
    from privacy_ci.conductor._content import GeneratedContent

    root = corpus.source
    if root is None:
        raise PrivacyCIError(
            "this corpus has no folder, so no document content: load it from a folder with"
            f" a {CONTENT_FOLDER}/ folder of templates or a {DOCUMENTS_FOLDER}/ folder of"
            " <doc_id>.txt or .md files"
        )
    generated, plain = root / CONTENT_FOLDER, root / DOCUMENTS_FOLDER
    if generated.is_dir() and plain.is_dir():
        raise PrivacyCIError(
            f"{root}: has both {CONTENT_FOLDER}/ (generated documents) and"
            f" {DOCUMENTS_FOLDER}/ (plain documents); keep the one its documents come from"
        )
    if generated.is_dir():
        return GeneratedContent(corpus, generated)
    if plain.is_dir():
        return DocumentFolder(plain)
    raise PrivacyCIError(
        f"{root}: the corpus has no document content: add a {DOCUMENTS_FOLDER}/ folder with"
        f" one <doc_id>.txt or .md per document, or a {CONTENT_FOLDER}/ folder of templates"
    )
