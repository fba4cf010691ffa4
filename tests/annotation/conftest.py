"""The knowledge base build tests' known answers: the published HIPAA KB."""

from __future__ import annotations

import pytest

from privacy_ci.knowledge import KnowledgeBase


@pytest.fixture(scope="session")
def published(hipaa_kb: KnowledgeBase) -> KnowledgeBase:
    """The published HIPAA KB (eCFR tree): what the scripted annotator answers from."""
    return hipaa_kb
