"""privacy-ci: Contextual Integrity for LLM applications.

Two systems share one vocabulary (`privacy_ci.ci`):

* the Privacy Checklist: a regulation knowledge base and LLM judging over it;
* the Privacy Conductor: a deterministic gate between an assistant and a
  document store (`privacy_ci.conductor`).

The public API is re-exported here; modules under the subpackages are private
unless documented.
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
