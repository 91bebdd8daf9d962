"""Growing conversations in the three formats (chat, Responses, Anthropic Messages), driven
turn by turn through the real SDKs, and what they add up to: answered, trimmed without their
summary, checkpoint reuses, and each request's prefix state beside the one the upstream's own
log shows (the bodies it received, in order)."""

from __future__ import annotations

import functools
import random
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import anthropic
import openai

MAX_TOKENS = 256
_WORDS = (
    "the of and to in that it is was for on are as with they be at one have this from or had "
    "by word but what some we can out other were all there when up use your how said an each "
    "deploy migration schema index replica backup query shard cache token window summary"
)
WORDS = tuple(_WORDS.split())


@dataclass
class Answer:
    status: int
    actions: str
    checkpoint: str
    prefix: str
    seconds: float
    error: str = ""
    retries: str = ""  # the proxy's overflow retries (a prompt over the window: not 0)


@dataclass
class Conversation:
    """One conversation: ``tag`` is in its instructions, which every forwarded request keeps,
    so the upstream's log tells conversations apart by it."""

    fmt: str  # "chat", "responses" or "messages"
    model: str
    tag: str
    rng: random.Random
    history: list[Any] = field(default_factory=list)
    answers: list[Answer] = field(default_factory=list)

    @property
    def instructions(self) -> str:
        return f"You are the assistant of conversation {self.tag}. Answer briefly."

    def question(self) -> str:
        words = " ".join(self.rng.choice(WORDS) for _ in range(self.rng.randint(230, 300)))
        return f"Turn {len(self.answers)}: {words}"

    def step(self, url: str) -> None:
        """One turn: a question, and the answer appended (a request that fails is recorded
        with status 0 and its error, and the conversation goes on)."""
        self.history.append({"role": "user", "content": self.question()})
        started = time.monotonic()
        try:
            self._send(url, started)
        except (openai.APIConnectionError, anthropic.APIConnectionError) as exc:
            error = f"{url}: {exc!r} ({exc.__cause__!r})"
            self.answers.append(Answer(0, "", "", "", time.monotonic() - started, error))

    def _send(self, url: str, started: float) -> None:
        if self.fmt == "chat":
            raw: Any = _openai(url).chat.completions.with_raw_response.create(
                model=self.model,
                messages=[{"role": "system", "content": self.instructions}, *self.history],
                max_tokens=MAX_TOKENS,
            )
            reply: Any = {"role": "assistant", "content": raw.parse().choices[0].message.content}
            self.history.append(reply)
        elif self.fmt == "responses":
            raw = _openai(url).responses.with_raw_response.create(
                model=self.model,
                instructions=self.instructions,
                input=self.history,
                max_output_tokens=MAX_TOKENS,
                store=False,
            )
            self.history += [item.model_dump(exclude_none=True) for item in raw.parse().output]
        else:
            raw = _anthropic(url).messages.with_raw_response.create(
                model=self.model,
                system=self.instructions,
                messages=self.history,
                max_tokens=MAX_TOKENS,
            )
            content = [block.model_dump(exclude_none=True) for block in raw.parse().content]
            self.history.append({"role": "assistant", "content": content})
        h = raw.headers
        self.answers.append(
            Answer(
                raw.http_response.status_code,
                h.get("x-contextwarden-actions", ""),
                h.get("x-contextwarden-checkpoint", ""),
                h.get("x-contextwarden-prefix", ""),
                time.monotonic() - started,
                retries=h.get("x-contextwarden-retries", ""),
            )
        )


@functools.cache
def _openai(url: str) -> openai.OpenAI:
    """One client per address, as an application keeps (making one takes milliseconds)."""
    return openai.OpenAI(base_url=f"{url}/v1", api_key="sk-recipe", max_retries=0)


@functools.cache
def _anthropic(url: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=url, api_key="sk-ant-recipe", max_retries=0)


def conversations(counts: dict[str, int], models: dict[str, str], seed: int) -> list[Conversation]:
    rng = random.Random(seed)
    return [
        Conversation(fmt, models[fmt], f"{fmt}-{k}", random.Random(rng.random()))
        for fmt, n in counts.items()
        for k in range(n)
    ]


def drive(
    url: str,
    talks: list[Conversation],
    turns: int,
    before: Callable[[int], None] = lambda turn: None,
    pause: float = 0.0,
) -> None:
    """``turns`` turns of every conversation, the conversations of a turn at once; ``before``
    runs before each turn (between turns nothing is in flight), ``pause`` after each."""
    with ThreadPoolExecutor(len(talks)) as pool:
        for turn in range(turns):
            before(turn)
            list(pool.map(lambda c: c.step(url), talks))
            time.sleep(pause)


@dataclass
class Figures:
    requests: int
    answered: int
    trimmed: int
    trimmed_without_summary: int
    reuses: int
    prefix: dict[str, int]  # the proxy's verdicts, by state

    @classmethod
    def of(cls, talks: list[Conversation]) -> Figures:
        answers = [a for c in talks for a in c.answers]
        trimmed = [a for a in answers if a.actions not in ("", "none")]
        return cls(
            len(answers),
            sum(a.status == 200 for a in answers),
            len(trimmed),
            sum("summarize" not in a.actions.split(",") for a in trimmed),
            sum(a.checkpoint.startswith("reused") for a in answers),
            dict(Counter(a.prefix for a in answers)),
        )


def prompt_of(payload: dict[str, Any]) -> tuple[str, list[Any]]:
    """A received body's instructions and the items of its prompt, in order."""
    if "input" in payload:  # Responses
        return str(payload.get("instructions")), list(payload["input"])
    if "system" in payload:  # Messages
        return str(payload["system"]), list(payload["messages"])
    messages = payload["messages"]
    return str(messages[0]["content"]), list(messages[1:])


def upstream_states(received: list[dict[str, Any]]) -> dict[str, list[str]]:
    """Per conversation (by the tag in its instructions), each forwarded prompt's state as the
    upstream saw it: ``new``, ``kept`` (the previous prompt is its prefix) or ``broken``."""
    last: dict[str, list[Any]] = {}
    states: dict[str, list[str]] = defaultdict(list)
    for payload in received:
        instructions, items = prompt_of(payload)
        tag = instructions.split("conversation ", 1)[1].split(".", 1)[0]
        before = last.get(tag)
        if before is None:
            states[tag].append("new")
        else:
            states[tag].append("kept" if items[: len(before)] == before else "broken")
        last[tag] = items
    return dict(states)
