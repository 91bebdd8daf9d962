"""The shared store behind Redis Sentinel (proxy/stores/sentinel.py): a real primary, a real
replica and a real ``redis-sentinel`` on loopback, the proxy's app in front of the demo upstream,
the primary killed mid-traffic. Every request is answered; what the primary had replicated
(checkpoints, a learned window) is read from the promoted replica; the store writes there after.
"""

from __future__ import annotations

import asyncio
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import openai
import pytest
import redis

from proxy.app import create_app
from proxy.config.settings import ConfigError, load_settings
from proxy.config.startup import key_notes
from proxy.demo.servers import BackgroundServer
from proxy.demo.upstream import create_upstream
from proxy.stores.codec import load
from proxy.stores.redis import RedisStore
from proxy.stores.sentinel import CHECK_SECONDS, SentinelTarget
from tests.e2e.conftest import first_request_summaries
from tests.e2e.test_checkpoints import over_budget_conversation
from tests.e2e.topology import Process, binary, free_port, wait_for

MODEL, TIGHT = "demo-model", "tight-model"  # summarized; cut to the last token (overflows)
SERVICE = "mymaster"


@dataclass
class Sentinelled:
    """A primary, its replica and one Sentinel watching them (quorum 1)."""

    primary: Process
    primary_port: int
    replica_port: int
    sentinel_port: int

    def named(self) -> int:
        """The port of the server the Sentinel names the primary."""
        _, port = self.client(self.sentinel_port).sentinel_get_master_addr_by_name(SERVICE)
        return int(port)

    @staticmethod
    def client(port: int) -> redis.Redis:
        return redis.Redis(port=port, socket_timeout=2)


@contextmanager
def sentinelled(workdir: Path) -> Iterator[Sentinelled]:
    server, sentinel = binary("redis-server"), binary("redis-sentinel")
    ports = free_port(), free_port(), free_port()
    base = ["--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", str(workdir)]
    base += ["--repl-diskless-sync-delay", "0"]  # the replica's first sync at once, not in 5 s
    conf = workdir / "sentinel.conf"  # the Sentinel rewrites it: a file of its own
    conf.write_text(
        f"port {ports[2]}\nbind 127.0.0.1\ndir {workdir}\n"
        f"sentinel monitor {SERVICE} 127.0.0.1 {ports[0]} 1\n"
        f"sentinel down-after-milliseconds {SERVICE} 500\n"
        f"sentinel failover-timeout {SERVICE} 2000\n"
    )
    with ExitStack() as stack:
        primary = stack.enter_context(
            Process([server, "--port", str(ports[0]), *base], workdir / "primary.log")
        )
        replica = [server, "--port", str(ports[1]), "--replicaof", "127.0.0.1", str(ports[0])]
        stack.enter_context(Process([*replica, *base], workdir / "replica.log"))
        trio = Sentinelled(primary, *ports)
        wait_for(lambda: _answers(lambda: _linked(trio)), "the replica in sync", 10)
        # Started after: its first look at the primary finds the replica (the next is 10 s on).
        stack.enter_context(Process([sentinel, str(conf)], workdir / "sentinel.log"))
        wait_for(lambda: _answers(lambda: _watched(trio)), "the Sentinel ready to promote", 10)
        yield trio


def _answers(check: Any) -> bool:
    try:
        return bool(check())
    except redis.RedisError:
        return False


def _linked(trio: Sentinelled) -> bool:
    info = trio.client(trio.replica_port).info("replication")
    return info.get("master_link_status") == "up"


def _watched(trio: Sentinelled) -> bool:
    """Whether the Sentinel could promote the replica (it has heard from it, and it is in
    sync): until then a failover finds no replica to promote."""
    replicas = trio.client(trio.sentinel_port).sentinel_slaves(SERVICE)
    return any(not r["is_disconnected"] and r["master-link-status"] == "ok" for r in replicas)


def conversation(name: str) -> list[dict[str, Any]]:
    messages = over_budget_conversation(16)
    messages[0] = {"role": "system", "content": f"Conversation {name}."}
    return messages


def send(client: openai.OpenAI, model: str, messages: list[dict[str, Any]]) -> Any:
    return client.chat.completions.with_raw_response.create(
        model=model, messages=messages, max_tokens=64
    ).headers


def checkpoint_ids(port: int) -> set[str]:
    """The checkpoints a server holds."""
    store = Sentinelled.client(port)
    return {load(v).id for key in store.scan_iter("cw:ck:*") for v in store.hvals(key)}


