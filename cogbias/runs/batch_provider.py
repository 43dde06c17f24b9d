"""Run through a provider's Batch API (OpenAI and any OpenAI-compatible server with
`/v1/files` and `/v1/batches`; Anthropic's Message Batches for `anthropic/…` models, see
`runs/batch_anthropic.py`): half the price, no rate limits, answers within hours.

The run goes out in rounds (see `cogbias.runs.batch`): each round's calls that the cache cannot
answer are written as one JSONL file per model (split at the provider's limits), uploaded,
and submitted as a batch; the batch's id and state are stored in `batches`, so a resumed run
polls the batches it already submitted instead of submitting them again. Finished batches'
answers go into the response cache at batch prices; requests a batch failed are asked again
in the next round (or interactively, with `fallback="interactive"`). When nothing is left to
ask, the executor scores every pair from the cache, so a batch run stores exactly what
an interactive run of the same spec stores.
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from cogbias.core.records import dumps
from cogbias.core.run_record import Run, RunStatus
from cogbias.llm import keys as key_rules
from cogbias.llm.errors import LLMError
from cogbias.llm.profiles import ModelProfile
from cogbias.runs import batch, batch_anthropic, executor, paired_plan
from cogbias.store import LEASE_STALE_S, Store, lease_owner, now

MAX_REQUESTS_PER_FILE = 50_000  # OpenAI's limit per batch file
MAX_BYTES_PER_FILE = 190 * 1024 * 1024  # under OpenAI's 200 MB
MAX_ATTEMPTS = 3  # batch rounds a request may fail in before the run gives it up to interactive
FINISHED = ("completed", "failed", "expired", "cancelled")
WAKE_S = 0.5  # how often the wait between polls, and a request in flight, look for a cancel
CALL_DEADLINE_S = 600.0  # one request to a Batch API, its retries included
DOWNLOAD_S = 3 * 3600.0  # one results file, whole (4 GB at 400 KB/s)
CANCEL_WAIT_S = 1.0  # after a cancel, how long the provider is given to take the batches' cancels


class Cancelled(Exception):
    """The run was cancelled (or lost its lease) while a request to a Batch API was waited on."""


class Watch:
    """A batch run's requests to a provider, each on its own thread while the run's thread
    beats the lease and looks for a cancel every WAKE_S: `cogbias cancel` stops the run within
    2 s whatever the server does (a poll that never answers, results that trickle in), and
    every request has an overall deadline. The request's thread touches no database (the
    store stays on the run's thread); one abandoned by a cancel ends with the process."""

    def __init__(self, store: Store, run_id: str, owner: str) -> None:
        self.store, self.run_id, self.owner = store, run_id, owner
        self.cancel_by: float | None = None  # once cancelled: when the provider's time is up

    def stopped(self) -> bool:
        """Beat the lease; True once the run is cancelled or its lease is lost."""
        current = self.store.heartbeat_run(self.run_id, self.owner)
        return current is None or bool(current.get("cancel_requested"))

    def __call__(self, fn: Callable[..., Any], *args: Any, seconds: float | None = None) -> Any:
        """`fn(*args)`, waited on for at most `seconds` (CALL_DEADLINE_S; once cancelling,
        until `cancel_by`); `Cancelled` as soon as the run is cancelled."""
        cancelling = self.cancel_by is not None
        if self.cancel_by is not None:
            seconds = max(self.cancel_by - time.monotonic(), WAKE_S / 10)
        seconds = seconds or CALL_DEADLINE_S
        box: dict[str, Any] = {}

        def target() -> None:
            try:
                box["value"] = fn(*args)
            except BaseException as exc:  # handed to the run's thread, raised there
                box["error"] = exc

        worker = threading.Thread(target=target, name="cogbias-batch-request", daemon=True)
        worker.start()
        end = time.monotonic() + seconds
        while worker.is_alive():
            worker.join(max(min(WAKE_S, end - time.monotonic()), 0.0))
            if not worker.is_alive():
                break
            if not cancelling and self.stopped():
                raise Cancelled
            if time.monotonic() >= end:
                raise LLMError(
                    f"the Batch API did not answer within {seconds:,.0f} s; the run keeps its "
                    f"batches: `cogbias resume {self.run_id} --batch` polls them again",
                    kind="timeout",
                    retryable=True,
                )
        if "error" in box:
            raise box["error"]
        return box.get("value")


