"""`verify_ids`: normalise the regulation ids an LLM writes and keep the real ones.

Agent-based retrieval (section 4.2 of the Privacy Checklist paper) asks a model
for applicable rule ids and then checks them against the checklist "to filter
out misinformation". The reading and checking of ids is regulation-id spelling
logic, so it lives with every other id rule in `privacy_ci.regulations._ids`;
this module keeps the names retrieval has always exported.
"""

from __future__ import annotations

from privacy_ci.regulations import RejectedId, VerifiedIds, extract_citations, verify_ids

__all__ = ["RejectedId", "VerifiedIds", "extract_citations", "verify_ids"]
