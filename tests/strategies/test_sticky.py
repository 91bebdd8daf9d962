"""Sticky cuts (strategies/sticky.py): a recorded cut, replayed on the conversation's next
request, gives the previous forwarded prompt followed by the new messages, byte for byte."""

from __future__ import annotations

import hashlib
from dataclasses import replace
from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from strategies.sticky import Recipe, decode, encode, record, replay, rolling


def digest(message: dict[str, Any]) -> bytes:
    return hashlib.blake2b(orjson.dumps(message), digest_size=16).digest()


def chat(n: int, start: int = 0) -> list[dict[str, Any]]:
    roles = ("user", "assistant")
    return [{"role": roles[i % 2], "content": f"turn {i}"} for i in range(start, start + n)]


def test_a_replayed_cut_keeps_replacements_and_drops_what_it_dropped() -> None:
    sent = [{"role": "system", "content": "rules"}, *chat(6)]
    summary = {"role": "user", "content": "[summary of turns 0-3]"}
    forwarded = [sent[0], summary, sent[5], sent[6]]
    recipe = replace(record(sent, forwarded, ["summarize"], 900, digest), checkpoint="created c1")
    assert recipe.parts == (0, summary, 5, 6)
    # The client resends its whole history (new objects, same content) plus two turns.
    again = [dict(m) for m in sent] + chat(2, start=6)
    made = replay(recipe, again, digest)
    assert made is not None
    assert made == [sent[0], summary, sent[5], sent[6], *again[7:]]
    assert made[0] is again[0] and made[1] is summary  # the client's own objects, the same bytes


def test_a_changed_history_is_not_replayed() -> None:
    sent = chat(6)
    recipe = record(sent, sent[3:], ["truncate_oldest"], 500, digest)
    edited = [dict(m) for m in sent]
    edited[1]["content"] = "an edited turn"
    assert replay(recipe, edited, digest) is None
    assert replay(recipe, sent[:5], digest) is None  # shorter than the cut
    assert replay(recipe, chat(6, start=1), digest) is None  # another conversation


def test_encoding_round_trips_and_rejects_malformed_blobs() -> None:
    sent = chat(4)
    cleared = {"role": "tool", "tool_call_id": "c", "content": "[output cleared]"}
    recipe = replace(
        record(sent, [cleared, sent[2], sent[3]], ["clear"], 700, digest), checkpoint="reused k"
    )
    assert decode(encode(recipe)) == recipe
    for raw in (
        b"",
        b"not json",
        b"[]",
        b'{"n": 2}',
        orjson.dumps({"n": 2, "d": "00", "p": [5], "a": [], "b": 1, "c": None}),  # index out
        orjson.dumps({"n": 2, "d": "00", "p": ["x"], "a": [], "b": 1, "c": None}),
        orjson.dumps({"n": 2, "d": "zz", "p": [0], "a": [], "b": 1, "c": None}),
        orjson.dumps({"n": 2, "d": "00", "p": [0], "a": [], "b": "1", "c": None}),
        orjson.dumps({"n": 2, "d": "00", "p": [0], "a": [], "b": 1, "c": 7}),
        orjson.dumps({"n": True, "d": "00", "p": [], "a": [], "b": 1, "c": None}),
    ):
        assert decode(raw) is None, raw


texts = st.text(alphabet="abc xyz", max_size=12)
message = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant", "system", "tool"]), "content": texts}
)


@settings(max_examples=200, deadline=None)
@given(
    sent=st.lists(message, min_size=1, max_size=12),
    appended=st.lists(message, max_size=6),
    data=st.data(),
)
def test_replay_of_a_recorded_cut_is_the_forwarded_prompt_then_the_new_messages(
    sent: list[dict[str, Any]], appended: list[dict[str, Any]], data: st.DataObject
) -> None:
    """Whatever the cut kept (any subsequence, in order) and replaced (any new messages),
    replaying it on the grown conversation, decoded from the store or not, forwards exactly
    what the cut forwarded followed by what the client appended."""
    kept = data.draw(st.lists(st.booleans(), min_size=len(sent), max_size=len(sent)))
    forwarded: list[dict[str, Any]] = []
    for m, keep in zip(sent, kept, strict=True):
        if keep:
            forwarded.append(m)
        elif data.draw(st.booleans()):
            forwarded.append({**m, "content": "[cleared]"})  # replaced, not dropped
    recipe = record(sent, forwarded, ["cut"], 100, digest)
    grown = [dict(m) for m in sent] + appended
    for r in (recipe, decode(encode(recipe))):
        assert isinstance(r, Recipe)
        assert replay(r, grown, digest) == forwarded + appended
    assert rolling(grown[: len(sent)], digest) == recipe.digest
