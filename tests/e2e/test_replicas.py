"""Two proxies on one real Redis, a conversation's requests alternating between them: they
behave as one process (the recipe's full run, with a load balancer, is test_recipe.py)."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
import redis as redis_client

from proxy.app import create_app
from proxy.config.settings import load_settings
from proxy.demo.servers import BackgroundServer
from proxy.demo.upstream import create_upstream
from tests.e2e.redis_server import redis_server
from tests.e2e.test_checkpoints import SYSTEM, over_budget_conversation, user
from tests.e2e.topology import wait_for
from tests.e2e.workload import upstream_states

MODEL = "demo-model"


@dataclass
class Pair:
    upstream: Any  # the demo upstream's app: what it received, its summaries
    urls: list[str]
    apps: list[Any] | None = None  # the proxies' apps, in process
    redis: str = ""
    clients: list[openai.OpenAI] = field(default_factory=list)  # one per replica, as apps keep

    def client(self, k: int) -> openai.OpenAI:
        return self.clients[k]

    def send(self, k: int, messages: list[dict[str, Any]]) -> Any:
        return (
            self.client(k)
            .chat.completions.with_raw_response.create(
                model=MODEL, messages=messages, max_tokens=64
            )
            .headers
        )


def ready(url: str) -> bool:
    return httpx.get(f"{url}/ready").status_code == 200


@pytest.fixture
def make_pair(tmp_path: Path) -> Iterator[Any]:
    with ExitStack() as stack:

        def build(count_scale: float = 1.0, replicas: int = 2, **settings: Any) -> Pair:
            app = create_upstream(window=1024, count_scale=count_scale)
            demo = stack.enter_context(BackgroundServer(app))
            workdir = tmp_path / f"{replicas} replicas"  # a store of its own for each build
            workdir.mkdir(exist_ok=True)
            url = stack.enter_context(redis_server(workdir))
            urls, apps = [], []
            for name in "abc"[:replicas]:
                config = {
                    "upstreams": {"demo": {"base_url": f"{demo.url}/v1"}},
                    "models": {MODEL: {"context_window": 1024, "tokenizer": "o200k_base"}},
                    "data_dir": str(tmp_path / name),
                    "checkpoints": {"backend": "redis", "url": url},
                    **settings,
                }
                apps.append(create_app(load_settings(None, **config)))
                urls.append(stack.enter_context(BackgroundServer(apps[-1])).url)
            # As a load balancer would, before it sends them requests.
            wait_for(lambda: all(ready(url) for url in urls), "all ready", 60)
            clients = [
                stack.enter_context(openai.OpenAI(base_url=f"{u}/v1", api_key="sk", max_retries=0))
                for u in urls
            ]
            return Pair(app, urls, apps, url, clients)

        yield build


def test_a_conversation_seen_by_one_replica_is_summarized_by_the_other(make_pair: Any) -> None:
    """Its first sight truncates (it may be a one-off), and the next request replays that
    cut; the request that outgrows it, the first the other replica sees, is no first sight
    there: it is summarized, as in one process."""
    pair = make_pair()
    actions = grow(pair, over_budget_conversation(16), (0, 0, 1), (10, 40))
    assert actions == [
        "truncate_oldest,ledger",
        "truncate_oldest,ledger,sticky",
        "summarize,truncate_oldest,ledger",
    ]


def grow(
    pair: Pair,
    messages: list[dict[str, Any]],
    replicas: tuple[int, ...],
    lengths: tuple[int, ...] = (40, 40),
) -> list[str]:
    """A request of the conversation to each of ``replicas`` in turn, each grown by a turn of
    ``lengths`` phrases (a short one is replayed on the first's cut; a long one outgrows it);
    their actions."""
    actions = []
    for replica, length in zip(replicas, (*lengths, 0), strict=True):
        actions.append(pair.send(replica, messages)["x-contextwarden-actions"])
        grown = {"role": "user", "content": "Next: " + "and the details of the plan " * length}
        messages = [*messages, {"role": "assistant", "content": "noted"}, grown]
    return actions


def test_a_teams_summarizer_quota_holds_across_replicas(
    make_pair: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CW_ADMIN", "cw-admin")
    pair = make_pair(teams={"default": {"summarizer_calls_per_hour": 1}}, admin_key_env="CW_ADMIN")
    for k, name in enumerate(("one", "other")):
        messages = over_budget_conversation(16)
        messages[0] = {"role": "system", "content": f"Conversation {name}."}
        summarized = "summarize" in grow(pair, messages, (k, k, k))[-1]
        assert summarized == (k == 0)  # the other replica finds the hour's call taken
    assert len(pair.upstream.state.summaries) == 1
    stats = [
        httpx.get(f"{url}/admin/stats", headers={"authorization": "Bearer cw-admin"}).json()
        for url in pair.urls
    ]
    a, b = (s["summarizer_by_team"]["default"] for s in stats)
    assert (a["calls"], a["refused"], b["calls"]) == (1, 0, 0) and b["refused"] >= 1
    assert a["left_this_hour"] == b["left_this_hour"] == 0  # the store's count, on both


def quota_run(pair: Pair, replicas: int) -> tuple[int, int]:
    """Four conversations at once over six rounds, each request of each to the next replica:
    the summarizer's calls the upstream received and the checkpoints the store holds."""

    def talk(k: int) -> None:
        messages = over_budget_conversation(16)
        messages[0] = {"role": "system", "content": f"Conversation {k}."}
        for round_ in range(6):
            pair.send((k + round_) % replicas, messages)
            grown = {"role": "user", "content": f"Next {round_}: " + "the plan's details " * 40}
            messages = [*messages, {"role": "assistant", "content": "noted"}, grown]

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(talk, range(4)))
    # Background summaries done: their calls counted and their checkpoints stored.
    compactors = [app.state.runtime.compactor for app in pair.apps or []]
    wait_for(lambda: not any(c._background for c in compactors), "the background summaries", 30)
    store = redis_client.Redis.from_url(pair.redis)
    held = sum(store.hlen(key) for key in store.scan_iter("cw:ck:*"))
    return len(pair.upstream.state.summaries), held


