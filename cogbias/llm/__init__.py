"""The LLM layer: one async client over litellm, a response cache protocol, local models.

Importing this package is cheap: litellm (about 3 s to import) loads on the first call.
`LITELLM_LOCAL_MODEL_COST_MAP` is set before any litellm import, because otherwise litellm
downloads its price map at import and, offline, retries for seconds.

    from cogbias.llm import LLMClient, LLMRequest
    client = LLMClient()
    answer = client.complete_sync(LLMRequest("local/smollm2", [("user", "Hi")], max_tokens=20))
"""

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from cogbias.llm.client import (  # noqa: E402
    ClientStats,
    LLMClient,
    LLMRequest,
    LLMResponse,
    ResponseCache,
    cache_key,
    get_litellm,
)
from cogbias.llm.errors import FatalLLMError, LLMError  # noqa: E402
from cogbias.llm.local import (  # noqa: E402
    LOCAL_MODELS,
    ensure_local_server,
    smollm2_gguf_path,
)
from cogbias.llm.profiles import ModelProfile, resolve  # noqa: E402
from cogbias.llm.random_provider import AnswerSpace  # noqa: E402
from cogbias.llm.registry import ModelInfo, load_models  # noqa: E402

__all__ = [
    "AnswerSpace",
    "ModelInfo",
    "load_models",
    "LOCAL_MODELS",
    "ClientStats",
    "FatalLLMError",
    "LLMClient",
    "LLMError",
    "LLMRequest",
    "LLMResponse",
    "ResponseCache",
    "cache_key",
    "ensure_local_server",
    "get_litellm",
    "ModelProfile",
    "resolve",
    "smollm2_gguf_path",
]