def _client(model: str, api_base: str | None, key_env: str | None) -> Any:
    """The Batch API client for `model` at `api_base`, with the key `llm.keys` allows there:
    OPENAI_API_KEY for OpenAI's own host, `key_env` (--api-key-env) or the registry entry's
    for an endpoint of the user's, a placeholder otherwise; always explicit, so the SDK never
    reads OPENAI_API_KEY from the environment on its own."""
    import openai

    profile = paired_plan.resolve(model, api_base, api_key_env=key_env)
    return openai.OpenAI(
        base_url=profile.api_base or "https://api.openai.com/v1",
        api_key=key_rules.key_to_send(profile) or key_rules.PLACEHOLDER_KEY,
        max_retries=3,
    )


def check_batchable(plan: paired_plan.Plan) -> None:
    """Batch mode covers OpenAI, OpenAI-compatible endpoints and Anthropic; say so before
    any work, naming the model."""
    generator = [] if plan.dataset_instances else [plan.spec.generator]
    models = {*plan.spec.models, *generator}
    for model in sorted(m for m in models if not paired_plan.answers_offline(m, plan.spec)):
        profile = paired_plan.resolve(model, plan.spec.api_base)
        if not profile.batchable:
            raise ValueError(
                f"--batch works with OpenAI and OpenAI-compatible servers (openai/... models) "
                f"and Anthropic (anthropic/... models); {model} is not one: run it "
                "interactively, or export its calls with `cogbias batch export`"
            )
        if profile.batch_api == "anthropic" and model in generator and profile.json_schema:
            raise ValueError(
                f"--batch with {model} as the generator: its gap fills ask for a JSON schema, "
                "which Anthropic batches do not take here; fill the gaps with another "
                "generator (--generator examples, or an openai/... model), or run "
                "interactively"
            )


def execute(
    plan: paired_plan.Plan,
    store: Store,
    *,
    poll_seconds: float = 30.0,
    fallback: str = "round",
    progress: Any = None,
    **interactive: Any,
) -> Run:
    """Run a plan through batches, then score it from the cache; returns the run as stored."""
    check_batchable(plan)
    run_id = executor.create(plan, store)
    owner = lease_owner(os.getpid(), "batch")
    holder = store.claim_run(run_id, owner, os.getpid(), LEASE_STALE_S)
    if holder is not None:
        raise executor.RunBusy(
            f"run {run_id} is already being worked on by process {holder['pid']}; wait for it, "
            f"or cancel it with `cogbias cancel {run_id}`"
        )
    key_env = interactive.get("api_key_env") if plan.spec.api_base else None  # its endpoint's
    try:
        _batches(plan, store, run_id, owner, poll_seconds, fallback, progress, key_env)
    except (LLMError, batch.BatchError) as exc:  # a refused key, unreadable results: kept
        store.update_run(run_id, status=RunStatus.FAILED, error=str(exc))
        raise
    finally:
        store.release_run(run_id, owner)
    return executor.execute(plan, store, progress=progress, **interactive)


def _batches(
    plan: paired_plan.Plan,
    store: Store,
    run_id: str,
    owner: str,
    poll_seconds: float,
    fallback: str,
    progress: Any,
    key_env: str | None = None,
) -> None:
    store.update_run(run_id, status=RunStatus.RUNNING, pid=os.getpid())
    watch = Watch(store, run_id, owner)
    # the batch files, once uploaded, are the provider's: the folder goes when the run stops
    with tempfile.TemporaryDirectory(prefix=f"cogbias-{run_id}-") as folder:
        try:
            _rounds(plan, store, watch, poll_seconds, fallback, progress, Path(folder), key_env)
        except Cancelled:
            pass
        else:
            return
    watch.cancel_by = time.monotonic() + CANCEL_WAIT_S
    _cancel_open(store, run_id, key_env, watch)  # the interactive pass that follows sees it


