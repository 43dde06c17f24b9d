"""Study runs for the app tests: real runs (`executor.execute`), offline or scripted.

`scripted` plays an OpenAI-compatible model (behind `FakeLLMServer`) whose self-help rewrite
visibly differs from the original and whose decisions carry Markdown and HTML around the word.
"""

from __future__ import annotations

from pathlib import Path

from cogbias.runs import executor, study_plan
from cogbias.runs.study_plan import StudySpec
from cogbias.store import Store
from tests.fake_llm_server import _last_user_text

HOSTILE = "**bold** <script>alert(1)</script>"


def study_run(db: Path, spec: StudySpec) -> str:
    """Plan and run a study to the end in this process; returns the run id."""
    with Store(db) as store:
        study = study_plan.load_study(spec.study, store)
        run = executor.execute(study_plan.plan(study_plan.resolve(spec, study), study), store)
    assert run.status == "done", run
    return run.id


def scripted(request: dict) -> str:
    """Rewrites say so; decisions admit, with Markdown and HTML around the word."""
    text = _last_user_text(request)
    if "[start of prompt]" in text:  # BiasBuster's self-help rewrite (§4.3)
        body = text.split("[start of prompt]", 1)[1].split("[end of prompt]", 1)[0].strip()
        return "[start of revised prompt]\nNEUTRAL REWRITE. " + body.splitlines()[-1]
    if "[text starts]" in text:
        body = text.split("[text starts]", 1)[1].split("[text ends]", 1)[0].strip()
        return "[rewritten text]\nNEUTRAL REWRITE. " + body.splitlines()[-1]
    if "one line per" in text:  # the revise turn
        return "\n".join(["admit"] * 6)
    return f"admit {HOSTILE}"
