"""Errors from the LLM layer, and the mapping from litellm's exceptions onto them.

The runner needs exactly two answers from an error: may this call be tried again later
(`retryable`), and does it doom every other call of the run (`FatalLLMError`: bad key,
no quota, unknown model)? Everything else about the provider's exception is noise, and
some of it is dangerous: providers echo the API key they were sent back in their error
text. So messages are scrubbed of secrets here, and the original exception is never
chained or kept (a traceback would print it).
"""

from __future__ import annotations

from typing import Any, Literal

from cogbias.core.errors import UserError
from cogbias.core.redact import redact

ErrorKind = Literal[
    "auth",
    "quota",
    "not_found",
    "bad_request",
    "timeout",
    "server",
    "rate_limit",
    "empty",
    "reasoning",  # the model spent its whole budget thinking and wrote no answer
    "other",
]


class LLMError(UserError):
    """A failed LLM call.

    Attributes:
        kind: one of "auth", "quota", "not_found", "bad_request", "timeout", "server",
            "rate_limit", "empty", "reasoning", "other".
        retryable: True when the failure is transient (429, 5xx, timeouts, connection).
        model: the model id the caller asked for.
        status_code: the HTTP status when there was one.
    """

    def __init__(
        self,
        message: str,
        *,
        kind: ErrorKind = "other",
        retryable: bool = False,
        model: str = "",
        status_code: int | None = None,
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.retryable = retryable
        self.model = model
        self.status_code = status_code

    @property
    def failure_kind(self) -> str:
        """The record-level kind (see `cogbias.core.records`): transient, fatal, unparseable,
        invalid, or stopped while reasoning."""
        if isinstance(self, FatalLLMError):
            return "fatal"
        if self.retryable:
            return "transient"
        if self.kind == "reasoning":
            return "stopped_reasoning"
        return "unparseable" if self.kind == "empty" else "invalid"

    def describe(self) -> str:
        """A few words on why the call failed, for progress displays."""
        words = _KIND_WORDS.get(self.kind, self.kind)
        return f"{words} (HTTP {self.status_code})" if self.status_code else words


_KIND_WORDS = {
    "rate_limit": "rate limit",
    "server": "server error",
    "timeout": "timeout",
    "empty": "empty answer",
    "reasoning": "stopped while reasoning",
    "bad_request": "request refused",
}


class FatalLLMError(LLMError):
    """Auth, quota or unknown-model failure: every further call would fail the same way,
    so the runner stops the whole run instead of recording thousands of identical errors."""


class MissingKeyError(FatalLLMError):
    """A call refused before it was sent: the provider's key variable is not set. Its message
    already says what to set, so pages show it alone, without advice on servers."""


def key_env_hint(model: str) -> str:
    """Name the environment variable that probably holds the key for `model`."""
    import litellm

    try:
        missing = litellm.validate_environment(model).get("missing_keys") or []
    except Exception:
        missing = []
    if missing:
        return f"{' / '.join(missing)} is not set"
    try:
        provider = litellm.get_llm_provider(model)[1]
    except Exception:
        provider = model.split("/", 1)[0] if "/" in model else "openai"
    return f"{provider.upper()}_API_KEY is probably wrong or lacks access"


_MISSING_CREDENTIALS = ("missing credentials", "api key", "api_key", "no key is set")
_QUOTA = ("insufficient_quota", "exceeded your current quota", "billing", "credit balance")
_UNKNOWN_MODEL = ("model_not_found", "does not exist", "llm provider not provided", "unknown model")


def _status_of(exc: BaseException) -> int | None:
    status = getattr(exc, "status_code", None)
    return status if isinstance(status, int) else None


def classify(
    exc: BaseException, model: str, api_base: str | None, api_key: str = "", hint: Any = None
) -> LLMError:
    """Turn any exception raised by `litellm.acompletion` into an `LLMError`; `hint(model)`
    names the key to check (default: litellm's guess for a provider's own host)."""
    import litellm

    ex = litellm.exceptions
    status = _status_of(exc)
    if isinstance(exc, ex.Timeout | TimeoutError):
        return classify_failure(None, str(exc), model, api_base, api_key, timeout=True)
    if status is None:  # litellm's own exceptions for failures without an HTTP answer
        for types, code in (
            (ex.AuthenticationError, 401),
            (ex.PermissionDeniedError, 403),
            (ex.RateLimitError, 429),
            (ex.NotFoundError, 404),
            (ex.BadRequestError | ex.UnprocessableEntityError, 400),
            (ex.APIConnectionError | ex.ServiceUnavailableError | ex.InternalServerError, 503),
        ):
            if isinstance(exc, types):
                status = code
                break
    return classify_failure(status, str(exc), model, api_base, api_key, hint=hint or key_env_hint)


def classify_failure(
    status: int | None,
    text: str,
    model: str,
    api_base: str | None,
    api_key: str = "",
    *,
    timeout: bool = False,
    hint: Any = None,
) -> LLMError:
    """An `LLMError` for a failed call: its HTTP status (None: no answer) and error text.

    Shared by the litellm path and the direct OpenAI-compatible path, so a failure means the
    same whichever transport met it. `hint(model)` names the key variable to check.
    """
    raw = redact(text, (api_key,)) or ""
    low = raw.lower()
    where = f" at {api_base}" if api_base else ""
    detail = raw[:500]

    def key_hint() -> str:
        return hint(model) if hint else "OPENAI_API_KEY (or the server's key) is probably wrong"

    def fatal(kind: ErrorKind, advice: str) -> FatalLLMError:
        message = f"{model}{where}: {advice}. Provider said: {detail}"
        return FatalLLMError(message, kind=kind, model=model, status_code=status)

    def error(kind: ErrorKind, retryable: bool) -> LLMError:
        message = f"{model}{where}: {kind} error: {detail}"
        return LLMError(message, kind=kind, retryable=retryable, model=model, status_code=status)

    if timeout:
        return error("timeout", True)
    if status in (401, 403):
        return fatal("auth", f"authentication failed; {key_hint()}")
    if status == 429:
        if any(s in low for s in _QUOTA):
            return fatal("quota", "the account has no quota or credit left")
        return error("rate_limit", True)
    if status == 402 or any(s in low for s in _QUOTA[:2]):
        return fatal("quota", "the account has no quota or credit left")
    if status == 404:
        return fatal("not_found", "model or endpoint not found; check the model id and api_base")
    if status in (400, 413, 422):
        if any(s in low for s in _UNKNOWN_MODEL):
            return fatal(
                "not_found", "unknown model; use a litellm model string like openai/gpt-4o"
            )
        return error("bad_request", False)
    if any(s in low for s in _MISSING_CREDENTIALS) and "missing" in low:
        # litellm reports a missing OpenAI key as an InternalServerError; it is not transient.
        return fatal("auth", f"no API key; {key_hint()}")
    if status is not None and (status >= 500 or status in (408, 409, 425)):
        return error("server", True)
    return error("other", False)


def retry_after_of(headers: Any) -> float | None:
    """Read `retry-after-ms` / `Retry-After` (seconds) from response headers."""
    if not headers:
        return None
    if isinstance(headers, dict):
        headers = {str(k).lower(): v for k, v in headers.items()}
    try:
        if (ms := headers.get("retry-after-ms")) is not None:
            return max(0.0, float(ms) / 1000)
        if (seconds := headers.get("retry-after")) is not None:
            return max(0.0, float(seconds))
    except (TypeError, ValueError):
        return None  # an HTTP-date; rare from LLM APIs, fall back to our own backoff
    return None


def retry_after_seconds(exc: BaseException) -> float | None:
    """Read `retry-after-ms` / `Retry-After` (seconds) from the exception's HTTP response."""
    headers: Any = getattr(exc, "headers", None)
    response = getattr(exc, "response", None)
    if not headers and response is not None:
        headers = getattr(response, "headers", None)
    return retry_after_of(headers)


class CacheMiss(Exception):
    """A cache-only client was asked something its cache cannot answer (see `on_miss`)."""

    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key