def _rounds(
    plan: paired_plan.Plan,
    store: Store,
    watch: Watch,
    poll_seconds: float,
    fallback: str,
    progress: Any,
    folder: Path,
    key_env: str | None,
) -> None:
    """Poll, wait and submit until nothing is left to ask in batches; `Cancelled` when the run
    is cancelled (or loses its lease)."""
    run_id = watch.run_id
    while True:
        if watch.stopped():
            raise Cancelled
        if _poll(store, run_id, key_env, watch):  # batches still running: wait for them
            _say(progress, store, run_id)
            _wait(watch, poll_seconds)
            continue
        pending = batch.pending_requests(plan, store)
        attempts = store.batch_requests(list(pending))
        limit = 1 if fallback == "interactive" else MAX_ATTEMPTS
        todo = {
            k: v for k, v in pending.items() if (attempts.get(k) or {}).get("attempts", 0) < limit
        }
        if not todo:
            return  # what is left (if anything) is asked interactively
        _submit(store, run_id, todo, attempts, folder, key_env, watch)


def _wait(watch: Watch, seconds: float) -> None:
    """Sleep until the next poll, beating the lease and looking for a cancel every WAKE_S:
    `cogbias cancel` promises a stop within 2 s, whatever the poll interval."""
    end = time.monotonic() + seconds
    while (left := end - time.monotonic()) > 0:
        time.sleep(min(WAKE_S, left))
        if watch.stopped():
            raise Cancelled


def _submit(
    store: Store,
    run_id: str,
    todo: dict[str, tuple[Any, ModelProfile]],
    attempts: dict[str, dict[str, Any]],
    folder: Path,
    key_env: str | None,
    call: batch.Call,
) -> None:
    by_endpoint: dict[tuple[str, str | None], list[str]] = defaultdict(list)
    for key, (req, profile) in todo.items():
        by_endpoint[(req.model, profile.api_base)].append(key)
    for (model, _), keys in by_endpoint.items():
        anthropic = todo[keys[0]][1].batch_api == "anthropic"
        limits = (
            batch_anthropic.limits() if anthropic else (MAX_REQUESTS_PER_FILE, MAX_BYTES_PER_FILE)
        )
        for number, chunk in enumerate(_chunks(keys, todo, *limits)):
            profile = todo[chunk[0]][1]
            if anthropic:
                created = batch_anthropic.create(chunk, todo, key_env, call)
            else:
                path = folder / f"{model.replace('/', '_')}-{int(time.time())}-{number}.jsonl"
                created = _create(path, run_id, chunk, todo, key_env, call)
            store.save_batch(
                {
                    **created,
                    "run_id": run_id,
                    "model": model,
                    "api_base": profile.api_base,
                    "round": batch.round_of(todo[chunk[0]][0]),
                    "total": len(chunk),
                    "completed": 0,
                    "failed": 0,
                    "created_at": now(),
                }
            )
            store.save_batch_requests(
                [
                    {
                        "key": key,
                        "run_id": run_id,
                        "model": model,
                        "api_base": profile.api_base,
                        "request": dumps(todo[key][0].request_record()),
                        "round": batch.round_of(todo[key][0]),
                        "batch_id": created["id"],
                        "attempts": (attempts.get(key) or {}).get("attempts", 0) + 1,
                    }
                    for key in chunk
                ]
            )


def _create(
    path: Path,
    run_id: str,
    chunk: list[str],
    todo: dict[str, tuple[Any, ModelProfile]],
    key_env: str | None,
    call: batch.Call,
) -> dict[str, Any]:
    """Upload one OpenAI batch file and create its batch; returns its row for `batches`.
    (A create that a cancel abandons may still reach the provider; it is then not stored.)"""
    profile = todo[chunk[0]][1]
    lines = []
    for key in chunk:
        line = {"custom_id": key, "method": "POST", "url": "/v1/chat/completions"}
        line["body"] = todo[key][0].chat_body(profile.served_name)
        lines.append(dumps(line))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    client = _client(profile.id, profile.api_base, key_env)
    with path.open("rb") as handle:
        uploaded = call(lambda: client.files.create(file=handle, purpose="batch"))
    created = call(
        lambda: client.batches.create(
            input_file_id=uploaded.id,
            endpoint="/v1/chat/completions",
            completion_window="24h",
            metadata={"cogbias_run": run_id},
        )
    )
    expected = datetime.now(UTC) + timedelta(hours=24)
    return {
        "id": created.id,
        "status": created.status,
        "input_file": uploaded.id,
        "expected_at": expected.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
    }


