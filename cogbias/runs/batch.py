"""Hand a run's LLM calls to a batch engine (`vllm run-batch`, any OpenAI-batch-JSONL tool)
and take its answers back into the response cache.

A run's calls depend on each other (a gap fill, then the decision, then the extraction), so
they go out in rounds: `pending_requests` runs the pipeline against a client that answers
only from the cache and records every question it cannot answer. Those are exactly the
calls the run would make next. `export_requests` writes them as OpenAI batch JSONL with
`custom_id` = the call's cache key (and remembers them in `batch_requests`);
`import_results` validates an engine's output file and stores the answers in the cache in
one transaction. After the last round, `cogbias resume` scores everything from the cache
without a single interactive call: a batch run and an interactive run store the same rows.
"""

from __future__ import annotations

import json
import re
import stat
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cogbias.core import records
from cogbias.core.limits import loads_json
from cogbias.core.outputs import replacing
from cogbias.core.records import DecisionStatus, Instance, dumps
from cogbias.core.redact import redact, redact_json, redactor
from cogbias.core.safetext import terminal
from cogbias.llm import LLMClient, LLMRequest
from cogbias.llm.direct import close_sessions
from cogbias.llm.errors import CacheMiss
from cogbias.llm.factory import open_client
from cogbias.llm.profiles import ModelProfile, resolve
from cogbias.llm.thinking import billed_output
from cogbias.runs import paired, pipeline, scorers
from cogbias.runs.paired_plan import Plan
from cogbias.store import Store
from cogbias.store.buffered_cache import BufferedCache

ROUNDS = ("fill", "decide", "extract")
MAX_LINE_BYTES = 10 * 1024 * 1024
MAX_PROBLEMS_SHOWN = 20
MAX_PROBLEMS_KEPT = 1_000  # a file this broken is refused: no need to read on


class BatchError(ValueError):
    """A results file that cannot be imported; nothing was written."""


Collect = Callable[[str, LLMRequest, ModelProfile], None]
# How a batch run makes one request to a provider's Batch API: `call(fn, *args, seconds=…)`,
# its run's watch (`batch_provider.Watch`: a cancel seen within a second, an overall deadline,
# `seconds` or the watch's own).
Call = Callable[..., Any]
ERRORS_SHOWN = 10
_LINE = re.compile(r", line (\d+): ")


def round_of(req: LLMRequest) -> str:
    if req.response_format is not None:
        return "fill"
    return "extract" if req.messages[-1][1].startswith(pipeline.EXTRACT_PROMPT[:40]) else "decide"


def pending_requests(plan: Plan, store: Store) -> dict[str, tuple[LLMRequest, ModelProfile]]:
    """The calls the run would make next that the cache cannot answer yet."""
    pending: dict[str, tuple[LLMRequest, ModelProfile]] = {}
    collect_pending(plan, store, lambda key, req, profile: pending.setdefault(key, (req, profile)))
    return pending


def collect_pending(plan: Plan, store: Store, collect: Collect) -> None:
    """Hand each call the run would make next, not answerable from the cache, to `collect`."""
    if not scorers.get(plan.spec.scoring).batchable:
        can = " or ".join(s.spelling for s in scorers.all_scorers() if s.batchable)
        raise ValueError(
            f"batches take --scoring {can} only, not {plan.spec.scoring} (batch answers carry "
            "no log-probabilities here): run it interactively"
        )
    client = open_client(BufferedCache(store), api_base=plan.spec.api_base, on_miss=collect)
    pipeline.run_sync(_collect(plan, store, client))


async def _collect(plan: Plan, store: Store, client: LLMClient) -> None:
    spec = plan.spec
    instances: dict[str, Instance] = {}
    if plan.dataset_instances:
        instances = {r["id"]: Instance.from_row(r) for r in store.instances(plan.dataset_instances)}
    else:
        rows = {r["id"]: r for r in store.instances([j.id for j in plan.jobs])}
        for job in plan.jobs:
            if job.id in rows:
                instances[job.id] = Instance.from_row(rows[job.id])
                continue
            try:
                instances[job.id] = await pipeline.generate(
                    client, job.case, job.scenario.text, generator=spec.generator,
                    seed=spec.seed, temperature=spec.generator_temperature, index=job.index,
                    scenario_id=job.scenario.id,
                )  # fmt: skip
            except Exception:  # pending, or a failure the run itself will record
                continue
    retried = paired.retried_decisions(store, spec.run_id, retry_failed=False)
    skip = store.existing_decision_ids(spec.run_id) - set(retried)
    for instance, model, repeat, _ in paired.decision_jobs(plan, instances, skip):
        if instance.status != DecisionStatus.OK:
            continue
        try:
            ask = paired.pair_ask(plan, repeat)
            await scorers.get(spec.scoring).decide(client, instance, model, ask)
        except CacheMiss:
            continue
    await close_sessions()


