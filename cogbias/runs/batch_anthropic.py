"""A `--batch` run's requests to `anthropic/…` models, through Anthropic's Message Batches.

The batch engine (`runs/batch_provider.py`) is the same for every provider: it asks which
calls the cache cannot answer, hands each model's share to that model's Batch API, stores
the batches in `batches` and the requests in `batch_requests`, polls, and scores from the
cache at the end. This module is the part that differs for Anthropic: how a batch is
created (`llm/anthropic_batches.py` builds each request's params as litellm would send them
interactively), what its states mean in the words the store keeps, and how its results
reach the cache: `batch.import_results` reads the results file itself, each line rewritten
as the OpenAI batch line it knows (`openai_line`), so its messages name the results' own line
numbers, and it validates, redacts and stores every good answer in one transaction. A line it
cannot read (not JSON, no or an unknown `custom_id`, past 10 MB) costs only itself: the
answers Anthropic charged for are kept. Errored, expired and cancelled requests, and the
requests of unreadable lines, are never answers: they are listed, and the run asks them again
in its next round (or interactively, as `--batch-fallback` says).
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from cogbias.llm import keys as key_rules
from cogbias.llm.anthropic_batches import (
    MAX_BYTES,
    MAX_REQUESTS,
    RESULTS_DEADLINE_S,
    TIMEOUT_S,
    BatchesAPI,
    checked_id,
    custom_id,
    message_params,
    openai_line,
)
from cogbias.llm.errors import LLMError
from cogbias.llm.profiles import ModelProfile
from cogbias.runs import batch, paired_plan
from cogbias.store import Store

# Anthropic's processing_status in the store's words (`Store.batches(open_only=True)`)
STATUS = {"in_progress": "in_progress", "canceling": "cancelling"}


def api(model: str, api_base: str | None, key_env: str | None) -> BatchesAPI:
    """The Batches API of `model` at `api_base`, with the key `llm.keys` allows there."""
    profile = paired_plan.resolve(model, api_base, api_key_env=key_env)
    return BatchesAPI(profile, key_rules.key_to_send(profile))


def limits() -> tuple[int, int]:
    """Requests and bytes per batch."""
    return MAX_REQUESTS, MAX_BYTES


def create(
    keys: list[str],
    todo: dict[str, tuple[Any, ModelProfile]],
    key_env: str | None,
    call: batch.Call,
) -> dict[str, Any]:
    """Submit one batch of `keys`; returns its row for `batches` (id, status, expiry)."""
    profile = todo[keys[0]][1]
    requests = [
        {"custom_id": custom_id(key), "params": message_params(todo[key][0], profile)}
        for key in keys
    ]
    created = call(api(profile.id, profile.api_base, key_env).create, requests)
    return {
        "id": _id_of(created),
        "status": status_of(created),
        "input_file": None,
        "expected_at": str(created.get("expires_at") or "")[:40] or None,
    }


def poll(
    store: Store,
    run_id: str,
    row: dict[str, Any],
    key_env: str | None,
    call: batch.Call,
) -> bool:
    """Refresh one batch; import its results once it has ended. True while it runs. Each
    request to Anthropic goes through `call` (the run's watch: its cancel and deadline)."""
    batches = api(row["model"], row["api_base"], key_env)
    current = call(batches.retrieve, row["id"])
    counts = current.get("request_counts")
    counts = counts if isinstance(counts, dict) else {}
    update = {
        "id": row["id"],
        "status": status_of(current),
        "completed": _count(counts.get("succeeded")),
        "failed": sum(_count(counts.get(k)) for k in ("errored", "expired", "canceled")),
    }
    if current.get("processing_status") == "ended":
        summary = _import(store, batches, row["id"], call)
        store.add_run_cost(run_id, summary.cost, summary.tokens)
        update["output_file"] = f"{row['id']}/results"
        batch.report(row["id"], summary)
    store.save_batch(update)
    return update["status"] in STATUS.values()


def cancel(store: Store, row: dict[str, Any], key_env: str | None, call: batch.Call) -> None:
    """Ask Anthropic to cancel a batch. It ends later ("cancelling" until then): a resumed
    `--batch` run polls it and keeps the answers it finished before the cancel."""
    current = call(api(row["model"], row["api_base"], key_env).cancel, row["id"])
    store.save_batch({"id": row["id"], "status": status_of(current)})


def status_of(batch_object: dict[str, Any]) -> str:
    """The batch's state as the store says it: in_progress, cancelling, completed or cancelled."""
    status = batch_object.get("processing_status")
    if status == "ended":
        return "cancelled" if batch_object.get("cancel_initiated_at") else "completed"
    if status not in STATUS:
        raise LLMError(f"Anthropic's Batches API sent an unknown state {str(status)[:40]!r}")
    return STATUS[status]


def _id_of(created: dict[str, Any]) -> str:
    return checked_id(created.get("id"))  # type: ignore[arg-type]


def _count(value: Any) -> int:
    return value if isinstance(value, int) and 0 <= value < 2**53 else 0


def _import(
    store: Store, batches: BatchesAPI, batch_id: str, call: batch.Call
) -> batch.ImportSummary:
    """Fetch the results and import them, each line rewritten as an OpenAI batch line."""
    with tempfile.TemporaryDirectory(prefix="cogbias-anthropic-") as folder:
        results = Path(folder) / f"{batch_id}.jsonl"  # the name the importer's messages say
        call(batches.results, batch_id, results, seconds=RESULTS_DEADLINE_S + TIMEOUT_S)
        return batch.import_results(store, results, charged=True, convert=openai_line)
