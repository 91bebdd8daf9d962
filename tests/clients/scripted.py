"""A scripted agent upstream for the real clients: Messages and Responses over SSE, and chat,
with the APIs' checks.

It plays the model for a multi-step task: each answer to a task (or to the output of the
previous step) calls the client's own shell tool to read the next ``step-NN.txt`` of the task's
working directory, with a signed thinking block (Messages) or an encrypted reasoning item
(Responses); after ``steps`` reads it answers in text. The step is read from the newest call
the client sent back, never from how many came before, so it holds when older steps were
trimmed away.

With ``lag``, some steps need an earlier output: step ``k`` (every ``every``-th, past ``lag``)
needs the key line of step ``k - lag``. When that output is not in the prompt as it was read,
the model recalls it when the proxy offers the recall tool (by the handle a placeholder names,
else by its file name), and otherwise runs the tool again (a re-run): ``reruns`` and
``recalls`` count them.

It rejects what the real APIs reject, in their words: a prompt over ``window`` (its own count:
Anthropic's tokenizer for Messages, o200k for Responses), a call without its output or an
output without its call, a reasoning item without its following item, more than four
``cache_control`` breakpoints, a thinking block whose signature does not match its text. Every
body it is sent is kept in ``received`` (with the path and headers), accepted or not.

With ``skew`` (Messages only) it counts as a real Anthropic upstream does rather than as the
proxy estimates (:class:`Skew`): a tool-use system prompt of its own, tool definitions and
message text at other rates than the demo's tokenizer, thinking blocks and their signatures,
a cost per message. Its usage and its overflow figures state that count.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from proxy.demo.anthropic import AnthropicCounter, assistant_message, invalid_request, sign
from proxy.demo.anthropic import _events as message_events
from proxy.demo.responses import ResponsesCounter, completed, text_item
from proxy.demo.responses import _events as response_events
from proxy.demo.upstream import WindowCounter, tool_sequence_error
from strategies.checkpoints.cut import SYSTEM_PROMPT
from tests.clients.metadata import Metadata

STEP = re.compile(r"step-(\d+)\.txt")
KEY = "key of step {k:02d}: "
RECALL = "contextwarden_recall"
# The handle a cut of an output names in its marker (strategies/step_cut.py).
CUT_HANDLE = re.compile(r"\[Output cut to fit the context window: [^\]]*; recall: (r[0-9]{15})\]")
COMPACT_PROMPT = "CONTEXT CHECKPOINT COMPACTION"  # Codex's own compaction prompt
SUMMARIZED = re.compile(r"read in order up to step-(\d+)\.txt")
CALLS = ("function_call", "custom_tool_call", "local_shell_call")
OVER_WINDOW = (
    "Your input exceeds the context window of this model. Please adjust your input and try again."
)
OUTPUTS = {
    "function_call_output": "function_call",
    "custom_tool_call_output": "custom_tool_call",
    "local_shell_call_output": "local_shell_call",
}


@dataclass(frozen=True)
class Skew:
    """How an upstream's count of a Messages prompt departs from the demo's tokenizer's:
    ``tool_system`` tokens of its own when tools are given (Anthropic's tool-use system prompt,
    346 for the current models), each tool definition scaled by ``tools`` plus ``per_tool``,
    message text (text, tool results, tool calls) scaled by ``text``, thinking by ``thinking``
    and its signature counted at ``signature`` tokens a character, and ``per_message`` more
    for each message."""

    tool_system: int = 0
    tools: float = 1.0
    per_tool: int = 0
    text: float = 1.0
    thinking: float = 1.0
    signature: float = 0.0
    per_message: int = 0


# The distortions a real Anthropic upstream shows beside the proxy's estimate: its tool-use
# system prompt, tool definitions counted 8% over the demo's tokenizer, message text 5% under,
# thinking 10% over with its signature, a few tokens of framing per message.
ANTHROPIC_SKEW = Skew(
    tool_system=346, tools=1.08, per_tool=4, text=0.95, thinking=1.1, signature=0.25,
    per_message=3,
)  # fmt: skip


def skewed_prompt(counter: AnthropicCounter, payload: dict[str, Any], skew: Skew) -> int:
    """The Messages prompt of ``payload`` as an upstream with ``skew`` counts it."""
    tools = payload.get("tools") or []
    total = skew.tool_system if tools else 0
    for tool in tools:
        rest = {k: v for k, v in tool.items() if k != "cache_control"}
        total += round((8 + counter.n(orjson.dumps(rest).decode())) * skew.tools) + skew.per_tool
    system = payload.get("system")
    blocks = [{"type": "text", "text": system}] if isinstance(system, str) else system or []
    total += sum(round((3 + counter.n(b.get("text"))) * skew.text) for b in blocks)
    for m in payload["messages"]:
        content = m["content"]
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        total += 4 + skew.per_message
        for b in blocks:
            if b.get("type") == "thinking":
                thought = (2 + counter.n(b.get("thinking"))) * skew.thinking
                total += round(thought + skew.signature * len(b.get("signature") or ""))
            else:
                total += round(counter.block(b) * skew.text)
    return total


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    status: int = 200
    truncated: bool = False  # answered from the prompt's tail only (Ollama's silent truncation)


@dataclass
class Script:
    """What the model does: ``steps`` reads of ``step-NN.txt``, then a text answer."""

    steps: int
    window: int
    # False: a strict upstream whose overflow errors state no figures (OpenAI's Responses
    # wording in chat and Responses, Bedrock's in Messages).
    figures: bool = True
    # True: a chat prompt over the window is not refused but cut from its start, as Ollama's
    # chatPrompt does at num_ctx (system messages and the last message kept), and answered
    # with the usage of what was kept.
    truncates: bool = False
    # A local server's metadata endpoints (tests/clients/metadata.py), served beside the API.
    metadata: Metadata | None = None
    # True: a server that validates Messages bodies strictly (a local server behind a
    # pydantic model with extra="forbid"): it refuses context_management, as such servers do.
    strict: bool = False
    # How the upstream's count departs from the demo's tokenizer (Messages): None, not at all.
    skew: Skew | None = None
    received: list[Received] = field(default_factory=list)
    summaries: list[Received] = field(default_factory=list)
    compactions: int = 0  # the client's own compaction requests answered
    lag: int = 0
    every: int = 1
    reruns: int = 0
    recalls: int = 0
    # True: a model that recalls, once each, what a cut of its newest step's output left out
    # (the handle its marker names), as the marker tells it to.
    recall_cuts: bool = False
    cut_recalls: list[str] = field(default_factory=list)
    cut_steps: dict[str, int] = field(default_factory=dict)  # a recalled cut's handle: its step

    def needs(self, k: int) -> int | None:
        """The earlier step whose output step ``k`` needs, if any."""
        if self.lag and k > self.lag and k % self.every == 0:
            return k - self.lag
        return None

    def decide(self, payload: dict[str, Any], calls: list[str], answered: bool) -> Any:
        """("read", step), ("recall", handle) or ("done", steps taken)."""
        if self.recall_cuts and answered and RECALL.encode() in orjson.dumps(payload.get("tools")):
            items = payload.get("input") or payload.get("messages") or []
            found = CUT_HANDLE.search(orjson.dumps(items[-1:]).decode())
            read = [int(STEP.findall(c)[-1]) for c in calls if STEP.search(c)]
            if found is not None and found.group(1) not in self.cut_recalls and read:
                self.cut_recalls.append(found.group(1))
                self.cut_steps[found.group(1)] = read[-1]
                return "recall", found.group(1)
        # A model knows what it recalled: a recall of a cut stands for its step's read, which a
        # fit of the recall's continuation may have dropped.
        calls = [
            next((f"step-{n:02d}.txt" for h, n in self.cut_steps.items() if h in c), c)
            for c in calls
        ]
        k = next_step(calls, answered, self.needs)
        m = self.needs(k) if k <= self.steps else None
        if m is not None:
            text = orjson.dumps(payload).decode()
            if KEY.format(k=m) not in text:
                # A placeholder's handle, else the file: the output may have been dropped.
                handle = placeholder(text, m) or f"step-{m:02d}.txt"
                if RECALL.encode() in orjson.dumps(payload.get("tools")):
                    self.recalls += 1
                    return "recall", handle
                self.reruns += 1
                return "read", m
        return ("read", k) if k <= self.steps else ("done", k - 1)

    @property
    def accepted(self) -> list[Received]:
        return [r for r in self.received if r.status == 200]

    @property
    def refused(self) -> list[Received]:
        return [r for r in self.received if r.status != 200]


def create_scripted(script: Script) -> Starlette:
    anthropic = AnthropicCounter()
    openai = ResponsesCounter("o200k_base")
    chat_counter = WindowCounter("o200k_base", 1.0)

    async def messages(request: Request) -> Response:
        payload = orjson.loads(await request.body())
        seen = Received("messages", dict(request.headers), payload)
        if _summarizing(payload):
            script.summaries.append(seen)
        else:
            script.received.append(seen)
        broken = invalid_request(payload)
        if broken is None and script.strict and "context_management" in payload:
            broken = "context_management: Extra inputs are not permitted"
        tokens = (
            anthropic.prompt(payload)
            if script.skew is None
            else skewed_prompt(anthropic, payload, script.skew)
        )
        if broken is None and tokens + payload["max_tokens"] > script.window:
            broken = (
                "Input is too long for requested model."
                if not script.figures
                else f"prompt is too long: {tokens} tokens > {script.window} maximum"
                if tokens > script.window
                else f"input length and `max_tokens` exceed context limit: {tokens} + "
                f"{payload['max_tokens']} > {script.window}, decrease input length or "
                "`max_tokens` and try again"
            )
        if broken is not None:
            seen.status = 400
            error = {"type": "invalid_request_error", "message": broken}
            return _json({"type": "error", "error": error}, 400)
        message = _message(payload, script, tokens)
        if payload.get("stream"):
            return StreamingResponse(message_events(message), media_type="text/event-stream")
        return _json(message)

    async def responses(request: Request) -> Response:
        """Responses' tool loop; a request that holds the summarizer's prompt is the proxy's
        summarizer (Responses when the model's upstream serves it), answered with a short
        summary as the other formats' are."""
        payload = orjson.loads(await request.body())
        seen = Received("responses", dict(request.headers), payload)
        if _summarizing(payload):
            script.summaries.append(seen)
            summary = text_item(_summary(payload))
            made = completed(payload, [summary], _responses_tokens(openai, payload))
            if payload.get("stream"):
                return StreamingResponse(response_events(made), media_type="text/event-stream")
            return _json(made)
        script.received.append(seen)
        items = payload["input"]
        broken = _invalid_items(items) if isinstance(items, list) else None
        tokens = _responses_tokens(openai, payload)
        if broken is None and tokens > script.window:
            broken = OVER_WINDOW
        if broken is not None:
            seen.status = 400
            code = "context_length_exceeded" if "context window" in broken else None
            error = {"message": broken, "type": "invalid_request_error", "param": "input"}
            return _json({"error": {**error, "code": code}}, 400)
        response = _response(payload, script, tokens)
        if payload.get("stream"):
            return StreamingResponse(response_events(response), media_type="text/event-stream")
        return _json(response)

    async def chat(request: Request) -> Response:
        """A chat tool loop with a ``read_file`` tool, as the other formats' loops; any other
        chat request is the proxy's summarizer, answered with a short summary."""
        payload = orjson.loads(await request.body())
        seen = Received("chat", dict(request.headers), payload)
        if not payload.get("tools"):
            script.summaries.append(seen)
            return _json(_completion(payload, {"role": "assistant", "content": _summary(payload)}))
        script.received.append(seen)
        broken = tool_sequence_error(payload["messages"])
        tokens = chat_counter.prompt(payload)
        if broken is None and tokens > script.window and script.truncates:
            payload, tokens = _truncated(chat_counter, payload, script.window)
            seen.truncated = True
        if broken is None and tokens > script.window:
            broken = (
                f"This model's maximum context length is {script.window} tokens. However, your "
                f"messages resulted in {tokens} tokens. Please reduce the length of the messages."
                if script.figures
                else OVER_WINDOW
            )
        if broken is not None:
            seen.status = 400
            over = broken == OVER_WINDOW or "maximum context" in broken
            code = "context_length_exceeded" if over else None
            error = {"message": broken, "type": "invalid_request_error", "param": "messages"}
            return _json({"error": {**error, "code": code}}, 400)
        messages = payload["messages"]
        calls = [c["function"]["arguments"] for m in messages for c in m.get("tool_calls") or []]
        action, value = script.decide(payload, calls, messages[-1]["role"] == "tool")
        message: dict[str, Any] = {"role": "assistant", "content": None}
        if action == "done":
            message["content"] = f"Done after {value} steps ({tokens} tokens)."
        else:
            name, args = (
                ("read_file", {"path": f"step-{value:02d}.txt"})
                if action == "read"
                else (RECALL, {"handle": value})
            )
            call = {"name": name, "arguments": orjson.dumps(args).decode()}
            message["tool_calls"] = [
                {"id": f"call_{uuid.uuid4().hex[:12]}", "type": "function", "function": call}
            ]
        if payload.get("stream"):
            return StreamingResponse(chat_events(payload, message), media_type="text/event-stream")
        return _json(_completion(payload, message, tokens))

    metadata = script.metadata.routes() if script.metadata is not None else []
    return Starlette(
        routes=[
            Route("/v1/chat/completions", chat, methods=["POST"]),
            Route("/v1/messages", messages, methods=["POST"]),
            Route("/v1/responses", responses, methods=["POST"]),
            *metadata,
        ]
    )


def _truncated(
    counter: WindowCounter, payload: dict[str, Any], window: int
) -> tuple[dict[str, Any], int]:
    """``payload`` cut from its start until it fits ``window``, as Ollama's chatPrompt does:
    the system messages of the part cut stay, and the last message always does."""
    messages = payload["messages"]
    for start in range(len(messages)):
        system = [m for m in messages[:start] if m["role"] == "system"]
        kept = {**payload, "messages": [*system, *messages[start:]]}
        tokens = counter.prompt(kept)
        if tokens <= window or start == len(messages) - 1:
            return kept, tokens
    return payload, counter.prompt(payload)


def _completion(
    payload: dict[str, Any], message: dict[str, Any], tokens: int = 100
) -> dict[str, Any]:
    reason = "tool_calls" if message.get("tool_calls") else "stop"
    choice = {"index": 0, "message": message, "finish_reason": reason}
    usage = {"prompt_tokens": tokens, "completion_tokens": 20, "total_tokens": tokens + 20}
    body = {"id": f"chatcmpl-{uuid.uuid4().hex[:12]}", "object": "chat.completion", "created": 0}
    return {**body, "model": payload["model"], "choices": [choice], "usage": usage}


async def chat_events(payload: dict[str, Any], message: dict[str, Any]) -> Any:
    """A chat answer as the API streams it: a role chunk, the content or each call's name
    and then its arguments in two pieces, the finish reason, ``[DONE]``."""
    base = {"id": f"chatcmpl-{uuid.uuid4().hex[:12]}", "object": "chat.completion.chunk"}
    base |= {"created": 0, "model": payload["model"]}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return b"data: " + orjson.dumps({**base, "choices": [choice]}) + b"\n\n"

    yield chunk({"role": "assistant", "content": ""})
    if message.get("content"):
        yield chunk({"content": message["content"]})
    for k, call in enumerate(message.get("tool_calls") or []):
        fn, args = call["function"], call["function"]["arguments"]
        head = {"index": k, "id": call["id"], "type": "function"}
        yield chunk({"tool_calls": [{**head, "function": {"name": fn["name"], "arguments": ""}}]})
        for piece in (args[: len(args) // 2], args[len(args) // 2 :]):
            yield chunk({"tool_calls": [{"index": k, "function": {"arguments": piece}}]})
    yield chunk({}, "tool_calls" if message.get("tool_calls") else "stop")
    yield b"data: [DONE]\n\n"


def _json(body: dict[str, Any], status: int = 200) -> Response:
    return Response(orjson.dumps(body), status, media_type="application/json")


def _summarizing(payload: dict[str, Any]) -> bool:
    """Whether the summarizer's prompt leads the request: Messages' ``system``, or a
    Responses request's ``instructions`` or first input item."""
    items = payload.get("input")
    first = items[:1] if isinstance(items, list) else []
    system = [payload.get("system"), payload.get("instructions"), first]
    return SYSTEM_PROMPT[:40] in orjson.dumps(system).decode()


def _summary(payload: dict[str, Any]) -> str:
    """What a summarizer writes of the conversation it is sent: how far the reads went."""
    messages = payload.get("messages") or payload.get("input") or []
    text = orjson.dumps(messages).decode()
    steps = [int(k) for k in STEP.findall(text)]
    read = f" up to step-{max(steps):02d}.txt" if steps else ""
    return f"Summary of {len(messages)} messages: the step files were read in order{read}."


def summarized_step(payload: dict[str, Any]) -> int | None:
    """The step a conversation whose history was replaced by a summary continues from."""
    found = SUMMARIZED.findall(
        orjson.dumps(payload.get("input") or payload.get("messages")).decode()
    )
    return int(found[-1]) + 1 if found else None


def next_step(
    calls: list[str], answered: bool, needs: Callable[[int], int | None] | None = None
) -> int:
    """The step to take: 1 for a new task, else one after the newest step read. A re-read of
    the step that the step after the one before it ``needs`` is not the newest: that step
    comes next. Calls that read no step (a recall) are passed over."""
    steps = [int(STEP.findall(c)[-1]) for c in calls if STEP.search(c)]
    if not answered or not steps:
        return 1
    if needs is not None and len(steps) >= 2 and needs(steps[-2] + 1) == steps[-1]:
        return steps[-2] + 1
    return steps[-1] + 1


def placeholder(text: str, step: int) -> str | None:
    """The recall handle a placeholder names for the output of ``step``'s read, if any."""
    found = re.search(rf"step-{step:02d}\.txt[^\[\]]*?recall: (r[0-9]{{15}})", text)
    return found.group(1) if found else None


# Messages -------------------------------------------------------------------------------------


def _message(payload: dict[str, Any], script: Script, tokens: int) -> dict[str, Any]:
    turns = [m for m in payload["messages"] if m["role"] in ("user", "assistant")]
    calls = [
        orjson.dumps(b.get("input")).decode()
        for m in turns
        if m["role"] == "assistant" and isinstance(m["content"], list)
        for b in m["content"]
        if b.get("type") == "tool_use"
    ]
    last = turns[-1]["content"] if turns else ""
    answered = isinstance(last, list) and any(b.get("type") == "tool_result" for b in last)
    action, step = script.decide(payload, calls, answered)
    names = {t.get("name") for t in payload.get("tools") or []}
    text = f"Step {step}: reading the next file ({uuid.uuid4().hex[:8]})."
    blocks: list[dict[str, Any]] = []
    if payload.get("thinking"):
        blocks.append({"type": "thinking", "thinking": text, "signature": sign(text)})
    if action == "recall":
        use = {"handle": step}
        blocks.append(
            {
                "type": "tool_use",
                "id": f"toolu_{uuid.uuid4().hex[:20]}",
                "name": RECALL,
                "input": use,
            }
        )
        reason = "tool_use"
    elif "Bash" in names and action == "read":
        command = f"cat step-{step:02d}.txt"
        use = {"command": command, "description": f"Read step {step}"}
        blocks.append(
            {
                "type": "tool_use",
                "id": f"toolu_{uuid.uuid4().hex[:20]}",
                "name": "Bash",
                "input": use,
            }
        )
        reason = "tool_use"
    else:
        taken = step if action == "done" else step - 1
        blocks.append({"type": "text", "text": f"Done after {taken} steps ({tokens} tokens)."})
        reason = "end_turn"
    usage = {
        "input_tokens": tokens,
        "cache_read_input_tokens": 0,
        "cache_creation_input_tokens": 0,
        "output_tokens": 30,
    }
    return assistant_message(payload, blocks, reason, usage)


# Responses ------------------------------------------------------------------------------------


def _responses_tokens(counter: ResponsesCounter, payload: dict[str, Any]) -> int:
    """The demo's count, plus tool definitions wherever they stand (Codex's ``additional_tools``
    input item holds them for its default model)."""
    items = payload["input"]
    tools = [i for i in items if isinstance(i, dict) and i.get("type") == "additional_tools"]
    extra = sum(counter.n(orjson.dumps(t.get("tools")).decode()) for t in tools)
    return counter.prompt(payload) + extra


def _invalid_items(items: list[Any]) -> str | None:
    calls = {i.get("call_id"): i.get("type") for i in items if i.get("type") in CALLS}
    outputs = {i.get("call_id") for i in items if i.get("type") in OUTPUTS}
    for k, item in enumerate(items):
        kind = item.get("type")
        if kind == "reasoning":
            nxt = items[k + 1] if k + 1 < len(items) else None
            if nxt is None or nxt.get("type") in ("reasoning", *OUTPUTS):
                return (
                    f"Item '{item.get('id')}' of type 'reasoning' was provided without its "
                    "required following item."
                )
        if kind in CALLS and item.get("call_id") not in outputs:
            return f"No tool output found for function call {item.get('call_id')}."
        if kind in OUTPUTS and calls.get(item.get("call_id")) != OUTPUTS[kind]:
            return (
                f"No tool call found for function call output with call_id {item.get('call_id')}."
            )
    return None


def _shell(payload: dict[str, Any]) -> tuple[str, str] | None:
    """How this client reads a step: ("function", name) for a top-level shell tool, ("exec",
    "exec") for Codex's default model's JavaScript ``exec`` tool, ("file", "read_file") for an
    application's own ``read_file(path)`` function tool."""
    for tool in payload.get("tools") or []:
        if tool.get("type") == "function" and tool.get("name") in ("shell", "exec_command"):
            return "function", tool["name"]
        if tool.get("type") == "function" and tool.get("name") == "read_file":
            return "file", "read_file"
    for item in payload["input"]:
        tools = item.get("tools") if isinstance(item, dict) else None
        if item.get("type") == "additional_tools" and b"exec_command" in orjson.dumps(tools):
            return "exec", "exec"
    return None


def _response(payload: dict[str, Any], script: Script, tokens: int) -> dict[str, Any]:
    items = payload["input"] if isinstance(payload["input"], list) else []
    calls = [
        str(i.get("arguments") or i.get("input") or "") for i in items if i.get("type") in CALLS
    ]
    answered = bool(items) and items[-1].get("type") in OUTPUTS
    if COMPACT_PROMPT in orjson.dumps(items[-1:]).decode():
        # Codex's own (local) compaction: its summary says how far the task went, as a model
        # that follows the compaction prompt would.
        read = [int(STEP.findall(c)[-1]) for c in calls if STEP.search(c)]
        done = max(read, default=(summarized_step(payload) or 1) - 1)
        script.compactions += 1
        text = f"Progress so far: read in order up to step-{done:02d}.txt."
        return completed(payload, [text_item(text)], tokens)
    action, step = script.decide(payload, calls, answered)
    if not calls:  # a compacted history: the summary says how far the task went
        done = summarized_step(payload)
        if done is not None:
            action, step = ("read", done) if done <= script.steps else ("done", done - 1)
    shell = _shell(payload)
    reasoning: dict[str, Any] = {
        "id": f"rs_{uuid.uuid4().hex}",
        "type": "reasoning",
        "summary": [],
        "encrypted_content": "gAAAA" + uuid.uuid4().hex * 6,
    }
    command = f"cat step-{step:02d}.txt" if action == "read" else ""
    call_id = f"call_{uuid.uuid4().hex[:16]}"
    answer: dict[str, Any]
    if action == "recall":
        answer = {
            "id": f"fc_{uuid.uuid4().hex}",
            "type": "function_call",
            "status": "completed",
            "call_id": call_id,
            "name": RECALL,
            "arguments": orjson.dumps({"handle": step}).decode(),
        }
    elif shell is not None and action == "read":
        kind, name = shell
        if kind == "exec":
            code = f"const r = await tools.exec_command({{cmd: {orjson.dumps(command).decode()}}});\ntext(r);"
            answer = {
                "id": f"ctc_{uuid.uuid4().hex}",
                "type": "custom_tool_call",
                "status": "completed",
                "call_id": call_id,
                "name": name,
                "input": code,
            }
        else:
            args: dict[str, Any] = {"command": ["bash", "-lc", command]}
            if name == "exec_command":
                args = {"cmd": command}
            elif kind == "file":
                args = {"path": f"step-{step:02d}.txt"}
            answer = {
                "id": f"fc_{uuid.uuid4().hex}",
                "type": "function_call",
                "status": "completed",
                "call_id": call_id,
                "name": name,
                "arguments": orjson.dumps(args).decode(),
            }
    else:
        taken = step if action == "done" else step - 1
        answer = text_item(f"Done after {taken} steps ({tokens} tokens).")
    return completed(payload, [reasoning, answer], tokens)
