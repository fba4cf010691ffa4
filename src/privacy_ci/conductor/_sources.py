"""Where a corpus's document texts come from: a `ContentSource`.

A corpus folder provides content in one of two ways:

* ``content/``: tables and templates from which every document is generated from its
  label (`privacy_ci.conductor._content.GeneratedContent`; the packaged corpus);
* ``documents/``: one file per document, ``<doc_id>.txt``, ``.md``, ``.pdf`` or ``.docx``
  (`DocumentFolder`; a user's own corpus of real or hand-written documents). PDF and
  DOCX text is read with pypdf and python-docx, the optional ``documents`` extra.

A corpus with neither has no content: asking for it is a `PrivacyCIError` that says so.
A file in ``documents/`` that no label names is still a document: it is stored and,
having no approved label, granted to nobody.

Only regular files inside the corpus folder are documents (the folder may come from
anyone, see `privacy_ci._files`): a symbolic link is followed only to a file inside the
corpus folder; a FIFO, socket or device is refused without being opened; a file larger
than `MAX_DOCUMENT_BYTES` (16 MiB, or ``$PRIVACY_CI_MAX_DOCUMENT_BYTES``) is refused,
and no more than that is ever read. `DocumentFolder.scan` lists every such file for
validation; `DocumentFolder.content` refuses it again when reading.
"""

from __future__ import annotations

import importlib
import importlib.util
import io
import os
import re
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from privacy_ci._files import byte_limit, file_problem, is_inside, read_user_file, resolved
from privacy_ci.errors import PrivacyCIError

if TYPE_CHECKING:
    from privacy_ci.conductor._corpus import Corpus

__all__ = [
    "CONTENT_FOLDER",
    "DOCUMENTS_EXTRA",
    "DOCUMENTS_FOLDER",
    "DOCUMENT_SUFFIXES",
    "MAX_DOCUMENT_BYTES",
    "MAX_DOCUMENT_BYTES_ENV",
    "ContentSource",
    "DocumentFolder",
    "DocumentScan",
    "content_source_for",
    "max_document_bytes",
    "valid_doc_id",
]

CONTENT_FOLDER = "content"
DOCUMENTS_FOLDER = "documents"
DOCUMENT_SUFFIXES = (".txt", ".md", ".pdf", ".docx")
DOCUMENTS_EXTRA = "documents"
"""The optional extra that installs the PDF and DOCX readers."""
MAX_DOCUMENT_BYTES = 16 * 1024 * 1024
"""The largest document file read (and the most text one may yield), unless
`MAX_DOCUMENT_BYTES_ENV` says otherwise: a text of 16 MiB is several thousand pages."""
MAX_DOCUMENT_BYTES_ENV = "PRIVACY_CI_MAX_DOCUMENT_BYTES"
_CORPUS_FOLDER = "the corpus folder"  # what a document must stay in, for messages
# a DOCX is a ZIP: its parts may unpack to at most this many times the file limit
_DOCX_UNPACKED_FACTOR = 4

# A document id names a file, a CLI argument and a URL path segment: keep it to
# characters that are safe in all three (and never hidden, never a path).
_DOC_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
DOC_ID_RULE = "1-128 letters, digits, '.', '_' or '-', starting with a letter or digit"

# The library each binary format needs (imported only when such a file is read).
_READER_MODULES = {".pdf": ("pypdf", "PDF"), ".docx": ("docx", "DOCX")}
_COUNT_WORDS = {2: "two", 3: "three", 4: "four"}


def valid_doc_id(doc_id: str) -> bool:
    """Whether `doc_id` can be a document file's name (see `DOC_ID_RULE`)."""
    return _DOC_ID.fullmatch(doc_id) is not None


def _reader_module(suffix: str, path: Path) -> ModuleType:
    """The library that reads `suffix` files, or one error naming the extra to install."""
    module, kind = _READER_MODULES[suffix]
    try:
        return importlib.import_module(module)
    except ImportError:
        raise PrivacyCIError(_missing_reader(kind, module, path)) from None