def _chunks(
    keys: list[str],
    todo: dict[str, tuple[Any, ModelProfile]],
    max_requests: int = MAX_REQUESTS_PER_FILE,
    max_bytes: int = MAX_BYTES_PER_FILE,
) -> list[list[str]]:
    """Split one model's requests at the provider's per-batch request and size limits."""
    chunks: list[list[str]] = [[]]
    size = 0
    for key in keys:
        req, profile = todo[key]
        line = len(dumps(req.chat_body(profile.served_name)).encode()) + 200
        if chunks[-1] and (len(chunks[-1]) >= max_requests or size + line > max_bytes):
            chunks.append([])
            size = 0
        chunks[-1].append(key)
        size += line
    return [c for c in chunks if c]


def _poll(store: Store, run_id: str, key_env: str | None, call: batch.Call) -> bool:
    """Refresh the run's open batches; import finished ones. True while any is running."""
    running = False
    for row in store.batches(run_id, open_only=True):
        if _anthropic(row):
            running = batch_anthropic.poll(store, run_id, row, key_env, call) or running
            continue
        client = _client(row["model"], row["api_base"], key_env)
        current = call(client.batches.retrieve, row["id"])
        counts = current.request_counts
        update = {
            "id": row["id"],
            "status": current.status,
            "completed": counts.completed if counts else 0,
            "failed": counts.failed if counts else 0,
        }
        if current.status == "completed" and current.output_file_id:
            content = call(_content, client, current.output_file_id, seconds=DOWNLOAD_S)
            with tempfile.TemporaryDirectory(prefix="cogbias-openai-") as folder:
                results = Path(folder) / f"{row['id']}.jsonl"  # named in the importer's messages
                results.write_bytes(content)
                summary = batch.import_results(store, results, charged=True)
            store.add_run_cost(run_id, summary.cost, summary.tokens)
            batch.report(row["id"], summary)
            update["output_file"] = current.output_file_id
            update["error_file"] = current.error_file_id
        elif current.status not in FINISHED:
            running = True
        store.save_batch(update)
    return running


def _content(client: Any, file_id: str) -> bytes:
    """An OpenAI file's bytes (a batch's results)."""
    return client.files.content(file_id).content


def _cancel_open(store: Store, run_id: str, key_env: str | None, watch: Watch) -> None:
    """Ask the provider to cancel the run's open batches, within CANCEL_WAIT_S in all (the
    watch's `cancel_by`): a server that does not answer cannot hold the cancel up. A batch
    it did not confirm stays open (a resumed run polls it again)."""
    for row in store.batches(run_id, open_only=True):
        if watch.cancel_by is not None and time.monotonic() >= watch.cancel_by:
            print(f"batch {row['id']}: not cancelled (the provider's time was up)", file=sys.stderr)
            continue
        try:
            if _anthropic(row):
                batch_anthropic.cancel(store, row, key_env, watch)
                continue
            client = _client(row["model"], row["api_base"], key_env)
            cancelled = watch(client.batches.cancel, row["id"])
            store.save_batch({"id": row["id"], "status": cancelled.status})
        except Exception as exc:  # noqa: BLE001 (the run is cancelled whatever the server says)
            print(
                f"batch {row['id']}: the provider did not take the cancel ({exc})", file=sys.stderr
            )


def _anthropic(row: dict[str, Any]) -> bool:
    """Whether a stored batch is one of Anthropic's Message Batches."""
    return paired_plan.resolve(row["model"], row["api_base"]).batch_api == "anthropic"


def _say(progress: Any, store: Store, run_id: str) -> None:
    rows = store.batches(run_id, open_only=True)
    done = sum(r["completed"] or 0 for r in rows)
    total = sum(r["total"] or 0 for r in rows)
    print(f"{len(rows)} batch(es) running: {done}/{total} requests answered", file=sys.stderr)
