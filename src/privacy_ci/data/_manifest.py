"""The manifest of public data files: where each comes from and its pinned hash.

Every file in the data directory is listed here once, with the GitHub repository
and commit it is downloaded from, its path in that repository, and the sha256 and
size of the exact bytes expected. `privacy-ci data fetch` downloads from
`UPSTREAM_URL_TEMPLATE`; the hashes were computed from the reference copy
described in the project's data notes (``SOURCES.md``).

The seven PrivaCI-Bench ``.jsonl`` files are conversions of the upstream Arrow
files; the fork ``beefed-up-geek/PrivaCI-Bench`` ships byte-identical exports, so
they are downloaded from there.

`SOURCES` is the built-in table. A regulation added to the registry can bring the
entries of its own files (`privacy_ci.regulations.RegulationSpec.sources`);
`manifest`, `SOURCES_BY_PATH` and `select` (hence fetch, verify and status) add them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import quote

from privacy_ci._views import LiveMapping
from privacy_ci.errors import PrivacyCIError

__all__ = [
    "DEFAULT_BASE_URL",
    "REPOS",
    "SOURCES",
    "SOURCES_BY_PATH",
    "UPSTREAM_URL_TEMPLATE",
    "Repo",
    "Source",
    "manifest",
    "select",
]

UPSTREAM_URL_TEMPLATE = "https://raw.githubusercontent.com/{repo}/{commit}/{source_path}"
"""Where a file is downloaded from, filled in with a `Source`'s fields."""

DEFAULT_BASE_URL = "https://raw.githubusercontent.com"
"""The host part of `UPSTREAM_URL_TEMPLATE`; ``fetch(base_url=...)`` replaces it."""


@dataclass(frozen=True, slots=True)
class Repo:
    """A pinned upstream repository.

    Attributes:
        key: short name used in this module (``checklist``, ``goldcoin``, ...).
        name: ``owner/name`` on GitHub.
        commit: the pinned commit (40 hex).
        license: the repository's license, in words.
    """

    key: str
    name: str
    commit: str
    license: str


@dataclass(frozen=True, slots=True)
class Source:
    """One data file and where it comes from.

    Attributes:
        path: path relative to the data directory, with ``/`` separators.
        repo: upstream repository, ``owner/name``.
        commit: pinned upstream commit (40 hex).
        source_path: path of the file inside the upstream repository.
        sha256: full sha256 (64 lowercase hex) of the expected bytes.
        size: expected size in bytes.
        license: license note for this file.
        note: how the file relates to its source, when it is not a plain copy.
    """

    path: str
    repo: str
    commit: str
    source_path: str
    sha256: str
    size: int
    license: str
    note: str = ""

    def url(self, base_url: str | None = None) -> str:
        """The upstream download URL of this file.

        Args:
            base_url: replaces ``https://raw.githubusercontent.com``; the mirror must be
                laid out as ``{base_url}/{repo}/{commit}/{source_path}``.

        Returns:
            The absolute URL.
        """
        url = UPSTREAM_URL_TEMPLATE.format(
            repo=self.repo, commit=self.commit, source_path=quote(self.source_path, safe="/")
        )
        if base_url is not None:
            url = base_url.rstrip("/") + url[len(DEFAULT_BASE_URL) :]
        return url

    def mirror_url(self, mirror: str) -> str:
        """The URL of this file on a flat mirror laid out like the data directory.

        Args:
            mirror: base URL of the mirror; the file is at ``{mirror}/{path}``.

        Returns:
            The absolute URL.
        """
        return mirror.rstrip("/") + "/" + quote(self.path, safe="/")


_CHECKLIST = Repo(
    "checklist",
    "HKUST-KnowComp/privacy_checklist",
    "4b9209001881e118eeefc1b69fd53f214c440ced",
    "MIT, (c) 2025 HKUST-KnowComp (licenses/privacy_checklist-LICENSE.txt)",
)
_GOLDCOIN = Repo(
    "goldcoin",
    "HKUST-KnowComp/GoldCoin",
    "4dc1c746c090b3121302c329a54952e3c9ec8e37",
    "Apache-2.0 (licenses/GoldCoin-LICENSE.txt)",
)
_PRIVACI = Repo(
    "privaci",
    "HKUST-KnowComp/PrivaCI-Bench",
    "d7d30e39d8fabe1efdc1e4ce81d9738f91923851",
    "MIT, (c) 2025 HKUST-KnowComp (licenses/PrivaCI-Bench-LICENSE.txt)",
)
_PRIVACI_FORK = Repo(
    "privaci-fork",
    "beefed-up-geek/PrivaCI-Bench",
    "caac7d2cce1fb9ca0ef8e007bf74c0ede1b48652",
    "MIT, (c) 2025 HKUST-KnowComp, same text "
    "(licenses/PrivaCI-Bench-fork-beefed-up-geek-LICENSE.txt)",
)

