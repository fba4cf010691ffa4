"""Shared fixtures: the packaged Riverside corpus, the real data directory and the papers.

Missing data or papers skip on a developer's machine and fail in CI (see `tests._shared`).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from privacy_ci.conductor import Corpus, Gate, load_corpus
from privacy_ci.knowledge import KnowledgeBase, load_knowledge_base
from tests._browser import browser
from tests._shared import REPO, require_data

__all__ = ["REPO", "browser"]

# A relative PRIVACY_CI_DATA (CI passes ../shared/data) must survive tests that chdir.
if os.environ.get("PRIVACY_CI_DATA"):
    os.environ["PRIVACY_CI_DATA"] = str(Path(os.environ["PRIVACY_CI_DATA"]).resolve())


@pytest.fixture(scope="session")
def corpus() -> Corpus:
    return load_corpus()


@pytest.fixture(scope="session")
def gate(corpus: Corpus) -> Gate:
    return Gate(corpus.policy)


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The real public data (`PRIVACY_CI_DATA`, else ../shared/data).

    Absent or incomplete: a skip for a developer, a failure in CI.
    """
    return require_data()


@pytest.fixture(scope="session")
def hipaa_kb(shared_data: Path) -> KnowledgeBase:
    """The published HIPAA knowledge base on its default (eCFR) tree, loaded once.

    Shared by every test that asks for it: read it, never change it.
    """
    return load_knowledge_base("hipaa", shared_data)
