"""The scripted test double, for tests of code that calls a model.

`ScriptedTestBackend` replays scripted answers or failures. It is never selectable
through configuration, and every completion it returns names the provider
``scripted-test-double`` (`TEST_DOUBLE_PROVIDER`), so no number it produces can pass
for model accuracy (`is_test_double` tells reports so).

`embedded_unavailable_reason` says why the embedded model cannot run on this machine
(None when it can): tests that need the real model skip with that reason, and only
then.
"""

from privacy_ci.llm._embedded import embedded_unavailable_reason
from privacy_ci.llm._scripted import TEST_DOUBLE_PROVIDER, ScriptedTestBackend, is_test_double

__all__ = [
    "TEST_DOUBLE_PROVIDER",
    "ScriptedTestBackend",
    "embedded_unavailable_reason",
    "is_test_double",
]
