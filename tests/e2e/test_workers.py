"""``contextwarden serve --workers 2``: two processes on one port, sharing one SQLite file.
Each test connection is told apart by the worker that accepted it (its socket, found in
/proc), so that each conversation's requests go where the test says."""

from __future__ import annotations

import http.client
import os
import sys
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from proxy.demo.servers import BackgroundServer
from proxy.demo.upstream import create_upstream
from tests.e2e.test_checkpoints import over_budget_conversation
from tests.e2e.test_serving import ready
from tests.e2e.topology import Process, free_port, wait_for

if not Path("/proc/net/tcp").exists():  # pragma: no cover
    pytest.skip("the test tells workers apart through Linux's /proc", allow_module_level=True)


def workers(parent: int) -> list[int]:
    """The worker processes ``parent`` spawned (not multiprocessing's resource tracker)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                spawned = b"spawn_main" in (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if int(stat[1]) == parent and spawned:
                found.append(int(entry.name))
    return found


def accepted_by(pids: list[int], server_port: int, client_port: int) -> int | None:
    """Which of ``pids`` holds the server's end of the connection from ``client_port``."""
    inode = None
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local, remote = (int(a.split(":")[1], 16) for a in fields[1:3])
        if (local, remote) == (server_port, client_port):
            inode = fields[9]
    for pid in pids:
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            try:
                if os.readlink(fd) == f"socket:[{inode}]":
                    return pid
            except OSError:
                continue
    return None


def one_connection_each(port: int, pids: list[int]) -> Iterator[http.client.HTTPConnection]:
    """A kept-alive connection to each of ``pids``, in their order."""
    held: dict[int, http.client.HTTPConnection] = {}
    for _ in range(100):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        conn.request("GET", "/health")
        conn.getresponse().read()
        pid = accepted_by(pids, port, conn.sock.getsockname()[1])
        if pid is not None and pid not in held:
            held[pid] = conn
            if len(held) == len(pids):
                return (held[pid] for pid in pids)
        else:
            conn.close()
    raise RuntimeError("the workers did not both accept a connection")


def send(conn: http.client.HTTPConnection, messages: list[dict[str, Any]]) -> str:
    body = orjson.dumps({"model": "demo-model", "messages": messages, "max_tokens": 64})
    conn.request("POST", "/v1/chat/completions", body, {"content-type": "application/json"})
    answer = conn.getresponse()
    answer.read()
    assert answer.status == 200
    return answer.getheader("x-contextwarden-actions") or ""


def grown(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    more = {"role": "user", "content": "Next: " + "and the details of the plan " * 80}
    return [*messages, {"role": "assistant", "content": "noted"}, more]


def conversation(name: str, conns: list[http.client.HTTPConnection]) -> list[str]:
    """A request to each of ``conns`` in turn, grown by a turn of half the budget each time:
    the first is the conversation's first sight (truncated), the second outgrows that cut
    (summarized, if it may be)."""
    messages = over_budget_conversation(16)
    messages[0] = {"role": "system", "content": f"Conversation {name}."}
    actions = []
    for conn in conns:
        actions.append(send(conn, messages))
        messages = grown(messages)
    return actions


@pytest.mark.slow
def test_two_workers_share_seen_conversations_and_a_teams_quota(tmp_path: Path) -> None:
    app = create_upstream(window=1024)
    with ExitStack() as stack:
        demo = stack.enter_context(BackgroundServer(app))
        config = {
            "upstreams": {"demo": {"base_url": f"{demo.url}/v1"}},
            "models": {"demo-model": {"context_window": 1024, "tokenizer": "o200k_base"}},
            "data_dir": str(tmp_path / "data"),
            "teams": {"default": {"summarizer_calls_per_hour": 1}},
        }
        path = tmp_path / "workers.yaml"
        path.write_text(yaml.safe_dump(config))
        port = free_port()
        argv = [str(Path(sys.executable).with_name("contextwarden")), "serve"]
        argv += ["--config", str(path), "--port", str(port), "--workers", "2"]
        server = stack.enter_context(Process(argv, tmp_path / "workers.log"))
        url = f"http://127.0.0.1:{port}"
        wait_for(lambda: len(workers(server.pid)) == 2 and ready(url), "two workers", 90)
        a, b = one_connection_each(port, workers(server.pid))
        stack.callback(a.close)
        stack.callback(b.close)
        # Seen by worker a (first sight); summarized by worker b, to which it is no first
        # sight.
        first, second = conversation("one", [a, b])
        assert "summarize" not in first and "summarize" in second and "sticky" not in second
        # The hour's one summarizer call is taken, by b: a may not make another.
        assert "summarize" not in "".join(conversation("two", [b, a]))
    assert len(app.state.summaries) == 1
