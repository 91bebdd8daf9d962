"""Errors propagate to the one place that turns them into responses (proxy/app.py's handler):
a broad catch (``except Exception``, ``except BaseException``, a bare ``except:``,
``suppress(Exception)``) is allowed only at a named fault boundary below, each with a comment
on its line or the line before saying why. Where the store is meant, ``except StoreFault``:
a bug beside a store call propagates instead of reading as "the store is down"."""

from __future__ import annotations

import ast
import io
import logging
import tokenize
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from proxy.request.sticky_cuts import STORE_PREFIX, CutMemory
from proxy.stores import GuardedStore, StoreFault
from proxy.stores.writer import BlobWriter
from proxy.summaries.seen import SeenConversations
from proxy.summaries.single_flight import Flights
from proxy.windows.knowledge import WindowKnowledge

ROOT = Path(__file__).resolve().parents[1]
BROAD = frozenset({"Exception", "BaseException"})

# (module, function): why a broad catch is right there.
BOUNDARIES = {
    ("proxy.stores.guarded", "GuardedStore._call"): "any backend's failure becomes a StoreFault",
    ("proxy.stores.sqlite", "_in_transaction"): "rolled back, re-raised",
    ("proxy.stores.sqlite", "SqliteStore.take_slot.take"): "rolled back, re-raised",
    ("proxy.stores.sqlite_quota", "prepare"): "rolled back, re-raised",
    ("proxy.observe.tracing", "Telemetry.served"): "recorded on the span, re-raised",
    ("proxy.observe.tracing", "Telemetry.attempts.traced"): "recorded on the span, re-raised",
    ("proxy.observe.tracing", "Telemetry.summarized"): "recorded on the span, re-raised",
    ("proxy.observe.otel", "start"): "the OpenTelemetry SDK refusing a variable",
    ("proxy.upstreams.litellm_client", "complete"): "litellm's provider errors, each a status",
    ("proxy.upstreams.litellm_client", "_sse"): "a provider error mid-stream: an error event",
    ("proxy.summaries.llm", "LLMSummarizer._answer"): "the summarizer fails: truncation",
    ("proxy.summaries.compactor", "Compactor.soon.guarded"): "a background task, logged",
    ("proxy.windows.discovery", "Discovery._ask"): "any server's answer, any transport's error",
    ("proxy.request.usage", "tapped"): "a stream's finally: its lesson never fails the relay",
    ("proxy.edge.background", "Background._run"): "one task must not stop the ones after it",
    ("proxy.edge.sharing", "Sharing._run"): "a background loop, logged, goes on",
    ("proxy.edge.shadow", "after"): "after the answer: logged and counted",
    ("proxy.edge.shadow", "plan_after"): "after the answer: logged and counted",
    ("proxy.edge.websockets", "frame"): "a WebSocket session's top: an error frame, logged",
    ("proxy.runtime", "run_each"): "every shutdown step runs, each failure logged",
    ("strategies.tokens", "safe_encode.ids"): "tiktoken's pyo3 panic is a BaseException",
    ("strategies.blocks", "_count"): "a user-supplied counter, re-raised as TokenCountFailed",
}


def _is_broad(node: ast.expr | None) -> bool:
    if node is None:
        return True
    names = node.elts if isinstance(node, ast.Tuple) else [node]
    return any(isinstance(n, ast.Name) and n.id in BROAD for n in names)


def _comments(source: str) -> set[int]:
    """The lines that hold a comment."""
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    return {t.start[0] for t in tokens if t.type == tokenize.COMMENT}


