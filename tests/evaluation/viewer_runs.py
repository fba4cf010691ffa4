"""Runs for the report viewer's browser tests and README screenshots.

Three runs over one dataset, each with a known pattern of right and wrong cases:

* ``dp-run``: the real ``dp`` method over the scripted test backend; right except on
  every 7th case; case 3 answers something unparsable that tries to load an image
  from the network and run a script (it must arrive escaped);
* ``cot-run``: ``cot-auto`` over the scripted backend, always "A. Prohibited";
* ``reasoner-run``: a stand-in for the ci-reasoner (model-free), whose ``reason``
  step records a fact read with its quote and the deciding rule in the facts-then-law
  judge's format; on case 20 all three runs give the same wrong verdict.

Screenshots (the README's report section), from the repository root::

    .venv/bin/python -m tests.evaluation.viewer_runs docs/images [--dataset real --limit 40]

With ``--dataset`` the runs judge a sample of that dataset (the real ci-reasoner then
replaces the stand-in); the default is the toy dataset of the tests.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from privacy_ci.cases import Dataset
from privacy_ci.ci import Verdict
from privacy_ci.evaluation import run_eval_sync
from privacy_ci.judging import Event, Judgment, MethodIdentity, StepRecord, build_method
from privacy_ci.llm import GenerationSettings, LLMClient, Message
from privacy_ci.llm.testing import ScriptedTestBackend

from . import toy_dataset

__all__ = ["HOSTILE", "ReasonerStandIn", "build_runs", "main", "screenshots"]

HOSTILE = (
    '<img src="https://example.org/pixel.png"><script>fetch("https://example.org/x")'
    "</script> not a choice"
)
_CHOICE = {
    Verdict.PROHIBIT: "Choice: A. Prohibited",
    Verdict.PERMIT: "Choice: B. Permitted",
    Verdict.NOT_APPLICABLE: "Choice: C. Not related",
}
_WRONG = {
    Verdict.PROHIBIT: Verdict.PERMIT,
    Verdict.PERMIT: Verdict.PROHIBIT,
    Verdict.NOT_APPLICABLE: Verdict.PERMIT,
}


def _dp_script(dataset: Dataset) -> Any:
    """Answers from the case the prompt holds: gold, wrong on every 7th, garbage on 3."""
    by_text = [(c.text, i, c.label) for i, c in enumerate(dataset.cases)]

    def answer(messages: Sequence[Message], _settings: GenerationSettings) -> str:
        prompt = messages[-1].content
        for text, index, gold in by_text:
            if text in prompt:
                if index == 3:
                    return HOSTILE
                verdict = _WRONG[gold] if index % 7 == 6 else gold
                return f"The flow is judged on its facts.\n{_CHOICE[verdict]}"
        return "Choice: C. Not related"

    return answer


# the rule the stand-in decides by, per verdict, and the purpose it says it read
_STAND_IN_RULES = {
    Verdict.PERMIT: (
        "treatment",
        {
            "id": "164.506(c)(2)-treatment",
            "paragraph": "164.506(c)(2)",
            "title": "Disclosure for treatment activities of a health care provider",
            "effect": "permit",
        },
    ),
    Verdict.PROHIBIT: (
        "marketing",
        {
            "id": "164.508(a)(3)-marketing",
            "paragraph": "164.508(a)(3)",
            "title": "Marketing needs an authorization",
            "effect": "prohibit",
        },
    ),
    Verdict.NOT_APPLICABLE: (
        "other",
        {
            "id": "not-health-information",
            "paragraph": "160.103(Protected health information)",
            "title": "No health information about an individual",
            "effect": "not_applicable",
        },
    ),
}


def _reasoning(verdict: Verdict, text: str) -> dict[str, Any]:
    """A facts-then-law record (`FactJudgment.as_dict`'s shape): one fact read with its
    quote, and the rule that decided on it."""
    quote = text[: min(len(text), 40)]
    purpose, rule = _STAND_IN_RULES[verdict]
    fact = {
        "value": purpose,
        "source": "read",
        "quote": quote,
        "start": 0,
        "end": len(quote),
        "note": "a stand-in reading",
    }
    decision = {
        "verdict": verdict.value,
        "determined": True,
        "rule": rule,
        "used": {"purpose": fact},
        "presumed": {},
        "questions": [],
        "near_misses": [],
        "exhausted": False,
    }
    return {
        "verdict": verdict.value,
        "determined": True,
        "law": "stand-in-law-v1",
        "facts": {"purpose": fact},
        "decision": decision,
    }


@dataclass
class ReasonerStandIn:
    """A model-free method with the ci-reasoner's record shape: right on even cases but
    case 20, where it is wrong as the other two runs are (they agree, all wrong)."""

    dataset: Dataset
    name: str = "ci-reasoner"

    def identity(self) -> MethodIdentity:
        return MethodIdentity(self.name)

    async def judge(self, event: Event) -> Judgment:
        index = next(i for i, c in enumerate(self.dataset.cases) if c.id == event.id)
        gold = self.dataset.cases[index].label
        verdict = gold if index % 2 == 0 and index != 20 else _WRONG[gold]
        parsed = _reasoning(verdict, event.text)
        step = StepRecord(
            name="reason",
            parsed=parsed,
            retrieved_ids=[parsed["decision"]["rule"]["paragraph"]],
            latency_s=0.05,
        )
        return Judgment(self.name, verdict, steps=[step], backend="model-free")


def build_runs(
    root: Path, dataset: Dataset | None = None, *, real_reasoner: bool = False
) -> list[Path]:
    """Write the three runs under `root`; returns their folders."""
    ds = dataset if dataset is not None else toy_dataset(30)
    dp = build_method("dp", LLMClient(ScriptedTestBackend(_dp_script(ds)), cache=None))
    cot = build_method(
        "cot-auto",
        LLMClient(
            ScriptedTestBackend(["Plans: ...\nChoice: A. Prohibited"], cycle=True), cache=None
        ),
    )
    reasoner: Any = build_method("ci-reasoner", None) if real_reasoner else ReasonerStandIn(ds)
    out = []
    for name, method in (("dp-run", dp), ("cot-run", cot), ("reasoner-run", reasoner)):
        run_eval_sync(method, ds, root / name, progress=False, bootstrap=200, concurrency=4)
        out.append(root / name)
    return out


def screenshots(report: Path, out_dir: Path) -> list[Path]:
    """PNG screenshots of a report at 1280x800 and 390x844 (the first screen of each)."""
    from playwright.sync_api import sync_playwright

    from tests._browser import CHROMIUM_ARGS, chromium_path

    executable = chromium_path()
    if executable is None:
        raise SystemExit("Chromium is not found (apt-get install chromium)")
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            for name, width, height in (("desktop", 1280, 800), ("phone", 390, 844)):
                page = browser.new_page(viewport={"width": width, "height": height})
                page.goto(report.as_uri())
                path = out_dir / f"report_{name}.png"
                page.screenshot(path=str(path))
                written.append(path)
                # the two-click path: a headline count, then a case
                page.locator(".headline a.case-link").nth(1).click()
                page.locator(".drilldown tr.case:not([hidden]) button.open").first.click()
                page.wait_for_timeout(100)
                path = out_dir / f"report_{name}_case.png"
                page.screenshot(path=str(path))
                written.append(path)
                page.close()
        finally:
            browser.close()
    return written


def main(argv: Sequence[str] | None = None) -> int:
    import tempfile

    from privacy_ci.evaluation import write_report

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="folder for the PNG files")
    parser.add_argument("--dataset", help="a dataset name (default: the toy dataset)")
    parser.add_argument("--limit", type=int, default=40)
    args = parser.parse_args(argv)
    dataset = None
    if args.dataset:
        from privacy_ci.cases import load_dataset

        dataset = load_dataset(args.dataset, resolve_gold=False).sample(args.limit, seed=1)
    with tempfile.TemporaryDirectory() as tmp:
        runs = build_runs(Path(tmp) / "runs", dataset, real_reasoner=dataset is not None)
        written = write_report(runs, Path(tmp) / "report")
        for path in screenshots(written["html"], args.out):
            print(path, f"{path.stat().st_size / 1024:.0f} KiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
