"""Errors of the embedding models."""

from __future__ import annotations

from privacy_ci.errors import PrivacyCIError

__all__ = ["EmbeddingModelError", "ModelUnavailableError"]


class EmbeddingModelError(PrivacyCIError):
    """An embedding model that cannot be loaded or run (missing, damaged, unsupported)."""


class ModelUnavailableError(EmbeddingModelError):
    """An embedding model or its runtime is not installed or not available locally
    (nothing is ever downloaded)."""
