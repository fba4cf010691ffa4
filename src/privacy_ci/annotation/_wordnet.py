"""The WordNet noun hierarchy, read from a WordNet 3.0 database folder (no download).

The role graph aligns roles to WordNet (Privacy Checklist section 3.3). The database
comes from a package: Debian's ``wordnet-base`` installs it in ``/usr/share/wordnet``
(``apt-get install wordnet-base``); ``PRIVACY_CI_WORDNET`` names another folder with
the same files. Only nouns are needed (``index.noun``, ``data.noun``, ``noun.exc``),
read directly in WordNet's documented format (wndb(5)): nltk's reader wants a
``lexnames`` file Debian does not ship and refuses folders outside its data path.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from privacy_ci.errors import PrivacyCIError

__all__ = [
    "WORDNET_ENV",
    "WORDNET_FOLDERS",
    "Synset",
    "WordNet",
    "WordNetMissing",
    "load_wordnet",
    "wordnet_folder",
]

WORDNET_ENV = "PRIVACY_CI_WORDNET"
WORDNET_FOLDERS = ("/usr/share/wordnet", "/usr/local/share/wordnet", "/usr/local/WordNet-3.0/dict")
_FILES = ("index.noun", "data.noun")


class WordNetMissing(PrivacyCIError):
    """No WordNet database folder was found (the message says how to install one)."""


@dataclass(frozen=True, slots=True)
class Synset:
    """A noun synset.

    Args:
        offset: its byte offset in ``data.noun`` (its identity).
        lemmas: its words, spaces for underscores, in WordNet's order.
        hypernyms: offsets of its hypernyms and instance hypernyms.
        lexname: its lexicographer file number (18 = ``noun.person``, 14 = ``noun.group``).
    """

    offset: int
    lemmas: tuple[str, ...]
    hypernyms: tuple[int, ...]
    lexname: int

    @property
    def name(self) -> str:
        """The first lemma, lowercased (``health professional``): its role graph node."""
        return self.lemmas[0].lower()


def wordnet_folder() -> Path:
    """The WordNet database folder: ``$PRIVACY_CI_WORDNET``, else a standard place.

    Raises:
        WordNetMissing: none holds ``index.noun`` and ``data.noun``.
    """
    env = os.environ.get(WORDNET_ENV)
    candidates = [env] if env else list(WORDNET_FOLDERS)
    for folder in candidates:
        if all((Path(folder) / name).is_file() for name in _FILES):
            return Path(folder)
    where = f"${WORDNET_ENV} ({env})" if env else ", ".join(WORDNET_FOLDERS)
    raise WordNetMissing(
        f"no WordNet database in {where}: the role graph needs WordNet 3.0's noun files;"
        f" install Debian's package (apt-get install wordnet-base) or set {WORDNET_ENV}"
        " to a folder holding index.noun and data.noun"
    )


_SUFFIXES = (
    ("ses", "s"),
    ("xes", "x"),
    ("zes", "z"),
    ("ches", "ch"),
    ("shes", "sh"),
    ("men", "man"),
    ("ies", "y"),
    ("s", ""),
)


class WordNet:
    """WordNet's nouns: lemma lookup (with WordNet's morphology) and hypernyms.

    Args:
        folder: the database folder.
    """

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._index: dict[str, tuple[int, ...]] = {}
        with (folder / "index.noun").open(encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.startswith(" "):
                    continue  # the licence header
                parts = line.split()
                p_cnt = int(parts[3])
                synset_cnt = int(parts[2])
                offsets = parts[6 + p_cnt : 6 + p_cnt + synset_cnt]
                self._index[parts[0]] = tuple(int(o) for o in offsets)
        self._exceptions: dict[str, str] = {}
        exc = folder / "noun.exc"
        if exc.is_file():
            for line in exc.read_text(encoding="utf-8", errors="replace").splitlines():
                words = line.split()
                if len(words) >= 2:
                    self._exceptions.setdefault(words[0], words[1])
        self._data = (folder / "data.noun").open("rb")
        self._synsets: dict[int, Synset] = {}

    def close(self) -> None:
        self._data.close()

    def synset(self, offset: int) -> Synset:
        """The synset at an offset of ``data.noun``."""
        found = self._synsets.get(offset)
        if found is not None:
            return found
        self._data.seek(offset)
        fields = self._data.readline().decode("utf-8", errors="replace").split(" | ")[0].split()
        lexname = int(fields[1])
        w_cnt = int(fields[3], 16)
        words = fields[4 : 4 + 2 * w_cnt : 2]
        at = 4 + 2 * w_cnt
        p_cnt = int(fields[at])
        hypernyms = []
        for i in range(p_cnt):
            symbol, target, pos = fields[at + 1 + 4 * i : at + 4 + 4 * i]
            if symbol in ("@", "@i") and pos == "n":
                hypernyms.append(int(target))
        lemmas = tuple(re.sub(r"\(.*\)$", "", w).replace("_", " ") for w in words)
        found = Synset(offset, lemmas, tuple(hypernyms), lexname)
        self._synsets[offset] = found
        return found

    def base_forms(self, word: str) -> list[str]:
        """WordNet's morphology for a noun: the word, its exception, suffix rules."""
        key = word.strip().lower().replace(" ", "_")
        forms = [key]
        if key in self._exceptions:
            forms.append(self._exceptions[key])
        for suffix, replacement in _SUFFIXES:
            if key.endswith(suffix) and len(key) > len(suffix) + 1:
                forms.append(key[: -len(suffix)] + replacement)
        return [f for f in dict.fromkeys(forms) if f in self._index]

    def synsets(self, word: str) -> list[Synset]:
        """The noun senses of a word or phrase, most frequent first."""
        out: list[Synset] = []
        for form in self.base_forms(word):
            out.extend(self.synset(o) for o in self._index[form])
        return list({s.offset: s for s in out}.values())

    def hypernym_paths(self, synset: Synset) -> list[list[Synset]]:
        """Every path from the synset up to a root, the synset first."""
        if not synset.hypernyms:
            return [[synset]]
        return [
            [synset, *path]
            for parent in synset.hypernyms
            for path in self.hypernym_paths(self.synset(parent))
        ]


@cache
def load_wordnet(folder: str | None = None) -> WordNet:
    """The WordNet nouns (read once per process; ~1 s).

    Raises:
        WordNetMissing: no database folder.
    """
    return WordNet(Path(folder) if folder else wordnet_folder())
