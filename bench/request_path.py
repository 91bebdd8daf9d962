"""``python -m bench.request_path``: which of the project's files one request runs through.

A reading aid for the architecture, not a speed figure. The proxy runs in-process (its upstream
mocked with respx); after a warm-up request, one more request of each kind is traced with
``sys.setprofile``. For each it prints:

- **files**: the project files (``proxy/``, ``strategies/``) with code that ran for the request;
- **climbs**: distinct calls from a module into one that imports it, directly or through others:
  a call back up the import graph (a callback, or a layer reaching into the one above it).

Start-up, the warm-up and the test client are not counted; only the request itself.

It first prints the import circles among the project's modules (imports at any depth of their
code, lazy ones too): there should be none.
"""

from __future__ import annotations

import ast
import asyncio
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

import httpx
import orjson
import respx

from proxy.app import create_app
from proxy.config.environment import prepare_environment
from proxy.config.settings import load_settings
from tests.respx_transport import HttpxTransport

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("proxy", "strategies")
BASE = "http://upstream.test/v1"
SETTLE = 0.2


def module_of(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """Each project module and the project modules it imports (at any depth of its code)."""
    files = [p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")]
    modules = {module_of(p) for p in files}
    graph: dict[str, set[str]] = {}
    for path in files:
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            deps |= {n for n in names if n in modules}
        graph[module_of(path)] = deps
    return graph


def above(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """For each module, every module that imports it, directly or through others."""
    importers: dict[str, set[str]] = {m: set() for m in graph}
    for mod, deps in graph.items():
        for dep in deps:
            importers[dep].add(mod)
    closure: dict[str, set[str]] = {}
    for mod in graph:
        seen: set[str] = set()
        todo = list(importers[mod])
        while todo:
            m = todo.pop()
            if m not in seen:
                seen.add(m)
                todo.extend(importers[m])
        closure[mod] = seen
    return closure


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Each import circle found by a depth-first walk, as the modules around it."""
    state: dict[str, int] = {}  # 1: on the walk's path, 2: done
    found: list[list[str]] = []

    def walk(mod: str, path: list[str]) -> None:
        state[mod] = 1
        path.append(mod)
        for dep in sorted(graph.get(mod, set()) - {mod}):
            if state.get(dep) == 1:
                found.append([*path[path.index(dep) :], dep])
            elif dep not in state:
                walk(dep, path)
        path.pop()
        state[mod] = 2

    for mod in sorted(graph):
        if mod not in state:
            walk(mod, [])
    return found


@dataclass
class Trace:
    files: set[str] = field(default_factory=set)
    functions: dict[str, set[str]] = field(default_factory=dict)
    edges: set[tuple[str, str]] = field(default_factory=set)

    def hook(self) -> Callable[[FrameType, str, Any], None]:
        def profile(frame: FrameType, event: str, _arg: Any) -> None:
            if event != "call":
                return
            callee = project_module(frame.f_code.co_filename)
            if callee is None:
                return
            self.files.add(callee)
            self.functions.setdefault(callee, set()).add(frame.f_code.co_qualname)
            back = frame.f_back
            while back is not None:
                caller = project_module(back.f_code.co_filename)
                if caller is not None:
                    if caller != callee:
                        self.edges.add((caller, callee))
                    return
                back = back.f_back

        return profile


def project_module(filename: str) -> str | None:
    path = Path(filename)
    if not path.is_absolute() or ROOT not in path.parents:
        return None
    rel = path.relative_to(ROOT)
    if rel.parts[0] not in PACKAGES:
        return None
    return module_of(path)


@dataclass(frozen=True)
class Case:
    name: str
    path: str
    body: dict[str, Any]
    answer: dict[str, Any]


def chat_body(turns: int, tag: str) -> dict[str, Any]:
    msgs: list[dict[str, Any]] = [{"role": "system", "content": "You are terse."}]
    for i in range(turns):
        msgs += [
            {"role": "user", "content": f"{tag} question {i} " + "word " * 60},
            {"role": "assistant", "content": "answer " * 60},
        ]
    msgs.append({"role": "user", "content": f"{tag} last question"})
    return {"model": "small", "messages": msgs}


CHAT_ANSWER = {
    "id": "c1",
    "object": "chat.completion",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}
    ],
    "usage": {"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11},
}


RESPONSES_ANSWER = {
    "id": "resp_1",
    "object": "response",
    "status": "completed",
    "output": [],
    "usage": {"input_tokens": 10, "output_tokens": 1, "total_tokens": 11},
}
MESSAGES_ANSWER = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "content": [{"type": "text", "text": "ok"}],
    "usage": {"input_tokens": 10, "output_tokens": 1},
}


def responses_body(turns: int, tag: str) -> dict[str, Any]:
    chat = chat_body(turns, tag)
    return {"model": "small", "instructions": "You are terse.", "input": chat["messages"][1:]}


def messages_body(turns: int, tag: str) -> dict[str, Any]:
    chat = chat_body(turns, tag)
    return {"model": "claude-small", "max_tokens": 100, "messages": chat["messages"][1:]}


COMPLETIONS_ANSWER = {
    "id": "cmpl_1",
    "object": "text_completion",
    "choices": [{"index": 0, "text": "ok", "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11},
}


def completions_body(turns: int, tag: str) -> dict[str, Any]:
    chat = chat_body(turns, tag)
    prompt = "\n".join(str(m["content"]) for m in chat["messages"])
    return {"model": "small", "max_tokens": 16, "prompt": prompt}


def cases(tag: str) -> list[Case]:
    return [
        Case("chat, fits", "/v1/chat/completions", chat_body(1, tag), CHAT_ANSWER),
        Case("chat, trimmed", "/v1/chat/completions", chat_body(40, tag), CHAT_ANSWER),
        Case("responses, trimmed", "/v1/responses", responses_body(40, tag), RESPONSES_ANSWER),
        Case("messages, trimmed", "/v1/messages", messages_body(40, tag), MESSAGES_ANSWER),
        Case("completions, cut", "/v1/completions", completions_body(40, tag), COMPLETIONS_ANSWER),
    ]


def config(data: str) -> dict[str, Any]:
    return {
        "data_dir": data,
        "upstreams": {
            "demo": {"base_url": BASE},
            "claude": {"provider": "anthropic", "base_url": BASE},
        },
        "default_upstream": "demo",
        "models": {
            "small": {"context_window": 2000, "tokenizer": "o200k_base"},
            "claude-small": {"context_window": 2000, "upstream": "claude"},
        },
        "policies": {"default": {"summarize": False}},
    }


async def trace_all() -> list[tuple[str, Trace]]:
    out: list[tuple[str, Trace]] = []
    with tempfile.TemporaryDirectory() as data, respx.mock(assert_all_called=False) as mock:
        app = create_app(load_settings(None, **config(data)), HttpxTransport())
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://proxy") as c:
                for warm, measured in zip(cases("warm"), cases("traced"), strict=True):
                    mock.post("http://upstream.test" + warm.path).respond(json=warm.answer)
                    await c.post(warm.path, content=orjson.dumps(warm.body))
                    await asyncio.sleep(SETTLE)  # the warm-up's background work is not counted
                    trace = Trace()
                    with profiled(trace.hook()):
                        r = await c.post(measured.path, content=orjson.dumps(measured.body))
                        await asyncio.sleep(SETTLE)  # the request's own background work is
                    assert r.status_code == 200, r.text
                    actions = r.headers.get("x-contextwarden-actions", "-")
                    out.append((f"{measured.name} (actions: {actions})", trace))
    return out


@contextmanager
def profiled(hook: Callable[[FrameType, str, Any], None]) -> Iterator[None]:
    """The hook on this thread and on fresh worker threads (the engine runs in one)."""
    loop = asyncio.get_running_loop()
    threading.setprofile(hook)
    workers = ThreadPoolExecutor(max_workers=2)
    loop.set_default_executor(workers)
    sys.setprofile(hook)
    try:
        yield
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
        loop.set_default_executor(ThreadPoolExecutor(max_workers=2))
        workers.shutdown(wait=True)  # its threads carry the hook


def climbs(trace: Trace, importers: dict[str, set[str]]) -> Iterator[tuple[str, str]]:
    for caller, callee in sorted(trace.edges):
        if callee in importers.get(caller, set()):
            yield caller, callee


def main() -> None:
    verbose = "-v" in sys.argv[1:]
    prepare_environment()
    graph = import_graph()
    found = circles(graph)
    print(f"import circles: {len(found)}")
    for circle in found:
        print("    " + " -> ".join(circle))
    importers = above(graph)
    for name, trace in asyncio.run(trace_all()):
        up = list(climbs(trace, importers))
        print(f"{name}: {len(trace.files)} files, {len(up)} climbs")
        for f in sorted(trace.files):
            names = sorted(trace.functions[f]) if verbose else []
            print(f"    {f}" + (f": {', '.join(names)}" if names else ""))
        for caller, callee in up:
            print(f"    climb: {caller} -> {callee}")


if __name__ == "__main__":
    main()
