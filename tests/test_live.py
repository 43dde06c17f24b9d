"""A question asked outside a run (`cogbias pair`, `preview`, Learn) reads and fills the same
response cache as runs do: asked twice, it is paid for once."""

from __future__ import annotations

from pathlib import Path

from fake_llm_server import FakeLLMServer

from cogbias.cli.main import main
from cogbias.llm import LLMRequest
from cogbias.runs import live, pipeline
from cogbias.store import Store


def test_cogbias_pair_answers_a_repeated_question_from_the_cache(tmp_path: Path, capsys) -> None:
    db = tmp_path / "c.db"
    with FakeLLMServer(lambda body: "Option 2") as server:
        args = ["pair", "anchoring", "--models", "openai/fake", "--api-base", server.base_url]
        args += ["--scoring", "choice"]  # sampled answers (its default would be probabilities)
        assert main([*args, "--db", str(db)]) == 0
        asked = server.calls
        assert asked >= 2  # both halves (and their extraction) went to the server
        assert main([*args, "--db", str(db)]) == 0
        assert server.calls == asked  # the second time, every answer came from the cache
    first, second = capsys.readouterr().out.split("--- openai/fake")[1:]
    assert first.split("pair time")[0] == second.split("pair time")[0]
    with Store(db) as store:
        assert sum(row["answers"] for row in store.cache_stats()) == asked


def test_a_failed_question_keeps_the_answers_it_got(tmp_path: Path) -> None:
    """The cache is written on the way out, also when the question failed half-way."""
    with FakeLLMServer(lambda body: "Option 1") as server, Store(tmp_path / "f.db") as store:
        request = LLMRequest("openai/fake", [("user", "anything")])
        try:
            with live.cached_client(store, api_base=server.base_url) as client:
                pipeline.run_sync(client.complete(request))
                raise RuntimeError("the page failed after the answer came")
        except RuntimeError:
            pass
        assert len(store.cache_stats()) == 1 and server.calls == 1
