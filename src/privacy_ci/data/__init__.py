"""The public data files: where they live, where they come from, how to fetch them.

* `data_dir` / `cache_dir`: the data directory (``$PRIVACY_CI_DATA``) and the cache
  directory (``$PRIVACY_CI_CACHE``); caches never go next to the data.
* `SOURCES`: the manifest, one `Source` per file with its pinned upstream commit,
  sha256 and size; `manifest` adds the files of regulations added to the registry.
* `require`: fail with one clear `DataMissingError` if files are missing.
* `fetch` / `verify`: download (``privacy-ci data fetch``) and check the files.
"""

from __future__ import annotations

from privacy_ci.data._fetch import (
    FetchProgress,
    FetchReport,
    FileResult,
    RetriesExhausted,
    download_file,
    fetch,
    sha256_file,
    verify,
)
from privacy_ci.data._manifest import (
    DEFAULT_BASE_URL,
    REPOS,
    SOURCES,
    SOURCES_BY_PATH,
    UPSTREAM_URL_TEMPLATE,
    Repo,
    Source,
    manifest,
    select,
)
from privacy_ci.data._paths import CACHE_ENV, DATA_ENV, FETCH_COMMAND, cache_dir, data_dir, require

__all__ = [
    "CACHE_ENV",
    "DATA_ENV",
    "DEFAULT_BASE_URL",
    "FETCH_COMMAND",
    "REPOS",
    "SOURCES",
    "SOURCES_BY_PATH",
    "UPSTREAM_URL_TEMPLATE",
    "FetchProgress",
    "FetchReport",
    "FileResult",
    "Repo",
    "RetriesExhausted",
    "Source",
    "cache_dir",
    "data_dir",
    "download_file",
    "fetch",
    "manifest",
    "require",
    "select",
    "sha256_file",
    "verify",
]