REPOS: dict[str, Repo] = {r.key: r for r in (_CHECKLIST, _GOLDCOIN, _PRIVACI, _PRIVACI_FORK)}
"""The pinned upstream repositories, by short name."""

_ECFR_LICENSE = (
    "U.S. Government work (eCFR rendering of 45 CFR), as committed to HKUST-KnowComp/GoldCoin"
)
_ARROW_NOTE = (
    "JSONL export of HKUST-KnowComp/PrivaCI-Bench HF_cache Arrow data; byte-identical to "
    "converting the upstream Arrow file (same blob in the fork)"
)


def _src(
    path: str, repo_key: str, source_path: str, sha256: str, size: int, note: str = ""
) -> Source:
    repo = REPOS[repo_key]
    license_note = _ECFR_LICENSE if path.startswith("hipaa/ecfr/") else repo.license
    if not note and path.endswith(".jsonl") and "privaci_bench/" in path:
        note = _ARROW_NOTE
    return Source(path, repo.name, repo.commit, source_path, sha256, size, license_note, note)


SOURCES: tuple[Source, ...] = (
    _src(
        "hipaa/regulation_tree.graphml",
        "checklist",
        "HIPAA.graphml",
        "6bc9d296e2921624558c2234749735151e7eeea88b877f605c6d8f897112786d",
        1134591,
    ),
    _src(
        "hipaa/regulation_tree_goldcoin.graphml",
        "goldcoin",
        "regulations/HIPAA.graphml",
        "b82b30ca02edf9d72e9648f0a71f49d32fd75ba69741f0e6c705bd9164f5e024",
        1132686,
    ),
    _src(
        "hipaa/privacy_rule_tree_goldcoin.graphml",
        "goldcoin",
        "regulations/HIPAA_Privacy_Rule.graphml",
        "5f607e0b508343d33b3ef13abdac66db9a73e9e51d94b93af76aa0001aba4d05",
        818048,
    ),
    _src(
        "hipaa/kb_annotated.json",
        "checklist",
        "KB_annotated.json",
        "2c2a8c6d1b89c0e9a07d2a9d2a5d06c29a9c6046c2c726ffd64e04bfe2f40fee",
        1072675,
    ),
    _src(
        "hipaa/definitions.json",
        "checklist",
        "HIPAA_defs.json",
        "1c1885a4b76d4a9b27a4513a004fe5c354af9ccba87bd07612421f6dc275e5ef",
        62136,
    ),
    _src(
        "hipaa/role_graph.graphml",
        "checklist",
        "role_kg.graphml",
        "1936298b663a9dae8c87c18ecd0e47c0ab5ef64a403995df313944f9a906a16f",
        69599,
    ),
    _src(
        "hipaa/attribute_graph.graphml",
        "checklist",
        "attribute_kg.graphml",
        "a56b04870dfa3dc75c9a7154834ebac8068a356e13d8a41077ce7e42006ea465",
        66836,
    ),
    _src(
        "hipaa/ecfr/subchapter-C_part-160.html",
        "goldcoin",
        "regulations/subchapter-C_part-160.html",
        "930dd252adb45f2c72c12c3b2fe139a05d60c3f6731ac34c8fadb3d180b2c91f",
        320669,
    ),
    _src(
        "hipaa/ecfr/subchapter-C_part-162.html",
        "goldcoin",
        "regulations/subchapter-C_part-162.html",
        "a371b035dfbab989a85fb4917d9716b09e70997074b380503005f980cab84336",
        274740,
    ),
    _src(
        "hipaa/ecfr/subchapter-C_part-164.html",
        "goldcoin",
        "regulations/subchapter-C_part-164.html",
        "719ded965489a57286c3f0cda09aee3a0cad5561f80a2e527a87ff0c80715d09",
        651200,
    ),
    _src(
        "cases/goldcoin/real.json",
        "checklist",
        "data/HIPAA/eval_data/real.json",
        "62990daece09b5490187215748f19ec89cd0cf0d1331f40fca148d48458b7ceb",
        550716,
    ),
    _src(
        "cases/goldcoin/synthetic.json",
        "checklist",
        "data/HIPAA/eval_data/generate.json",
        "fc590a512e230a68ffa356028a0d52502713f810b8bf78876a3cfd8842795f5d",
        1264754,
    ),
    _src(
        "cases/goldcoin/test_real_cases_hipaa_applicability.csv",
        "goldcoin",
        "cases/train_val_test/test_real_cases_hipaa_applicability.csv",
        "e3efd77d5186058711dc922723d2979b9fbab46c8b07ecc03497674acd22a81b",
        606632,
    ),
    _src(
        "cases/goldcoin/test_real_cases_hipaa_compliance.csv",
        "goldcoin",
        "cases/train_val_test/test_real_cases_hipaa_compliance.csv",
        "d28b519675cf449d30ae8ec12febda4f927bdb964902677b1b5257d3ccd58c5a",
        310323,
    ),
    _src(
        "cases/goldcoin/train_generate_cases_hipaa_applicability.csv",
        "goldcoin",
        "cases/train_val_test/train_generate_cases_hipaa_applicability.csv",
        "a6600ef544d3ea774c0bf745f0599b2015b3da439531c83854de83715b685bda",
        1724927,
    ),
    _src(
        "cases/goldcoin/train_generate_cases_hipaa_compliance.csv",
        "goldcoin",
        "cases/train_val_test/train_generate_cases_hipaa_compliance.csv",
        "ba6868daf003c78c18e2d356f57a23cbf0d2e79ed576de00ad1a7a8818f63f70",
        870477,
    ),
    _src(
        "cases/goldcoin/val_generate_cases_hipaa_applicability.csv",
        "goldcoin",
        "cases/train_val_test/val_generate_cases_hipaa_applicability.csv",
        "a2f052088e60ea5addc8a64b77040fcfab5a33ae208d39a352b83d8f45b631f4",
        111963,
    ),
    _src(
        "cases/goldcoin/val_generate_cases_hipaa_compliance.csv",
        "goldcoin",
        "cases/train_val_test/val_generate_cases_hipaa_compliance.csv",
        "5896a5b67312b8344fb5dc2dbdf8aa733ad16390d29fab6d8336ae5daeb1e887",
        55094,
    ),
    _src(
        "cases/privaci_bench/hipaa.jsonl",
        "privaci-fork",
        "HF_cache/cases/HIPAA/data-00000-of-00001.jsonl",
        "8620df39a907b8575d23b68f8f75e9b8c6a32083967198b333d258ce09c2c2dd",
        584715,
    ),
    _src(
        "cases/privaci_bench/gdpr.jsonl",
        "privaci-fork",
        "HF_cache/cases/GDPR/data-00000-of-00001.jsonl",
        "81926a9ac163874a0d9249047457a3ffa3b6f254a7c61cbec490c866b971027f",
        2744893,
    ),
    _src(
        "cases/privaci_bench/ai_act.jsonl",
        "privaci-fork",
        "HF_cache/cases/AI_ACT/data-00000-of-00001.jsonl",
        "04ed1a4d053ea199f4a09bfd2f5fd9b68a74634ee35f652d43d216a6c6c81465",
        3951414,
    ),
    _src(
        "cases/privaci_bench/aclu.jsonl",
        "privaci-fork",
        "HF_cache/cases/ACLU/data-00000-of-00001.jsonl",
        "6575a583fc1c51a9d73ec92e567f5399c440ddd3370299b595caca39916cfe2d",
        190750,
    ),
    _src(
        "kb/privaci_bench/hipaa.jsonl",
        "privaci-fork",
        "HF_cache/KBs/HIPAA/data-00000-of-00001.jsonl",
        "604644eaa409a397a73474ef87a5c6e060549d6bea903f83ac8173901c8f8740",
        810857,
    ),
    _src(
        "kb/privaci_bench/gdpr.jsonl",
        "privaci-fork",
        "HF_cache/KBs/GDPR/data-00000-of-00001.jsonl",
        "7223e91b06072bc68c8e33f8303f69936fa0d894915cfcf2ff4d7289efedb0e7",
        648140,
    ),
    _src(
        "kb/privaci_bench/ai_act.jsonl",
        "privaci-fork",
        "HF_cache/KBs/AI_ACT/data-00000-of-00001.jsonl",
        "86587230178d18d8adb9fca15ca59b372a508e1c1c702d4834416b7a9d06ed90",
        952309,
    ),
    _src(
        "law_trees/hipaa.graphml",
        "privaci",
        "law_tree/LawTree_HIPAA.graphml",
        "ba348dac7d4b38d091e0b418f053024afa9f6e8786ff83445984d8227957aabc",
        1259840,
    ),
    _src(
        "law_trees/gdpr.graphml",
        "privaci",
        "law_tree/LawTree_GDPR.graphml",
        "6429faf2b123193504b905450290f96e90161c8b2d883d2fefc16e85f607c2e5",
        605817,
    ),
    _src(
        "law_trees/ai_act.graphml",
        "privaci",
        "law_tree/LawTree_AI_ACT.graphml",
        "bb8c9679af79bb1cdb23879d277e4a92bdef0303fbb42058f030df1b3e1c8676",
        1894991,
    ),
    _src(
        "law_trees/definitions/gdpr.json",
        "privaci-fork",
        "def_dict/GDPR_def.json",
        "ed953924eddb99c2a80c6eebd240246dae4c80a0ac4d1610ceff33541196d143",
        2877,
    ),
    _src(
        "law_trees/definitions/ai_act.json",
        "privaci-fork",
        "def_dict/AI_ACT_def.json",
        "e92ab640ee6a2ea035eb1bbee16907fe9110ad0cd28ae9a08b809baf383356ef",
        8224,
    ),
    _src(
        "licenses/privacy_checklist-LICENSE.txt",
        "checklist",
        "LICENSE",
        "47158d3a1eb6cbebe82fab657c11d4959c453f4d803b103a132b4627b63719f0",
        1071,
    ),
    _src(
        "licenses/GoldCoin-LICENSE.txt",
        "goldcoin",
        "LICENSE",
        "c71d239df91726fc519c6eb72d318ec65820627232b2f796219e87dcf35d0ab4",
        11357,
    ),
    _src(
        "licenses/PrivaCI-Bench-LICENSE.txt",
        "privaci",
        "LICENSE",
        "47158d3a1eb6cbebe82fab657c11d4959c453f4d803b103a132b4627b63719f0",
        1071,
    ),
    _src(
        "licenses/PrivaCI-Bench-fork-beefed-up-geek-LICENSE.txt",
        "privaci-fork",
        "LICENSE",
        "47158d3a1eb6cbebe82fab657c11d4959c453f4d803b103a132b4627b63719f0",
        1071,
    ),
)
"""Every data file, in a stable order (HIPAA, cases, KBs, law trees, licenses)."""