class _Finder(ast.NodeVisitor):
    """Each broad catch's line and the qualified name of the function it is in."""

    def __init__(self) -> None:
        self.scope: list[str] = []
        self.found: list[tuple[int, str]] = []

    def _enter(self, node: ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.scope.append(node.name)
        self.generic_visit(node)
        self.scope.pop()

    visit_ClassDef = visit_FunctionDef = visit_AsyncFunctionDef = _enter

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        if _is_broad(node.type):
            self.found.append((node.lineno, ".".join(self.scope) or "<module>"))
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        called = node.func
        name = called.attr if isinstance(called, ast.Attribute) else getattr(called, "id", "")
        if name == "suppress" and any(_is_broad(a) for a in node.args):
            self.found.append((node.lineno, ".".join(self.scope) or "<module>"))
        self.generic_visit(node)


@cache  # one walk of the tree for the tests below
def broad_catches(root: Path) -> list[tuple[str, str, int, bool]]:
    """Every broad catch under ``root``'s proxy/ and strategies/: (module, function, line,
    whether a comment is on its line or the line before)."""
    found = []
    for path in sorted([*(root / "proxy").rglob("*.py"), *(root / "strategies").rglob("*.py")]):
        source = path.read_text()
        finder = _Finder()
        finder.visit(ast.parse(source))
        commented = _comments(source)
        module = ".".join(path.relative_to(root).with_suffix("").parts).removesuffix(".__init__")
        for line, function in finder.found:
            found.append((module, function, line, bool({line, line - 1} & commented)))
    return found


def violations(root: Path) -> list[str]:
    out = []
    for module, function, line, commented in broad_catches(root):
        where = f"{module}:{line} ({function})"
        if (module, function) not in BOUNDARIES:
            out.append(f"{where}: a broad catch outside the fault boundaries")
        elif not commented:
            out.append(f"{where}: a fault boundary without a comment saying why")
    return out


def test_broad_catches_are_only_at_the_named_fault_boundaries_each_with_its_why() -> None:
    assert violations(ROOT) == []


def test_every_named_boundary_still_catches_broadly() -> None:
    """A boundary narrowed or moved leaves the list, so that it names only what is."""
    present = {(module, function) for module, function, _, _ in broad_catches(ROOT)}
    assert set(BOUNDARIES) - present == set()


def test_the_walk_finds_every_kind_of_broad_catch(tmp_path: Path) -> None:
    (tmp_path / "proxy").mkdir()
    (tmp_path / "strategies").mkdir()
    (tmp_path / "proxy" / "m.py").write_text(
        "from contextlib import suppress\n"
        "class C:\n"
        "    def f(self):\n"
        "        try:\n"
        "            pass\n"
        "        except (ValueError, Exception):\n"
        "            pass\n"
        "        except:  # why\n"
        "            pass\n"
        "def g():\n"
        "    with suppress(BaseException):\n"
        "        pass\n"
        "    try:\n"
        "        pass\n"
        "    except ValueError:\n"
        "        pass\n"
    )
    assert broad_catches(tmp_path) == [
        ("proxy.m", "C.f", 6, False),
        ("proxy.m", "C.f", 8, True),
        ("proxy.m", "g", 11, False),
    ]
    assert len(violations(tmp_path)) == 3


# What a store-down block absorbs, and what it lets through.


class Failing:
    """A store whose every call raises ``error``."""

    def __init__(self, error: Exception) -> None:
        self.error = error
        self.usage = None

    def __getattr__(self, name: str) -> Any:
        async def call(*args: Any, **kwargs: Any) -> Any:
            raise self.error

        return call


BUG = KeyError("a bug beside the store call")


async def test_a_store_fault_in_a_cut_recall_is_absorbed_and_a_bug_propagates() -> None:
    guarded = GuardedStore(Failing(OSError("disk gone")), timeout=1)  # type: ignore[arg-type]
    assert await CutMemory(guarded).recall("conv") is None  # cut afresh, as before
    assert guarded.errors == 1
    with pytest.raises(KeyError):
        await CutMemory(Failing(BUG)).recall("conv")  # type: ignore[arg-type]


async def test_a_store_fault_in_a_learned_window_is_absorbed_and_a_bug_propagates(
    caplog: pytest.LogCaptureFixture,
) -> None:
    knowledge = WindowKnowledge.__new__(WindowKnowledge)  # its store alone is used here
    knowledge.store = Failing(StoreFault("resting"))  # type: ignore[assignment]
    with caplog.at_level(logging.WARNING):
        await knowledge.persist("team", "model", 8192)  # kept in memory all the same
    assert "could not persist the learned window of model" in caplog.text
    knowledge.store = Failing(TypeError("a bug"))  # type: ignore[assignment]
    with pytest.raises(TypeError):
        await knowledge.persist("team", "model", 8192)
    with pytest.raises(TypeError):
        await knowledge.load()


async def test_a_store_fault_in_a_summary_lock_truncates_and_a_bug_propagates() -> None:
    faults: list[Exception] = []

    async def never() -> None:
        raise AssertionError("nothing is made without the lock")

    async def run(store: Any) -> Any:
        flights = Flights(store, faults.append)
        return await flights.run("k", never, True, lambda _: None, ("s", "c"), 1)  # type: ignore[arg-type]

    assert await run(Failing(StoreFault("down"))) is None  # truncates now, never waits
    assert [type(f) for f in faults] == [StoreFault]
    with pytest.raises(KeyError):
        await run(Failing(BUG))
    assert len(faults) == 1  # a bug is no store fault


async def test_seen_marks_and_batched_writes_absorb_a_store_fault_and_let_a_bug_through() -> None:
    assert not await SeenConversations(Failing(StoreFault("down")), 60).check("c")  # type: ignore[arg-type]
    with pytest.raises(KeyError):
        await SeenConversations(Failing(BUG), 60).check("c")  # type: ignore[arg-type]
    writer = BlobWriter(Failing(StoreFault("down")))  # type: ignore[arg-type]
    writer.put(STORE_PREFIX + "c", b"1", 60)
    await writer.flush()  # the batch is dropped: its values are in memory
    writer = BlobWriter(Failing(BUG))  # type: ignore[arg-type]
    writer.put(STORE_PREFIX + "c", b"1", 60)
    with pytest.raises(KeyError):
        await writer.drain()


def test_no_invariant_is_an_assert() -> None:
    """An invariant of the proxy raises ``proxy.errors.Invariant``: ``python -O`` drops an
    ``assert``, and the code after it would go on with what it ruled out."""
    found = [
        f"{path.relative_to(ROOT)}:{node.lineno}"
        for path in sorted((ROOT / "proxy").rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Assert)
    ]
    assert not found, found
