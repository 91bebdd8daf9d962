"""formats/base.py ``with_texts``: the one text write-back the Responses and Messages adapters
share."""

from __future__ import annotations

from typing import Any

from proxy.formats.base import text_parts, with_texts


def text_key(part: dict[str, Any]) -> str | None:
    return "text" if part.get("type") in ("text", "output_text") else None


def test_each_text_original_takes_the_next_text_and_the_rest_stay_the_same_objects() -> None:
    image = {"type": "image", "source": {"data": "x"}}
    same = {"type": "text", "text": "kept"}
    blocks: list[Any] = [{"type": "text", "text": "long"}, image, same, "odd"]
    view = [
        {"type": "text", "text": "short"},
        {"type": "image_url"},
        {"type": "text", "text": "kept"},
    ]
    out = with_texts(blocks, text_parts(view), text_key)
    assert out[0] == {"type": "text", "text": "short"} and out[0] is not blocks[0]
    assert out[1] is image and out[2] is same and out[3] == "odd"


def test_one_iterator_runs_across_the_items_of_a_turn() -> None:
    texts = text_parts([{"type": "text", "text": "a2"}, {"type": "text", "text": "b2"}])
    first = with_texts([{"type": "output_text", "text": "a"}], texts, text_key)
    second = with_texts([{"type": "output_text", "text": "b"}], texts, text_key)
    assert first[0]["text"] == "a2" and second[0]["text"] == "b2"


def test_fewer_texts_than_originals_leave_the_rest_as_they_came() -> None:
    blocks = [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]
    out = with_texts(blocks, text_parts([{"type": "text", "text": "a2"}]), text_key)
    assert out[1] is blocks[1]
    assert list(text_parts("a string has no parts")) == []