_BUILTIN_PATHS = frozenset(s.path for s in SOURCES)


def manifest() -> tuple[Source, ...]:
    """Every data file: `SOURCES`, then the files of registered regulations it lacks.

    Returns:
        The entries, built-in ones first; a registered entry for a path `SOURCES`
        already lists is ignored.
    """
    # Imported here: the registry is a higher layer that imports this package lazily.
    from privacy_ci.regulations import regulations

    extra: dict[str, Source] = {}
    for spec in regulations():
        for source in spec.sources:
            if source.path not in _BUILTIN_PATHS:
                extra.setdefault(source.path, source)
    return SOURCES + tuple(extra.values())


SOURCES_BY_PATH: Mapping[str, Source] = LiveMapping(lambda: {s.path: s for s in manifest()})
"""`manifest` keyed by path relative to the data directory (read anew on each access:
regulations may be registered at run time)."""


def select(
    only: Iterable[str] | None = None, sources: Sequence[Source] | None = None
) -> list[Source]:
    """Pick manifest entries by path prefix.

    Args:
        only: path prefixes relative to the data directory (``hipaa/``,
            ``cases/goldcoin/real.json``); ``None`` or empty selects everything.
            A leading ``./`` and Windows separators are accepted.
        sources: the entries to choose from (default `manifest`).

    Returns:
        The matching entries, in manifest order.

    Raises:
        PrivacyCIError: a prefix matches no file.
    """
    sources = manifest() if sources is None else sources
    prefixes = [p.replace("\\", "/").removeprefix("./") for p in (only or [])]
    if not prefixes:
        return list(sources)
    unmatched = [p for p in prefixes if not any(s.path.startswith(p) for s in sources)]
    if unmatched:
        dirs = sorted({s.path.split("/", 1)[0] + "/" for s in sources})
        raise PrivacyCIError(
            f"no data file matches {', '.join(repr(p) for p in unmatched)}; "
            f"paths start with one of {', '.join(dirs)} (see `privacy-ci data status`)"
        )
    return [s for s in sources if any(s.path.startswith(p) for p in prefixes)]
