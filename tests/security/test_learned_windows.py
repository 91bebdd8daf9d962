"""One team cannot shrink a model's window for another, nor below a floor on its own."""

from __future__ import annotations

from typing import Any

import httpx
import orjson
import pytest
import respx

from proxy.windows.learned import LearnedWindows
from tests.proxy.upstreams.test_forwarding import BASE, OK, running

TEAM_A, TEAM_B, ADMIN = "cw-a-key", "cw-b-key", "cw-admin"


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("A_KEY", TEAM_A)
    monkeypatch.setenv("B_KEY", TEAM_B)
    monkeypatch.setenv("ADMIN_KEY", ADMIN)
    monkeypatch.setenv("UP_KEY", "sk-up")


def config() -> dict[str, Any]:
    return {
        "upstreams": {"demo": {"base_url": BASE, "api_key_env": "UP_KEY"}},
        "models": {"m": {"context_window": 8000, "tokenizer": "o200k_base"}},
        "auth": "keys",
        "admin_key_env": "ADMIN_KEY",
        "teams": {"a": {"key_envs": ["A_KEY"]}, "b": {"key_envs": ["B_KEY"]}},
        "policies": {"default": {"summarize": False}},
    }


def overflow(limit: int, prompt: int) -> httpx.Response:
    message = (
        f"This model's maximum context length is {limit} tokens. However, your messages "
        f"resulted in {prompt} tokens. Please reduce the length of the messages."
    )
    error = {"message": message, "type": "invalid_request_error", "code": "context_length_exceeded"}
    return httpx.Response(400, json={"error": error})


def body(words: int) -> dict[str, Any]:
    turns = [{"role": "user" if i % 2 == 0 else "assistant", "content": "w " * words}
             for i in range(9)]  # fmt: skip
    return {"model": "m", "messages": turns, "max_tokens": 100}


def budget(response: httpx.Response) -> int:
    return int(response.headers["x-contextwarden-budget"])


@respx.mock
async def test_a_skewed_count_shrinks_nothing_and_stays_in_its_team(env: None) -> None:
    # Team a's text makes the upstream count 20x what the proxy counts (a poisoning attempt).
    # What is learned is the upstream's own stated window, in its own units (8000, the
    # configured one); a ratio past the calibration's clamp calibrates nothing.
    def answer(request: httpx.Request) -> httpx.Response:
        sent = orjson.loads(request.content)
        mine = sum(len(str(m["content"]).split()) for m in sent["messages"])
        poisoned = b"POISON" in request.content
        return overflow(8000, mine * 20) if poisoned else httpx.Response(200, json=OK)

    respx.post(f"{BASE}/chat/completions").mock(side_effect=answer)
    async with running(config()) as c:
        a = {"authorization": f"Bearer {TEAM_A}"}
        b = {"authorization": f"Bearer {TEAM_B}"}
        before = budget(await c.post("/v1/chat/completions", json=body(50), headers=b))
        poison = body(50)
        poison["messages"][-1]["content"] += " POISON"
        await c.post("/v1/chat/completions", json=poison, headers=a)
        after_a = budget(await c.post("/v1/chat/completions", json=body(50), headers=a))
        after_b = budget(await c.post("/v1/chat/completions", json=body(50), headers=b))
        admin = {"authorization": f"Bearer {ADMIN}"}
        windows = (await c.get("/admin/learned-windows", headers=admin)).json()
    assert before == after_a == after_b
    assert windows["learned_windows"] == {"a": {"m": 8000}}
    assert "stated a window of 8000" in windows["evidence"]["a"]["m"]
    assert windows["calibration"] == {} and "pending" not in windows


@respx.mock
async def test_an_honest_small_window_is_learned_for_the_team(env: None) -> None:
    respx.post(f"{BASE}/chat/completions").mock(
        side_effect=[
            overflow(2048, 2600),
            httpx.Response(200, json=OK),
            httpx.Response(200, json=OK),
            httpx.Response(200, json=OK),
        ]
    )
    async with running(config()) as c:
        a = {"authorization": f"Bearer {TEAM_A}"}
        b = {"authorization": f"Bearer {TEAM_B}"}
        first = await c.post("/v1/chat/completions", json=body(280), headers=a)
        second = await c.post("/v1/chat/completions", json=body(10), headers=a)
        other = await c.post("/v1/chat/completions", json=body(10), headers=b)
    assert first.status_code == 200
    assert first.headers["x-contextwarden-retries"] == "1"
    assert budget(second) < 2048  # learned, applied from the start
    assert budget(other) > 4000  # team b never sent anything that overflowed