def export_requests(
    plan: Plan,
    store: Store,
    path: str | Path,
    round_name: str | None = None,
    force: bool = False,
) -> dict[str, int]:
    """Write the run's next calls (optionally one round's) as OpenAI batch JSONL; returns the
    number written per round. The requests are remembered so their answers can be imported.

    The file is written beside `path` and renamed over it (`core.outputs.replacing`): never
    over the store's database, and over an existing file only with `force`."""
    if round_name is not None and round_name not in ROUNDS:
        raise ValueError(f"--round must be one of {', '.join(ROUNDS)}, not {round_name!r}")
    counts = dict.fromkeys(ROUNDS, 0)
    rows: list[dict[str, Any]] = []
    with (
        replacing(path, force, (store.path,)) as temporary,
        temporary.open("w", encoding="utf-8") as handle,
    ):

        def write(key: str, req: LLMRequest, profile: ModelProfile) -> None:
            kind = round_of(req)
            if round_name is not None and kind != round_name:
                return
            counts[kind] += 1
            line = {"custom_id": key, "method": "POST", "url": "/v1/chat/completions"}
            line["body"] = req.chat_body(profile.served_name)
            handle.write(json.dumps(line, ensure_ascii=False) + "\n")
            rows.append(
                {
                    "key": key,
                    "run_id": plan.spec.run_id,
                    "model": req.model,
                    "api_base": profile.api_base,
                    "request": dumps(req.request_record()),
                    "round": kind,
                }
            )
            if len(rows) >= 10_000:  # memory stays flat at paper scale
                store.save_batch_requests(rows)
                rows.clear()

        collect_pending(plan, store, write)
    store.save_batch_requests(rows)
    return counts


@dataclass
class ImportSummary:
    answers: int = 0
    errors: list[str] = field(default_factory=list)  # requests the engine could not answer
    problems: list[str] = field(default_factory=list)  # lines of a paid batch that were unreadable
    kept: int = 0  # answers already stored, identical: nothing to write
    conflicts: list[str] = field(default_factory=list)  # a different answer is already stored
    cost: float = 0.0  # what the answers were charged (batch prices; 0 for own engines)
    tokens: int = 0


# text, prompt tokens, completion tokens, a reasoning model's trace field, its thinking tokens
Answer = tuple[str, int, int, str, int]
Given = tuple[int, str, Answer | str]  # line number, custom_id, the answer or why none


Convert = Callable[[Any], Any]  # a provider's results line -> an OpenAI batch output line


def import_results(
    store: Store, path: str | Path, charged: bool = False, convert: Convert | None = None
) -> ImportSummary:
    """Store an engine's answers in the response cache (one transaction).

    A line that is not JSON, lacks a `custom_id`, repeats one (the first is kept), answers a
    request no export asked, or is longer than MAX_LINE_BYTES is a problem, named by its line
    number. A file from the user's own engine is then refused whole (it can be fixed and
    imported again); a provider's batch (`charged`: its answers were paid for, at its batch
    price, and its file cannot be fixed) keeps every good answer and lists the problems in
    `summary.problems`: the requests of those lines have no answer, so the run asks them
    again. Requests the engine reported as failed are listed and left out (asked again too).
    An answer already in the cache is never replaced: the same answer again is counted as
    kept, a different one is listed as a conflict (runs may already have been scored from
    the stored one). `convert` rewrites each parsed line first (Anthropic's results into
    OpenAI's shape, `llm.anthropic_batches.openai_line`)."""
    path = Path(path)
    problems: list[str] = []
    summary = ImportSummary()
    given = _given(path, problems, convert, read_all=charged)
    known = store.batch_requests([custom_id for _, custom_id, _ in given])
    answers = _exported(path, given, known, problems, summary)
    if problems and not charged:
        shown = problems[:MAX_PROBLEMS_SHOWN]
        more = len(problems) - len(shown)
        raise BatchError(
            "\n".join(shown) + (f"\n… and {more} more" if more else "") + "\nnothing was imported"
        )
    summary.problems = sorted(problems, key=_line_number)  # in the file's order
    rows = _new_calls(store, path, answers, known, charged, summary)
    if rows:  # nothing new: the database is not written at all
        store.put_llm_calls(rows)
    summary.answers = len(rows)
    return summary


