"""Shared fixtures: the packaged Riverside corpus and the real data directory."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from privacy_ci.conductor import Corpus, Gate, load_corpus

REPO = Path(__file__).resolve().parents[1]

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
    """The real public data (`PRIVACY_CI_DATA`, else ../shared/data); skip if absent."""
    path = Path(os.environ.get("PRIVACY_CI_DATA", REPO.parent / "shared" / "data"))
    if not (path / "SOURCES.md").exists():
        pytest.skip(f"shared data not found at {path}")
    return path
