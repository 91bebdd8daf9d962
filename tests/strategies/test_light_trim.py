from __future__ import annotations

from strategies.light_trim import LightTrim
from tests.counters import FixedCounter

C = FixedCounter(1)


def test_trims_old_oversized_text_with_a_marker() -> None:
    big = "h" * 1200 + "m" * 3000 + "t" * 800
    msgs = [{"role": "user", "content": big}] + [{"role": "user", "content": "x"}] * 4
    out = LightTrim().apply(msgs, C)
    assert out[0]["content"] == "h" * 1200 + "\n[3000 characters trimmed]\n" + "t" * 800
    assert all(a is b for a, b in zip(out[1:], msgs[1:], strict=True))


def test_recent_and_short_messages_are_untouched() -> None:
    big = "x" * 5000
    msgs = [{"role": "user", "content": "short"}] + [
        {"role": "tool", "tool_call_id": "1", "content": big}
    ] * 4
    out = LightTrim().apply(msgs, C)
    assert all(a is b for a, b in zip(out, msgs, strict=True))


def test_text_parts_are_trimmed_and_images_kept() -> None:
    image = {"type": "image_url", "image_url": {"url": "https://x"}}
    msgs = [{"role": "user", "content": [{"type": "text", "text": "y" * 4001}, image]}] + [
        {"role": "user", "content": "x"}
    ] * 4
    out = LightTrim().apply(msgs, C)
    assert "[2001 characters trimmed]" in out[0]["content"][0]["text"]
    assert out[0]["content"][1] is image
