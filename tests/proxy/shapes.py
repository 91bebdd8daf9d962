"""Growing conversations of every shape a client sends, in all three wire formats, and what
each request's newest step and task are on the wire (to check what was forwarded).

Shapes (``SHAPES``):
    one-call     a chat tool loop: the user asks, one call, its output, an answer; per turn
    many-calls   the same with several calls a turn, some turns with parallel calls
    task         a running agent task: one task message, then steps with no new user message
    claude-code  a running task with Claude Code's mid-conversation ``system`` messages: the
                 agent types after the task, a reminder every few steps, and, after its own
                 compaction, a summary as the task with the files it read re-attached
    codex        a running task with Codex's leading developer messages (and an
                 ``additional_tools`` item in Responses) and a developer message mid-task
    rag          chat turns beside leading retrieved documents (the ``rag`` policy drops them)

A conversation is made of neutral events and rendered per format; ``requests`` yields the body
of each request the client sends as the conversation grows (one per step).
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from proxy.demo.anthropic import sign

SHAPES = ("one-call", "many-calls", "task", "claude-code", "codex", "rag")
FORMATS = ("chat", "responses", "anthropic")
WORDS = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "epsilon",
    "zeta",
    "theta",
    "kappa",
    "lambda",
    "sigma",
    "omega",
    "river",
    "stone",
]
REMINDER = (
    "The task tools haven't been used recently. If you're working on tasks that would benefit "
    "from tracking progress, consider using the task tools. This is just a gentle reminder."
)
AGENTS = "Available agent types for the Agent tool:\n- claude: Catch-all for any task.\n" * 6
REATTACHED = 'Called the Read tool with the following input: {"file_path": "/w/a.py"}\n'
REATTACHED += "Result of calling the Read tool:\n" + "def step(n):\n    return n * 2\n" * 120


@dataclass
class Event:
    """One thing in a conversation: ``kind`` user, system (mid-conversation), call (with
    ``calls`` ids), output (answering ``calls[0]``), answer (assistant text)."""

    kind: str
    text: str = ""
    calls: list[str] = field(default_factory=list)


def text(rng: random.Random, tokens: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(max(1, tokens)))


def events(shape: str, steps: int, window: int, seed: int) -> Iterator[list[Event]]:
    """The conversation after each step: the events a request carries."""
    rng = random.Random(seed)
    out: list[Event] = []
    output = max(20, window // rng.choice((12, 8, 5)))  # a tool output's size in tokens
    k = 0

    def step(calls: int = 1) -> None:
        nonlocal k
        ids = [f"call_{k + i}" for i in range(calls)]
        k += calls
        out.append(Event("call", text(rng, 8), ids))
        for i in ids:
            out.append(Event("output", f"{i}: " + text(rng, output // calls), [i]))

    if shape in ("task", "claude-code", "codex"):
        if shape == "claude-code" and rng.random() < 0.5:  # after Claude Code's own compaction
            out.append(Event("user", "This session is being continued. Summary: " + text(rng, 60)))
            out.append(Event("system", REATTACHED))
            out.append(Event("answer", "Continuing."))
        out.append(Event("user", "Task: read every file in order. " + text(rng, 40)))
        if shape == "claude-code":
            out.append(Event("system", AGENTS))
        for n in range(steps):
            step()
            if shape == "claude-code" and n % 5 == 4:
                out.append(Event("system", REMINDER))
            if shape == "codex" and n == 3:
                out.append(Event("system", "<environment_context>cwd=/w</environment_context>"))
            yield list(out)
        return
    for t in range(steps):
        out.append(Event("user", f"Turn {t}: " + text(rng, rng.randint(10, 60))))
        yield list(out)
        calls = rng.randint(1, 3) if shape == "many-calls" else 1
        for _ in range(calls):
            step(rng.choice((1, 1, 2)) if shape == "many-calls" else 1)
            yield list(out)
        out.append(Event("answer", f"Done with turn {t}: " + text(rng, 20)))


def requests(
    shape: str, fmt: str, steps: int, window: int, seed: int, model: str
) -> Iterator[dict[str, Any]]:
    """Each request's body, in ``fmt``, as the conversation grows."""
    system = "You are a careful coding agent. " + " ".join(WORDS) * 3
    documents = [f"Document {d}: " + text(random.Random(seed + d), window // 10) for d in range(4)]
    for evs in events(shape, steps, window, seed):
        if fmt == "chat":
            yield {"model": model, "messages": chat(system, shape, documents, evs), "tools": TOOLS}
        elif fmt == "responses":
            yield responses(system, shape, documents, evs, model)
        else:
            yield messages(system, shape, documents, evs, model)


TOOLS = [{"type": "function", "function": {"name": "shell", "description": "Run a command",
          "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}}}}]  # fmt: skip


def chat(system: str, shape: str, documents: list[str], evs: list[Event]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"role": "system", "content": system}]
    if shape == "codex":
        out.append({"role": "developer", "content": "Sandbox: workspace-write. Approvals: never."})
    if shape == "rag":
        out += [{"role": "system", "content": d} for d in documents]
    for e in evs:
        if e.kind == "user":
            out.append({"role": "user", "content": e.text})
        elif e.kind == "system":
            out.append({"role": "developer" if shape == "codex" else "system", "content": e.text})
        elif e.kind == "answer":
            out.append({"role": "assistant", "content": e.text})
        elif e.kind == "call":
            calls = [{"id": c, "type": "function",
                      "function": {"name": "shell", "arguments": f'{{"cmd": "cat {c}"}}'}}
                     for c in e.calls]  # fmt: skip
            out.append({"role": "assistant", "content": None, "tool_calls": calls})
        else:
            out.append({"role": "tool", "tool_call_id": e.calls[0], "content": e.text})
    return out


def responses(
    system: str, shape: str, documents: list[str], evs: list[Event], model: str
) -> dict[str, Any]:
    items: list[dict[str, Any]] = []
    if shape == "codex":
        items.append({"type": "message", "role": "developer",
                      "content": [{"type": "input_text", "text": "Sandbox: workspace-write."}]})  # fmt: skip
        items.append({"type": "additional_tools", "tools": [{"name": "apply_patch"}]})
    if shape == "rag":
        items += [{"type": "message", "role": "system",
                   "content": [{"type": "input_text", "text": d}]} for d in documents]  # fmt: skip
    for e in evs:
        if e.kind in ("user", "system"):
            role = e.kind if e.kind == "user" else ("developer" if shape == "codex" else "system")
            items.append({"type": "message", "role": role,
                          "content": [{"type": "input_text", "text": e.text}]})  # fmt: skip
        elif e.kind == "answer":
            items.append({"type": "message", "role": "assistant", "id": f"msg_{len(items)}",
                          "content": [{"type": "output_text", "text": e.text}]})  # fmt: skip
        elif e.kind == "call":
            items.append({"type": "reasoning", "id": f"rs_{e.calls[0]}", "summary": [],
                          "encrypted_content": "gAAAA" + e.text.replace(" ", "")})  # fmt: skip
            for c in e.calls:
                items.append({"type": "function_call", "id": f"fc_{c}", "call_id": c,
                              "name": "shell", "arguments": f'{{"cmd": "cat {c}"}}'})  # fmt: skip
        else:
            items.append({"type": "function_call_output", "call_id": e.calls[0],
                          "output": e.text})  # fmt: skip
    tools = [{"type": "function", "name": "shell", "description": "Run a command",
              "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}}}]  # fmt: skip
    return {"model": model, "instructions": system, "input": items, "tools": tools,
            "store": False, "stream": False}  # fmt: skip


def messages(
    system: str, shape: str, documents: list[str], evs: list[Event], model: str
) -> dict[str, Any]:
    out: list[dict[str, Any]] = []

    def user_blocks() -> list[dict[str, Any]]:
        if not out or out[-1]["role"] != "user":
            out.append({"role": "user", "content": []})
        blocks: list[dict[str, Any]] = out[-1]["content"]
        return blocks

    for e in evs:
        if e.kind == "user":
            user_blocks().append({"type": "text", "text": e.text})
        elif e.kind == "system":
            out.append({"role": "system", "content": e.text})
        elif e.kind == "answer":
            out.append({"role": "assistant", "content": [{"type": "text", "text": e.text}]})
        elif e.kind == "call":
            thought = f"Next, {e.text}."
            blocks = [{"type": "thinking", "thinking": thought, "signature": sign(thought)}]
            blocks += [{"type": "tool_use", "id": c, "name": "Bash",
                        "input": {"command": f"cat {c}"}} for c in e.calls]  # fmt: skip
            out.append({"role": "assistant", "content": blocks})
        else:
            user_blocks().append({"type": "tool_result", "tool_use_id": e.calls[0],
                                  "content": e.text})  # fmt: skip
    prompt = system if shape != "rag" else system + "\n" + "\n".join(documents)
    tools = [{"name": "Bash", "description": "Run a command",
              "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}}}]  # fmt: skip
    return {"model": model, "max_tokens": 32000, "system": prompt, "messages": out,
            "tools": tools}  # fmt: skip


def protected(fmt: str, body: dict[str, Any]) -> tuple[list[Any], Any, list[Any]]:
    """What a request's protected messages are on the wire: (the leading part that must go
    as sent, the task, the newest step that must end the forwarded conversation)."""
    if fmt == "chat":
        msgs = body["messages"]
        return msgs[:1], *_task_and_step(msgs, lambda m: m["role"], "assistant", "user")
    if fmt == "responses":
        items = body["input"]

        def role(item: dict[str, Any]) -> str:
            if item.get("type") == "message":
                return str(item["role"])
            return "assistant" if item.get("type") in ("reasoning", "function_call") else "other"

        task, step = _task_and_step(items, role, "assistant", "user")
        # A run starts at its first assistant item: a reasoning item goes with its call.
        start = len(items) - len(step)
        while start > 0 and step and role(items[start - 1]) == "assistant":
            start -= 1
        lead = [body["instructions"]]
        return lead, task, items[start:] if step else []
    msgs = body["messages"]

    def kind(m: dict[str, Any]) -> str:
        if m["role"] != "user":
            return str(m["role"])
        blocks = m["content"]
        texts = [b for b in blocks if b.get("type") == "text"] if isinstance(blocks, list) else [1]
        return (
            "user"
            if texts and not any(b.get("type") == "tool_result" for b in blocks)
            else "results"
        )

    task, step = _task_and_step(msgs, kind, "assistant", "user")
    return [body["system"]], task, step


def _task_and_step(items: list[Any], role: Any, assistant: str, user: str) -> tuple[Any, list[Any]]:
    users = [i for i, m in enumerate(items) if role(m) == user]
    if not users:
        return None, items[-1:]
    task = users[-1]
    last = max((i for i in range(task, len(items)) if role(items[i]) == assistant), default=None)
    return items[task], items[last:] if last is not None else []