def _given(path: Path, problems: list[str], convert: Convert | None, read_all: bool) -> list[Given]:
    """Every answered line of the file, once per `custom_id` (the first line that names it);
    what is wrong with the others goes to `problems`."""
    given: list[Given] = []
    seen: set[str] = set()
    for number, line in _lines(path, problems, read_all):
        where = f"{path.name}, line {number}"
        try:
            item = loads_json(line)
        except ValueError as exc:  # malformed, nested too deeply, a lone surrogate
            problems.append(f"{where}: not JSON we can read ({str(exc)[:120]})")
            continue
        if convert is not None:
            item = convert(item)
        custom_id = item.get("custom_id") if isinstance(item, dict) else None
        if not isinstance(custom_id, str) or not custom_id:
            problems.append(f"{where}: no custom_id")
            continue
        if custom_id in seen:
            problems.append(f"{where}: custom_id {custom_id[:16]}… answered twice (the first kept)")
            continue
        seen.add(custom_id)
        given.append((number, custom_id, _answer_of(item)))
    return given


def _exported(
    path: Path,
    given: list[Given],
    known: dict[str, dict[str, Any]],
    problems: list[str],
    summary: ImportSummary,
) -> list[tuple[int, str, Answer]]:
    """The answers to exported requests; an answer to none is a problem, a request the engine
    could not answer is listed in `summary.errors`."""
    answers: list[tuple[int, str, Answer]] = []
    for number, custom_id, answer in given:
        where = f"{path.name}, line {number}"
        if custom_id not in known:
            problems.append(
                f"{where}: custom_id {custom_id[:16]}… matches no exported request "
                "(export it with `cogbias batch export` first)"
            )
        elif isinstance(answer, str):
            summary.errors.append(f"{where}: {answer}")
        else:
            answers.append((number, custom_id, answer))
    return answers


def _new_calls(
    store: Store,
    path: Path,
    answers: list[tuple[int, str, Answer]],
    known: dict[str, dict[str, Any]],
    charged: bool,
    summary: ImportSummary,
) -> list[dict[str, Any]]:
    """The response-cache rows of the answers not in the cache yet, redacted and capped as
    the cache stores them and priced at the batch price when `charged`; an answer already
    stored is counted as kept, or listed as a conflict when it differs."""
    profiles: dict[tuple[str, str | None], ModelProfile] = {}
    rows = []
    clean = redactor()
    stored = store.llm_call_responses([custom_id for _, custom_id, _ in answers])
    for number, custom_id, (text, prompt_tokens, completion_tokens, trace, thinking) in answers:
        asked = known[custom_id]
        text = redact_json(records.cap_text(text)[0], clean) or ""  # as the cache stores it
        if custom_id in stored:
            if stored[custom_id] == text:
                summary.kept += 1
            else:
                summary.conflicts.append(
                    f"{path.name}, line {number}: custom_id {custom_id[:16]}… already has a "
                    "different answer in the cache; the stored answer is kept"
                )
            continue
        cost: float | None = 0.0
        if charged:  # a provider's batch: its batch price
            where = (asked["model"], asked["api_base"])
            if where not in profiles:
                profiles[where] = resolve(asked["model"], asked["api_base"])
            output = billed_output(completion_tokens, thinking)  # thinking priced as output
            cost = profiles[where].batch_price_per_call(prompt_tokens, output)
        rows.append(
            {
                "key": custom_id,
                "model": asked["model"],
                "api_base": asked["api_base"],
                "request": asked["request"],
                "response": text,
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "cost": cost,
                "latency_s": 0.0,
                "source": "batch",
                "reasoning": records.cap_text(trace)[0] or None,  # inline ones: split when read
                "reasoning_tokens": thinking,
            }
        )
        summary.cost += cost or 0.0  # an unknown price is stored as NULL, counted as nothing
        summary.tokens += prompt_tokens + completion_tokens
    return rows


