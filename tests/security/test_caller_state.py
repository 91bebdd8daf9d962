"""R5: ``x-contextwarden-prefix`` was an oracle between users of one team: user B guessed user
A's message and read ``kept`` on the right guess, ``broken`` on the wrong ones. Per-caller state
is now keyed by the credential presented, and a caller without one is told nothing."""

from __future__ import annotations

from typing import Any

import pytest

from tests.security.conftest import Capture, ProxyFactory, keys_config

ALICE_KEY = "cw-alice-8888"
BOB_KEY = "cw-bob-9999"
DAVE_KEY = "cw-dave-0000"
SECRET = "My salary is 123,456 and my manager is Carol."


def conversation(last: str, turns: int = 30) -> list[dict[str, Any]]:
    """A long conversation (near its window, so its prefix is tracked) ending in ``last``."""
    messages = [{"role": "system", "content": "You are the HR assistant."}]
    messages.append({"role": "user", "content": "Hello, I have questions about my contract."})
    for i in range(turns):
        messages += [
            {"role": "assistant", "content": f"Answer {i}: " + "the policy says so. " * 12},
            {"role": "user", "content": f"Question {i + 1}: " + "and what about this? " * 12},
        ]
    messages.append({"role": "user", "content": last})
    return messages


def state(proxy: Any, key: str | None, messages: list[dict[str, Any]]) -> str | None:
    with proxy.client(key) as c:
        answer = c.post("/v1/chat/completions", json={"model": "gpt-4o", "messages": messages})
    assert answer.status_code == 200, answer.text
    value: str | None = answer.headers.get("x-contextwarden-prefix")
    return value


@pytest.fixture
def two_users(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ALICE_KEY", ALICE_KEY)
    monkeypatch.setenv("BOB_KEY", BOB_KEY)
    monkeypatch.setenv("DAVE_KEY", DAVE_KEY)


def test_a_user_of_the_same_team_cannot_confirm_anothers_message(
    capture: Capture, make_proxy: ProxyFactory, two_users: None
) -> None:
    config = keys_config(capture, models={"gpt-4o": {"context_window": 2600}})
    config["teams"]["hr"] = {"key_envs": ["ALICE_KEY", "BOB_KEY", "DAVE_KEY"]}
    proxy = make_proxy(**config)
    alice = conversation(SECRET)
    assert state(proxy, ALICE_KEY, alice) == "new"
    follow = [*alice, {"role": "assistant", "content": "Noted."}, {"role": "user", "content": "ok"}]
    # Alice's own state works as before: once her conversation is seen growing, its cut leaves
    # room to grow in (the first cut of one never seen is made to the budget).
    state(proxy, ALICE_KEY, follow)
    more = [*follow, {"role": "assistant", "content": "Sure."}, {"role": "user", "content": "ok"}]
    assert state(proxy, ALICE_KEY, more) == "kept"
    # Bob guesses Alice's last message right, Dave wrong: both learn nothing.
    for key, guess in ((BOB_KEY, SECRET), (DAVE_KEY, "My salary is 100,000.")):
        guessed = [*conversation(guess), {"role": "assistant", "content": "Noted."}]
        assert state(proxy, key, [*guessed, {"role": "user", "content": "ok"}]) == "new"


def test_callers_without_a_credential_are_told_nothing(
    capture: Capture, make_proxy: ProxyFactory
) -> None:
    """In passthrough, callers who send no credential cannot be told apart."""
    proxy = make_proxy(
        upstreams={"main": {"base_url": f"{capture.url}/v1"}},
        models={"gpt-4o": {"context_window": 2600}},
    )
    alice = conversation(SECRET)
    assert state(proxy, None, alice) is None
    follow = [*alice, {"role": "assistant", "content": "Noted."}, {"role": "user", "content": "ok"}]
    assert state(proxy, None, follow) is None
    assert state(proxy, "sk-own-key", follow) == "new"  # a caller with a key is its own
