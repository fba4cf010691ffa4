"""The examples in examples/ run offline, each as its README says.

The embedded local model is slow on a small machine, so the answer step here is the
scripted test double (``--scripted``, which answers with the ids of the documents
it was handed); the retrieval, the gate, the chains and the MCP session are real.
The adapters package and ``privacy-ci --help`` import no framework.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from types import ModuleType
from typing import Any

import pytest

from privacy_ci.conductor import Corpus, Gate
from privacy_ci.errors import PrivacyCIError
from tests._shared import REPO
from tests.adapters._gated import permitted_ids

EXAMPLES = REPO / "examples"


def _example(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # pydantic resolves the example's annotations there
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    ("name", "argv"),
    [
        ("langchain_gated_rag", ["--scripted"]),
        ("langchain_gated_rag", ["--http", "--agent", "N01", "--retrieve-only", "-k", "5"]),
        ("llamaindex_gated_query", ["--scripted", "--http"]),
        ("mcp_gated_agent", ["--scripted"]),
    ],
    ids=["langchain", "langchain-http-nurse", "llamaindex-http", "mcp"],
)
def test_example_runs_offline(
    name: str, argv: list[str], corpus: Corpus, gate: Gate, capfd: pytest.CaptureFixture[str]
) -> None:
    out: dict[str, Any] = _example(name).main(argv)
    agent = argv[argv.index("--agent") + 1] if "--agent" in argv else "D01"
    admitted = out["admitted"]
    assert admitted and set(admitted) <= permitted_ids(corpus, gate, agent)
    printed = capfd.readouterr().out
    assert all(f"admitted {doc_id}" in printed for doc_id in admitted)
    if "--retrieve-only" in argv:
        assert "answer" not in out
        return
    assert admitted[0] == "RMC-LAB-003"  # the doctor's question is about this panel
    assert "scripted test double" in out["answer"]
    assert out["cited"] == admitted and out["rejected"] == []  # it saw exactly these
    if name == "mcp_gated_agent":
        assert out["tools"] == ["retrieve", "decide"] and out["spoofed_error"]
        assert out["requester"] == "D01" and out["out_of_reach"]["rule"] == "not_available"


def test_frameworks_are_imported_lazily() -> None:
    code = (
        "import sys, privacy_ci.adapters, privacy_ci.cli.main\n"
        "loaded = [m for m in sys.modules if m.split('.')[0] in"
        " ('langchain_core', 'llama_index', 'mcp', 'mcp_types')]\n"
        "print(loaded)"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert run.stdout.strip() == "[]"


def test_a_missing_framework_names_its_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    for module in ("privacy_ci.adapters.langchain", "privacy_ci.adapters.mcp"):
        monkeypatch.delitem(sys.modules, module, raising=False)
    monkeypatch.setitem(sys.modules, "langchain_core.retrievers", None)
    monkeypatch.setitem(sys.modules, "mcp.server.lowlevel", None)
    with pytest.raises(ImportError, match=r"pip install 'privacy-ci\[langchain\]'") as info:
        importlib.import_module("privacy_ci.adapters.langchain")
    assert isinstance(info.value, PrivacyCIError)  # the CLI prints it as one error line
    with pytest.raises(PrivacyCIError, match=r"pip install 'privacy-ci\[mcp\]'"):
        importlib.import_module("privacy_ci.adapters.mcp")