@pytest.mark.slow
def test_three_replicas_spend_a_teams_summarizer_quota_as_one_process_does(
    make_pair: Any,
) -> None:
    """Four conversations at once, their requests spread over three replicas: the team's
    hour of 4 calls is 4 calls in all (the store's count, not each replica's), and they make
    checkpoints, as in one process (a checkpoint's pieces are taken from the quota before its
    first call: proxy/summaries/allowance.py; the race itself is in test_shared_state.py)."""
    teams = {"default": {"summarizer_calls_per_hour": 4}}
    one = quota_run(make_pair(replicas=1, teams=teams), 1)
    three = quota_run(make_pair(replicas=3, teams=teams), 3)
    assert one[0] == three[0] == 4
    assert one[1] >= 1 and three[1] >= 1


def test_alternating_replicas_report_the_prefix_the_upstream_saw(make_pair: Any) -> None:
    """Each request's ``x-contextwarden-prefix`` is what the upstream's own log shows: a
    replica compares with the conversation's last prompt, wherever it went."""
    pair = make_pair()
    messages: list[dict[str, Any]] = [SYSTEM]
    states = []
    for turn in range(24):
        messages.append(user(turn))
        raw = pair.client(turn % 2).chat.completions.with_raw_response.create(
            model=MODEL, messages=messages, max_tokens=64
        )
        states.append(raw.headers["x-contextwarden-prefix"])
        messages.append({"role": "assistant", "content": raw.parse().choices[0].message.content})
    received = [
        {**p, "messages": [{"role": "system", "content": "conversation one."}, *p["messages"][1:]]}
        for p in pair.upstream.state.received
    ]
    assert states == upstream_states(received)["one"]
    assert "broken" in states and states.count("kept") > states.count("broken")


def test_a_redis_restarted_empty_gets_the_replicas_scope_key_back(make_pair: Any) -> None:
    """The key that scopes checkpoints to a caller: both replicas hold the store's; the store
    loses it; within seconds it holds theirs again, so that a replica started now reads the
    one they hold (not a new one, which would keep its callers' checkpoints apart)."""
    pair = make_pair()
    store = redis_client.Redis.from_url(pair.redis)
    keys = [app.state.runtime.auth.scope_secret for app in pair.apps or []]
    assert keys[0] == keys[1] == store.get("cw:scope-secret")
    store.flushall()
    wait_for(lambda: store.get("cw:scope-secret") is not None, "the key back", 10)
    assert store.get("cw:scope-secret") == keys[0]


def test_a_window_learned_on_one_replica_is_used_and_forgotten_by_the_other(
    make_pair: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Replica a learns the window from an overflow (the upstream counts 1.3 times the
    proxy); within a second replica b holds it, and its next request fits at once instead of
    paying its own failed call. An operator's deletion through a: b forgets it too."""
    monkeypatch.setenv("CW_ADMIN", "cw-admin")
    tight = {"summarize": False, "cache_cut_share": 0}  # cut to the last token: overflows
    pair = make_pair(count_scale=1.3, policies={"default": tight}, admin_key_env="CW_ADMIN")
    a, b = (app.state.runtime for app in pair.apps or [])
    first = pair.send(0, over_budget_conversation(16))
    assert int(first["x-contextwarden-retries"]) >= 1
    # Learned for the caller (passthrough: per credential, proxy/edge/auth.py learns_as), whose
    # scope both replicas derive from the store's one key.
    team = next(who for who, models in a.models.learned.items().items() if MODEL in models)
    learned = a.models.learned.get(team, MODEL)
    assert learned is not None and b.models.learned.get(team, MODEL) is None
    wait_for(lambda: b.models.learned.get(team, MODEL) == learned, "b holds a's window", 5)
    wait_for(lambda: b.models.calibration.fit(team, MODEL) is not None, "and a's fit", 5)
    calls = len(pair.upstream.state.received)
    again = pair.send(1, over_budget_conversation(17))
    assert again["x-contextwarden-retries"] == "0"
    assert len(pair.upstream.state.received) == calls + 1  # one call: no failed one first
    assert int(again["x-contextwarden-budget"]) < 1024 - 64 - 16  # the learned window

    admin = {"authorization": "Bearer cw-admin"}
    gone = httpx.delete(f"{pair.urls[0]}/admin/learned-windows/{team}/{MODEL}", headers=admin)
    assert gone.status_code == 200
    wait_for(lambda: b.models.learned.get(team, MODEL) is None, "b forgets the window", 5)
    assert b.models.calibration.fit(team, MODEL) is None
    assert redis_client.Redis.from_url(pair.redis).hgetall("cw:learned") == {}
