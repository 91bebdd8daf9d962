"""``/v1/completions`` through the real openai SDK: a prompt over the window is cut to fit,
its head and tail kept, streaming and not; nothing over the window reaches the upstream."""

from __future__ import annotations

import openai
import pytest

from strategies.prompt_cut import MARKER
from tests.e2e.conftest import MODEL, StackFactory

HEAD = "BEGINNING: you are summarizing the report below. "
TAIL = " END: so what is the single most important finding?"


def prompt(words: int) -> str:
    return HEAD + " ".join(f"finding{i % 97} about item {i}." for i in range(words)) + TAIL


@pytest.mark.parametrize("stream", [False, True])
def test_a_prompt_over_the_window_is_cut_middle_out(make_stack: StackFactory, stream: bool) -> None:
    stack = make_stack(window=2048)
    text = prompt(800)  # about 4,000 tokens at a 2,048 window
    raw = stack.client.completions.with_raw_response.create(
        model=MODEL, prompt=text, max_tokens=64, stream=stream
    )
    assert raw.http_response.status_code == 200
    assert raw.headers["x-contextwarden-actions"] == "prompt_middle_out"
    assert int(raw.headers["x-contextwarden-tokens-before"]) > 2048
    assert int(raw.headers["x-contextwarden-tokens-after"]) <= 2048 - 64
    result = raw.parse()
    if stream:
        assert "".join(c.choices[0].text for c in result).strip()  # type: ignore[union-attr]
    else:
        assert result.choices[0].text  # type: ignore[union-attr]
    sent = stack.received[-1]["prompt"]
    assert sent.startswith(HEAD) and sent.endswith(TAIL) and MARKER in sent


def test_a_batch_and_token_ids_are_cut_each(make_stack: StackFactory) -> None:
    stack = make_stack(window=1024)
    ids = list(range(1000, 3000))
    stack.client.completions.create(model=MODEL, prompt=[prompt(400), "short one"], max_tokens=16)
    batch = stack.received[-1]["prompt"]
    assert batch[1] == "short one" and batch[0].endswith(TAIL)
    stack.client.completions.create(model=MODEL, prompt=ids, max_tokens=16)
    cut = stack.received[-1]["prompt"]
    assert len(cut) <= 1024 - 16 - 16 and cut[:10] == ids[:10] and cut[-10:] == ids[-10:]


def test_a_prompt_that_fits_goes_as_sent(make_stack: StackFactory) -> None:
    stack = make_stack(window=2048)
    raw = stack.client.completions.with_raw_response.create(model=MODEL, prompt="Say hi.")
    assert raw.headers["x-contextwarden-actions"] == "none"
    assert stack.received[-1] == {"model": MODEL, "prompt": "Say hi."}


def test_keep_tail_and_reject(make_stack: StackFactory) -> None:
    stack = make_stack(window=1024, policies={"default": {"completions": "keep_tail"}})
    stack.client.completions.create(model=MODEL, prompt=prompt(400), max_tokens=16)
    sent = stack.received[-1]["prompt"]
    assert sent.startswith(MARKER) and sent.endswith(TAIL)
    strict = make_stack(window=1024, policies={"default": {"completions": "reject"}})
    with pytest.raises(openai.BadRequestError) as refused:
        strict.client.completions.create(model=MODEL, prompt=prompt(400), max_tokens=16)
    assert refused.value.code == "context_length_exceeded"  # whatever the SDK's str() says
    assert strict.received == []


def test_overflow_recovery_on_completions(make_stack: StackFactory) -> None:
    # The proxy believes in a 4096-token window; the upstream really has 1024.
    stack = make_stack(window=1024, proxy_window=4096)
    raw = stack.client.completions.with_raw_response.create(
        model=MODEL, prompt=prompt(600), max_tokens=16
    )
    assert raw.http_response.status_code == 200
    assert raw.headers["x-contextwarden-retries"] == "1"
    assert len([p for p in stack.received if isinstance(p["prompt"], str)]) == 2


def test_the_proxys_controls_are_stripped_and_the_teams_policy_applies(
    make_stack: StackFactory,
) -> None:
    stack = make_stack(
        window=1024,
        policies={"tail": {"completions": "keep_tail"}},
        teams={"default": {"policy": "tail"}},
    )
    stack.client.completions.create(
        model=MODEL,
        prompt=prompt(400),
        max_tokens=16,
        extra_body={"contextwarden": {"trim": True}},
    )
    sent = stack.received[-1]
    assert "contextwarden" not in sent
    assert sent["prompt"].startswith(MARKER)  # the team's keep_tail, not the model's default
