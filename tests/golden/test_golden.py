"""Behaviour does not move: the recorded outputs of `tests.golden.outputs` are
reproduced exactly (timings and machine paths aside).

A difference here is either a bug or an intended change of output; the latter is
re-recorded in a commit of its own that says why (see `tests/golden/outputs.py`).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests._shared import data_dir, require_files
from tests.golden.outputs import OUTPUTS, compute, path


def _differences(want: Any, got: Any, where: str = "$") -> list[str]:
    if isinstance(want, dict) and isinstance(got, dict):
        out = []
        for key in sorted(set(want) | set(got)):
            if key not in got:
                out.append(f"{where}.{key}: missing")
            elif key not in want:
                out.append(f"{where}.{key}: new")
            else:
                out += _differences(want[key], got[key], f"{where}.{key}")
        return out
    if isinstance(want, list) and isinstance(got, list):
        if len(want) != len(got):
            return [f"{where}: {len(want)} items recorded, {len(got)} now"]
        out = []
        for i, (w, g) in enumerate(zip(want, got, strict=True)):
            out += _differences(w, g, f"{where}[{i}]")
        return out
    return [] if want == got else [f"{where}: recorded {want!r}, now {got!r}"]


@pytest.mark.slow
@pytest.mark.parametrize("name", list(OUTPUTS))
def test_output_is_unchanged(name: str) -> None:
    require_files(data_dir(), ["SOURCES.md"], "the shared data")
    recorded = json.loads(path(name).read_text())
    now = json.loads(json.dumps(compute(name), sort_keys=True))
    differences = _differences(recorded, now)
    assert not differences, f"{name} changed:\n" + "\n".join(differences[:40])