def _missing_reader(kind: str, module: str, path: Path) -> str:
    package = "python-docx" if module == "docx" else module
    return (
        f"{path}: reading {kind} documents needs {package}, which is not installed:"
        f" pip install 'privacy-ci[{DOCUMENTS_EXTRA}]'"
    )


def max_document_bytes() -> int:
    """The size limit of a document file: `MAX_DOCUMENT_BYTES`, or its environment variable.

    Raises:
        PrivacyCIError: the environment variable is not a positive number of bytes.
    """
    return byte_limit(MAX_DOCUMENT_BYTES, MAX_DOCUMENT_BYTES_ENV)


def _read_utf8(path: Path, data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PrivacyCIError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def _bounded_text(text: str, path: Path) -> str:
    # the file was within the limit; what a parser extracts from it must be too
    limit = max_document_bytes()
    if len(text) > limit:
        raise PrivacyCIError(
            f"{path}: its text is {len(text):,} characters, over the limit of {limit:,}"
            f" for a document; set {MAX_DOCUMENT_BYTES_ENV} to raise it"
        )
    return text


def _read_pdf(path: Path, data: bytes) -> str:
    pypdf = _reader_module(".pdf", path)
    try:
        reader = pypdf.PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            raise PrivacyCIError(f"{path}: the PDF is encrypted; store a decrypted copy")
        text = "\n\n".join((page.extract_text() or "").strip() for page in reader.pages)
    except PrivacyCIError:
        raise
    except Exception as exc:  # a damaged file may fail anywhere in the parser
        raise PrivacyCIError(f"{path}: not a readable PDF ({type(exc).__name__}: {exc})") from None
    return _bounded_text(_non_empty(text.strip(), path, "a scanned PDF needs OCR first"), path)


def _unpacked_size(data: bytes) -> int:
    """What a DOCX's parts unpack to, as its ZIP directory declares (0: not a ZIP)."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            return sum(info.file_size for info in archive.infolist())
    except (zipfile.BadZipFile, ValueError, OSError):
        return 0  # the DOCX reader names what is wrong with it


def _read_docx(path: Path, data: bytes) -> str:
    docx = _reader_module(".docx", path)
    unpacked, most = _unpacked_size(data), _DOCX_UNPACKED_FACTOR * max_document_bytes()
    if unpacked > most:  # a ZIP bomb would be unpacked in memory by the reader
        raise PrivacyCIError(
            f"{path}: its parts unpack to {unpacked:,} bytes, over the limit of {most:,}"
            f" ({_DOCX_UNPACKED_FACTOR} times the document limit; set"
            f" {MAX_DOCUMENT_BYTES_ENV} to raise it)"
        )
    try:
        document = docx.Document(io.BytesIO(data))
        blocks: list[str] = []
        # body order: paragraphs and tables as they appear (tables one row a line)
        for block in document.iter_inner_content():
            if hasattr(block, "rows"):
                blocks.extend(" | ".join(c.text.strip() for c in row.cells) for row in block.rows)
            else:
                blocks.append(block.text)
        text = "\n".join(blocks)
    except Exception as exc:  # a damaged file may fail anywhere in the parser
        raise PrivacyCIError(f"{path}: not a readable DOCX ({type(exc).__name__}: {exc})") from None
    return _bounded_text(_non_empty(text.strip(), path, "is all its text in images?"), path)


def _non_empty(text: str, path: Path, hint: str) -> str:
    # An empty text would be stored and never found: say so instead.
    if not text:
        raise PrivacyCIError(f"{path}: no text could be extracted ({hint})")
    return text


_READERS: dict[str, Callable[[Path, bytes], str]] = {
    ".txt": _read_utf8,
    ".md": _read_utf8,
    ".pdf": _read_pdf,
    ".docx": _read_docx,
}


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


@dataclass(frozen=True)
class DocumentScan:
    """What a documents folder holds.

    Args:
        files: document id -> its file(s); more than one is a problem.
        problems: one message per file that cannot be a document, each naming the file.
        refused: ids whose file is there but refused (a link leaving the corpus folder,
            not a regular file, too large): its problem says so, it is not missing.
    """

    files: dict[str, tuple[Path, ...]]
    problems: tuple[str, ...]
    refused: frozenset[str] = frozenset()

    @property
    def doc_ids(self) -> list[str]:
        return sorted(self.files)


class DocumentFolder:
    """Documents in a folder: ``<doc_id>.txt`` or ``.md`` (read as UTF-8), ``.pdf`` or
    ``.docx`` (their text, read with the ``documents`` extra).

    Text files are returned exactly as stored (no newline or whitespace changes).
    Only regular files of at most `max_document_bytes` are documents, and a symbolic
    link only when its target lies inside `root` (see the module docstring).

    Args:
        folder: the folder of documents.
        root: the folder that documents must lie in once links are resolved: the
            corpus folder (default: `folder` itself).
    """

    def __init__(self, folder: Path, *, root: Path | None = None) -> None:
        self.folder = Path(folder)
        self.root = self.folder if root is None else Path(root)
        self._listing: frozenset[str] | None = None
        # the root resolved and the folder's check, once: each read checks its own file's
        # resolved path against this root, so a folder swapped later is caught there
        self._checked: tuple[Path, str | None] | None = None

    def describe(self) -> str:
        return f"plain documents in {self.folder}"

    def path(self, doc_id: str) -> Path:
        """The file holding a document.

        Raises:
            PrivacyCIError: the id cannot be a file name, or no file (or two) holds it.
        """
        if not doc_id or doc_id in {".", ".."} or any(c in doc_id for c in "/\\\0"):
            raise PrivacyCIError(f"document id {doc_id!r} cannot name a file in {self.folder}")
        # one listing of the folder answers most lookups without a stat per suffix (a bulk
        # load reads thousands); an id it does not name is looked up on disk afresh
        names = self._names()
        found = [self.folder / (doc_id + s) for s in DOCUMENT_SUFFIXES if doc_id + s in names]
        if len(found) != 1:
            found = [self.folder / (doc_id + s) for s in DOCUMENT_SUFFIXES]
            found = [p for p in found if p.is_file()]
        if not found:
            tried = " or ".join(str(self.folder / (doc_id + s)) for s in DOCUMENT_SUFFIXES)
            raise PrivacyCIError(f"document {doc_id!r} has no content: {tried} does not exist")
        if len(found) > 1:
            raise PrivacyCIError(f"document {doc_id!r} {_several(found)}; keep one")
        return found[0]

    def _names(self) -> frozenset[str]:
        if self._listing is None:
            try:
                self._listing = frozenset(os.listdir(self.folder))
            except OSError:
                self._listing = frozenset()
        return self._listing

    def _check(self) -> tuple[Path, str | None]:
        if self._checked is None:
            try:
                folder, root = resolved(self.folder), resolved(self.root)
            except OSError as exc:
                return self.root, f"{self.folder}: cannot be read ({exc.strerror})"
            problem = None
            if not is_inside(folder, root):
                problem = (
                    f"{self.folder}: resolves to {folder}, outside the corpus folder {root};"
                    " documents are read only from inside it"
                )
            self._checked = root, problem
        return self._checked

    def outside_root(self) -> str | None:
        """Why the documents folder itself is not inside the root (or cannot be read), or None."""
        return self._check()[1]

    def content(self, doc_id: str) -> str:
        path = self.path(doc_id)
        root, outside = self._check()
        if outside is not None:
            raise PrivacyCIError(outside)
        data = read_user_file(
            path,
            limit=max_document_bytes(),
            inside=root,
            env=MAX_DOCUMENT_BYTES_ENV,
            folder_name=_CORPUS_FOLDER,
        )
        return _READERS[path.suffix](path, data)

    def scan(self) -> DocumentScan:
        """Every document the folder holds, and every file that cannot be one.

        A problem names the file and what is wrong with it: a suffix other than the
        four (in lower case), a stem that is not a valid document id, two files for
        one id, a sub-folder, a PDF/DOCX whose reader is not installed, a symbolic link
        that leaves the corpus folder, a FIFO, socket or device, or a file over the size
        limit. Nothing is opened (``lstat`` only). Hidden files (``.DS_Store``,
        ``.gitkeep``) are no documents and are skipped.
        """
        files: dict[str, list[Path]] = {}
        problems: list[str] = []
        refused: set[str] = set()
        outside = self.outside_root()
        if outside is not None:
            return DocumentScan({}, (outside,))
        missing_readers: dict[str, Path] = {}
        expected = ", ".join(DOCUMENT_SUFFIXES)
        limit, root = max_document_bytes(), self._check()[0]
        # os.scandir: the entry knows whether it is a folder without another stat, and
        # sorting names (not Path objects) keeps a folder of 100,000 files quick
        with os.scandir(self.folder) as found:
            entries = sorted(((e.name, e) for e in found), key=lambda pair: pair[0])
        for name, entry in entries:
            if name.startswith("."):
                continue
            path = self.folder / name
            if entry.is_dir(follow_symlinks=False):
                problems.append(
                    f"{path}: a folder; documents are read from {self.folder} only,"
                    " move its files up"
                )
                continue
            suffix = path.suffix
            if suffix not in DOCUMENT_SUFFIXES:
                what = f"suffix {suffix!r}" if suffix else "no suffix"
                problems.append(f"{path}: file name: {what}, expected one of {expected}")
                continue
            doc_id = path.name[: -len(suffix)]
            if not valid_doc_id(doc_id):
                problems.append(
                    f"{path}: file name: {doc_id!r} is not a valid document id ({DOC_ID_RULE})"
                )
                continue
            problem = file_problem(
                path,
                limit=limit,
                inside=root,
                env=MAX_DOCUMENT_BYTES_ENV,
                entry=entry,
                folder_name=_CORPUS_FOLDER,
            )
            if problem is not None:
                problems.append(problem)
                refused.add(doc_id)
                continue
            files.setdefault(doc_id, []).append(path)
            if (
                suffix in _READER_MODULES
                and importlib.util.find_spec(_READER_MODULES[suffix][0]) is None
            ):
                missing_readers.setdefault(suffix, path)
        for doc_id, paths in files.items():
            if len(paths) > 1:
                problems.append(f"{self.folder}: document {doc_id!r} {_several(paths)}; keep one")
        for suffix, path in missing_readers.items():
            module, kind = _READER_MODULES[suffix]
            problems.append(_missing_reader(kind, module, path))  # once per format
        return DocumentScan(
            {d: tuple(p) for d, p in files.items()}, tuple(problems), frozenset(refused)
        )


def _several(paths: list[Path]) -> str:
    count = _COUNT_WORDS.get(len(paths), str(len(paths)))
    listed = ", ".join(str(p) for p in paths[:-1]) + f" and {paths[-1]}"
    return f"has {count} files, {listed}"


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
    for folder in (generated, plain):
        if folder.is_dir() and not is_inside(resolved(folder), resolved(root)):
            raise PrivacyCIError(
                f"{folder}: resolves to {resolved(folder)}, outside the corpus folder"
                f" {resolved(root)}; content is read only from inside it"
            )
    if generated.is_dir():
        return GeneratedContent(corpus, generated)
    if plain.is_dir():
        return DocumentFolder(plain, root=root)
    raise PrivacyCIError(
        f"{root}: the corpus has no document content: add a {DOCUMENTS_FOLDER}/ folder with"
        f" one <doc_id>.txt or .md per document, or a {CONTENT_FOLDER}/ folder of templates"
    )