def _lines(path: Path, problems: list[str], read_all: bool = False) -> Iterator[tuple[int, str]]:
    """The file's non-empty lines, each read with a bounded reader: a line past
    MAX_LINE_BYTES is reported and skipped without being held (the lines after it keep their
    numbers), and a device, pipe or folder (`/dev/zero` never ends) is refused before it is
    read. Reading stops once MAX_PROBLEMS_KEPT problems are known (the file is refused
    anyway), unless `read_all` (a paid batch keeps every good line)."""
    try:
        if not stat.S_ISREG(path.stat().st_mode):
            raise BatchError(
                f"{path}: not a regular file (a device, pipe or folder); pass the engine's "
                "output file"
            )
        handle = path.open("rb")
    except OSError as exc:
        raise BatchError(f"{path}: cannot be read ({exc.strerror})") from None
    with handle:
        number = 0
        while read_all or len(problems) < MAX_PROBLEMS_KEPT:
            raw = handle.readline(MAX_LINE_BYTES + 1)
            if not raw:
                return
            number += 1
            if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):
                problems.append(f"{path.name}, line {number}: longer than {MAX_LINE_BYTES} bytes")
                while (rest := handle.readline(1 << 20)) and not rest.endswith(b"\n"):
                    pass  # the rest of the long line, a megabyte at a time
                continue
            try:
                text = raw.decode("utf-8").strip()
            except UnicodeDecodeError:
                problems.append(f"{path.name}, line {number}: not UTF-8")
                continue
            if text:
                yield number, text
        problems.append(f"{path.name}: reading stopped after {MAX_PROBLEMS_KEPT} problems")


def _line_number(problem: str) -> int:
    """The line a problem names ("results.jsonl, line 12: ..."), for listing in file order."""
    found = _LINE.search(problem)
    return int(found.group(1)) if found else 0


def _shown(text: str, limit: int) -> str:
    """An engine's text for a message line: control characters escaped, at most `limit`."""
    text = terminal(text)
    return text if len(text) <= limit else text[:limit] + "…"


def _answer_of(item: dict[str, Any]) -> Answer | str:
    """(text, prompt tokens, completion tokens, trace, thinking tokens), or why the engine
    gave no answer."""
    if item.get("error"):
        error = item["error"]
        message = str(error.get("message") if isinstance(error, dict) else error)
        # redacted whole, then cut: a cut first could leave part of a key unrecognisable
        return f"the engine reported an error: {_shown(redact(message) or '', 200)}"
    response = item.get("response")
    if not isinstance(response, dict):
        return "no response object"
    status = response.get("status_code", 200)
    body = response.get("body")
    if status != 200 or not isinstance(body, dict):
        return f"the engine answered HTTP {str(status)[:20]}"
    from cogbias.llm.direct import answer_of, reasoning_of

    text, prompt_tokens, completion_tokens = answer_of(body)
    if not text or not text.strip():
        return "an empty answer"
    trace, thinking = reasoning_of(body)
    return text, prompt_tokens, completion_tokens, trace, thinking


def report(batch_id: str, summary: ImportSummary) -> None:
    """Say what a provider's batch did not answer, and which of its lines could not be read:
    never stored, asked again by the run."""
    for what, lines in (
        ("request(s) not answered (not stored; the run asks them again, as --batch-fallback "
         "says)", summary.errors),
        ("line(s) of its results could not be read (their requests are asked again)",
         summary.problems),
        ("answer(s) conflict with answers already stored (the stored ones are kept)",
         summary.conflicts),
    ):  # fmt: skip
        if lines:
            print(f"batch {batch_id}: {len(lines)} {what}:", file=sys.stderr)
            for line in lines[:ERRORS_SHOWN]:
                print(f"  {line}", file=sys.stderr)
            if len(lines) > ERRORS_SHOWN:
                print(f"  … and {len(lines) - ERRORS_SHOWN} more", file=sys.stderr)