class Traffic(threading.Thread):
    """Growing conversations, one request after another, until stopped: when each was
    sent and answered, and what failed."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.client = openai.OpenAI(base_url=f"{url}/v1", api_key="sk", max_retries=0)
        self.answered: list[float] = []
        self.spans: list[tuple[float, float]] = []  # (sent, answered)
        self.failed: list[BaseException] = []
        self.stop = threading.Event()

    def run(self) -> None:
        messages: list[dict[str, Any]] = []
        while not self.stop.is_set():
            if len(self.answered) % 6 == 0:
                messages = conversation(f"traffic {len(self.answered)}")
            try:
                sent = time.monotonic()
                send(self.client, MODEL, messages)
                self.answered.append(time.monotonic())
                self.spans.append((sent, self.answered[-1]))
            except Exception as exc:  # an error answer or none: the test's failure
                self.failed.append(exc)
            grown = {"role": "user", "content": "Next: " + "and the plan's details " * 20}
            messages = [*messages, {"role": "assistant", "content": "noted"}, grown]


@pytest.mark.slow
def test_a_primary_killed_mid_traffic_loses_no_request_and_no_replicated_state(
    tmp_path: Path,
) -> None:
    with ExitStack() as stack:
        trio = stack.enter_context(sentinelled(tmp_path))
        demo = stack.enter_context(BackgroundServer(create_upstream(window=1024)))
        # Counts 1.3 times the proxy: the tight model's cut overflows once, and teaches its window.
        tight = stack.enter_context(BackgroundServer(create_upstream(1024, count_scale=1.3)))
        models = {MODEL: {"context_window": 1024, "tokenizer": "o200k_base"}}
        models[TIGHT] = {**models[MODEL], "upstream": "tight", "policy": "tight"}
        config = first_request_summaries(
            {
                "upstreams": {
                    "demo": {"base_url": f"{demo.url}/v1"},
                    "tight": {"base_url": f"{tight.url}/v1"},
                },
                "default_upstream": "demo",
                "models": models,
                "policies": {"tight": {"summarize": False, "cache_cut_share": 0}},
                "data_dir": str(tmp_path / "data"),
                "checkpoints": {
                    "backend": "redis",
                    "sentinel_nodes": [f"127.0.0.1:{trio.sentinel_port}"],
                    "service_name": SERVICE,
                },
            }
        )
        app = create_app(load_settings(None, **config))
        proxy = stack.enter_context(BackgroundServer(app))
        client = stack.enter_context(
            openai.OpenAI(base_url=f"{proxy.url}/v1", api_key="sk", max_retries=0)
        )
        runtime = app.state.runtime

        # Before: three checkpoints and a learned window, all replicated (WAIT after a write
        # of the test's: the replica has everything the primary had before it).
        made = {}
        for name in ("one", "two", "three"):
            event = send(client, MODEL, conversation(name))["x-contextwarden-checkpoint"]
            assert event.startswith("created"), event
            made[name] = event.split()[1]
        assert int(send(client, TIGHT, conversation("tight"))["x-contextwarden-retries"]) >= 1
        team = next(who for who, held in runtime.models.learned.items().items() if TIGHT in held)
        learned = runtime.models.learned.get(team, TIGHT)
        primary = trio.client(trio.primary_port)
        wait_for(lambda: set(made.values()) <= checkpoint_ids(trio.primary_port), "stored", 5)
        wait_for(lambda: primary.hgetall("cw:learned"), "the window stored", 5)
        primary.set("cw:test:fence", 1)
        assert primary.wait(1, 5000) == 1

        traffic = Traffic(proxy.url)
        traffic.start()
        wait_for(lambda: len(traffic.answered) >= 3, "traffic", 10)
        killed = time.monotonic()
        trio.primary.signal(signal.SIGKILL)  # no goodbye to anybody
        promoted = lambda: trio.named() == trio.replica_port  # noqa: E731
        wait_for(lambda: _answers(promoted), "the replica promoted", 10)

        # Summaries resume once the store rests no more (GuardedStore): on the new primary.
        def summarized() -> bool:
            event = send(client, MODEL, conversation(f"after {time.monotonic()}"))
            made["after"] = event.get("x-contextwarden-checkpoint", "").removeprefix("created ")
            return event.get("x-contextwarden-checkpoint", "").startswith("created")

        wait_for(summarized, "a summary after the failover", 15)
        recovered = time.monotonic()
        wait_for(lambda: len(traffic.answered) >= 3 + 6, "more traffic", 10)
        traffic.stop.set()
        traffic.join(10)

        assert traffic.failed == []  # every request answered, through the outage too
        # Answered through the outage: sent before the store was back, answered after the kill
        # (on a loaded machine one request may span the whole outage).
        assert any(sent < recovered and killed < done for sent, done in traffic.spans)
        for name in ("one", "two", "three"):  # read from the promoted replica
            event = send(client, MODEL, conversation(name))["x-contextwarden-checkpoint"]
            assert event == f"reused {made[name]}"
        assert set(made.values()) <= checkpoint_ids(trio.replica_port)  # "after" too
        windows = trio.client(trio.replica_port).hgetall("cw:learned")
        assert any(TIGHT.encode() in key for key in windows)
        time.sleep(2)  # two steps of reading the store's windows (proxy/edge/sharing.py)
        assert runtime.models.learned.get(team, TIGHT) == learned
        assert send(client, TIGHT, conversation("tight, again"))["x-contextwarden-retries"] == "0"


@pytest.mark.slow
async def test_after_an_operators_failover_the_store_writes_to_the_new_primary(
    tmp_path: Path,
) -> None:
    """``SENTINEL FAILOVER`` leaves the old primary up and taking writes until the Sentinels
    demote it (about ten seconds on), writes it then drops: the store's writes move to the new
    primary within ``CHECK_SECONDS`` of the Sentinels naming it."""
    with sentinelled(tmp_path) as trio:
        target = SentinelTarget(nodes=[("127.0.0.1", trio.sentinel_port)], service_name=SERVICE)
        store = RedisStore(target, 60, 16)
        try:
            await store.put_blob("before", b"1", 60)
            trio.client(trio.sentinel_port).execute_command("SENTINEL", "FAILOVER", SERVICE)
            wait_for(lambda: trio.named() == trio.replica_port, "the replica promoted", 10)
            switched, new = time.monotonic(), trio.client(trio.replica_port)
            while not new.exists("cw:blob:after"):
                assert time.monotonic() < switched + CHECK_SECONDS + 2
                await store.put_blob("after", b"1", 60)
                await asyncio.sleep(0.05)
        finally:
            await store.close()


CHECKPOINTS: list[tuple[dict[str, Any], str]] = [
    ({"backend": "redis"}, "needs url (e.g. redis://localhost:6379/0), or sentinel_nodes"),
    ({"backend": "redis", "sentinel_nodes": ["s:26379"]}, "needs service_name"),
    ({"backend": "redis", "sentinel_nodes": ["s"], "service_name": "m"}, "'s' is not host:port"),
    ({"backend": "redis", "sentinel_nodes": [["s", 0]], "service_name": "m"}, "greater than"),
    ({"backend": "redis", "sentinel_nodes": [["", 1]], "service_name": "m"}, "at least 1"),
    (
        {"backend": "redis", "url": "redis://r", "sentinel_nodes": ["s:1"], "service_name": "m"},
        "url or sentinel_nodes, not both",
    ),
    ({"sentinel_nodes": ["s:1"], "service_name": "m"}, "sentinel_nodes is for backend: redis"),
    ({"backend": "redis", "url": "redis://r", "service_name": "m"}, "only with sentinel_nodes"),
    ({"backend": "redis", "url": "redis://r", "db": 2}, "db: only with sentinel_nodes"),
]


@pytest.mark.parametrize(("checkpoints", "error"), CHECKPOINTS)
def test_a_bad_sentinel_setting_fails_at_start_naming_it(
    checkpoints: dict[str, Any], error: str
) -> None:
    with pytest.raises(ConfigError, match="checkpoints") as failed:
        load_settings(None, checkpoints=checkpoints)
    assert error in str(failed.value)


def test_sentinel_settings_in_litellms_shapes_and_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CW_SENTINEL_PASSWORD", "s3cret")
    nodes = '[["sentinel-1", 26379], "sentinel-2:26380", "[::1]:26381"]'
    monkeypatch.setenv("CONTEXTWARDEN_CHECKPOINTS__SENTINEL_NODES", nodes)
    config = load_settings(
        None,
        checkpoints={
            "backend": "redis",
            "service_name": "mymaster",
            "sentinel_password_env": "CW_SENTINEL_PASSWORD",
        },
    ).checkpoints
    assert config.sentinel_nodes == [("sentinel-1", 26379), ("sentinel-2", 26380), ("::1", 26381)]
    assert (config.sentinel_password, config.password, config.db) == ("s3cret", None, 0)


def test_an_unset_password_variable_is_said_at_start(monkeypatch: pytest.MonkeyPatch) -> None:
    """As an unset key is (``serve`` and ``check-config`` print it): the store connects
    without that password, and the server refuses it until the variable is set."""
    monkeypatch.delenv("CW_TEST_UNSET", raising=False)
    sentinel = {"backend": "redis", "sentinel_nodes": ["s:1"], "service_name": "m"}
    settings = load_settings(None, checkpoints={**sentinel, "password_env": "CW_TEST_UNSET"})
    assert settings.checkpoints.password is None
    assert (
        "CW_TEST_UNSET is not set: the checkpoint store logs in to the primary without a "
        "password" in key_notes(settings)
    )