@respx.mock
async def test_an_operator_forgets_a_learned_window(env: None) -> None:
    """Learned windows only go down and persist: without a reset, one bad lesson (a thinking-
    heavy request's ratio, say) stays for good."""
    respx.post(f"{BASE}/chat/completions").mock(
        side_effect=[overflow(2048, 2600), *[httpx.Response(200, json=OK)] * 4]
    )
    admin = {"authorization": f"Bearer {ADMIN}"}
    a = {"authorization": f"Bearer {TEAM_A}"}
    async with running(config()) as c:
        await c.post("/v1/chat/completions", json=body(280), headers=a)
        learned = budget(await c.post("/v1/chat/completions", json=body(10), headers=a))
        listed = (await c.get("/admin/learned-windows", headers=admin)).json()
        assert listed["learned_windows"]["a"]["m"] <= 2048
        as_team = await c.delete("/admin/learned-windows/a/m", headers=a)
        forgot = await c.delete("/admin/learned-windows/a/m", headers=admin)
        again = await c.delete("/admin/learned-windows/a/m", headers=admin)
        after = budget(await c.post("/v1/chat/completions", json=body(10), headers=a))
        listed = (await c.get("/admin/learned-windows", headers=admin)).json()
    assert as_team.status_code in (401, 403)
    assert forgot.status_code == 200
    assert again.status_code == 404
    assert again.json()["error"]["type"] == "not_found_error"
    assert learned < 2048 < 4000 < after  # the configured 8000 is in force again
    assert listed["learned_windows"] == {}


def test_learned_windows_table() -> None:
    learned = LearnedWindows()
    assert learned.learn("a", "m", 3000)
    assert learned.get("a", "m") == 3000
    assert learned.get("b", "m") is None  # per team
    assert not learned.learn("a", "m", 0)  # a stated window of nothing teaches nothing
    assert learned.learn("a", "m", 500)
    assert learned.get("a", "m") == 500
    assert not learned.learn("a", "m", 9000)  # windows only go down
    assert learned.get("a", "m") == 500


@respx.mock
async def test_the_window_answer_says_whose_units_and_why_per_team(env: None) -> None:
    """``GET /admin/windows/{team}/{model}``: one answer from the window's one home. Team a
    learned 2048 from an overflow, team b did not; an unknown model says it is unknown."""
    respx.post(f"{BASE}/chat/completions").mock(
        side_effect=[overflow(2048, 2600), httpx.Response(200, json=OK)]
    )
    async with running(config()) as c:
        a = {"authorization": f"Bearer {TEAM_A}"}
        admin = {"authorization": f"Bearer {ADMIN}"}
        await c.post("/v1/chat/completions", json=body(280), headers=a)
        as_team = await c.get("/admin/windows/a/m", headers=a)
        learned = (await c.get("/admin/windows/a/m", headers=admin)).json()
        configured = (await c.get("/admin/windows/b/m", headers=admin)).json()
        unknown = (await c.get("/admin/windows/b/no-such-model", headers=admin)).json()
        no_team = await c.get("/admin/windows/z/m", headers=admin)
    assert as_team.status_code == 401 and no_team.status_code == 404
    assert configured == {
        "team": "b",
        "model": "m",
        "window": 8000,
        "upstream_window": 8000,
        "why": ["8000: configured under models: 'm'"],
    }
    assert learned["upstream_window"] == 2048 and learned["window"] <= 2048
    assert learned["why"][0] == "8000: configured under models: 'm'"
    assert learned["why"][1].startswith("2048: learned from the upstream's overflow error")
    assert unknown["window"] is None and unknown["why"][-1].startswith("unknown")
