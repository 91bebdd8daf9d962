"""``contextwarden estimate`` on sessions of the real CLIs (recorded by record.py from the
runs of tests/clients: the transcript each CLI wrote, and the bodies it sent the proxy),
against the same requests sent through the proxy itself: the per-session figures agree within
2% (the issue's measure), and the transcripts rebuild what was sent."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import respx
import yaml
from starlette.datastructures import Headers

from proxy.cli import main
from proxy.config.settings import load_settings
from proxy.edge.auth import Principal
from proxy.edge.intake import build_request
from proxy.estimate.prelude import CONVERSATION, OVERHEAD, Prelude
from proxy.estimate.replay import Options, replay
from proxy.estimate.session import Session
from proxy.estimate.sources import sessions
from proxy.formats import FORMATS
from proxy.request.budget import budget_for
from proxy.windows.models import build_models
from strategies.cost import Prices
from strategies.tokens import count_prompt
from tests.estimate import bodies
from tests.proxy.upstreams.test_forwarding import running

FIXTURES = Path(__file__).parent / "fixtures"
BASE = "http://upstream.test/v1"
PRICES = {
    "input_cost_per_token": 3e-6,
    "cache_read_input_token_cost": 3e-7,
    "cache_creation_input_token_cost": 3.75e-6,
}
# As recorded (record.py): the model each CLI asked for, the window its run was trimmed to.
CASES = {"claude-code": ("claude-opus-4-8", 21_600), "codex": ("gpt-6.1-sol", 15_200)}
ADMIN = "CW_ESTIMATE_TEST_ADMIN"
MESSAGE = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "m",
    "content": [{"type": "text", "text": "ok"}],
    "stop_reason": "end_turn",
}
RESPONSE = {
    "id": "resp_1",
    "object": "response",
    "status": "completed",
    "output": [
        {
            "type": "message",
            "id": "m1",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": "ok", "annotations": []}],
        }
    ],
}


def config(case: str) -> dict[str, Any]:
    """The proxy's config for a case: the recorded window, the prices, a local upstream. No
    usage in its answers: the proxy learns nothing from them (no calibration), as the
    estimate does not."""
    model, window = CASES[case]
    apis = ["chat_completions", "responses", "messages"]
    return {
        "upstreams": {"local": {"base_url": BASE, "apis": apis}},
        "default_upstream": "local",
        "models": {model: {"context_window": window, "prices": PRICES}},
        "admin_key_env": ADMIN,
    }


def session(case: str) -> Session:
    found, skipped = sessions([FIXTURES / case])
    assert len(found) == 1, skipped
    return found[0]


def sent(case: str) -> list[tuple[str, dict[str, Any]]]:
    """What the CLI sent (record.py: all but the request that made Claude Code's own summary,
    whose prompt is in no transcript)."""
    return bodies.read(FIXTURES / case / "sent.txt")


async def through_proxy(case: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The bodies the CLI sent, sent again through the proxy: its own figures (/admin/stats,
    and the requests its headers say it trimmed)."""
    monkeypatch.setenv(ADMIN, "admin-key")
    with respx.mock:
        respx.post(f"{BASE}/messages").mock(return_value=httpx.Response(200, json=MESSAGE))
        respx.post(f"{BASE}/responses").mock(return_value=httpx.Response(200, json=RESPONSE))
        trimmed = 0
        async with running(config(case)) as client:
            for path, body in sent(case):
                answer = await client.post(path, json={**body, "stream": False})
                assert answer.status_code == 200, answer.text
                before = int(answer.headers["x-contextwarden-tokens-before"])
                trimmed += int(answer.headers["x-contextwarden-tokens-after"]) < before
            auth = {"Authorization": "Bearer admin-key"}
            stats = (await client.get("/admin/stats", headers=auth)).json()
    (team,) = stats["teams"].values()
    return {**team, "trimmed": trimmed}


def estimated(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], *more: str
) -> dict[str, Any]:
    """``contextwarden estimate --json`` on the case's transcript, at the proxy's config."""
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({**config(case), "data_dir": str(tmp_path / "data")}))
    capsys.readouterr()
    assert main(["estimate", str(FIXTURES / case), "--config", str(path), "--json", *more]) == 0
    (figures,) = orjson.loads(capsys.readouterr().out)["sessions"]
    return dict(figures)


def close(ours: float, theirs: float, share: float = 0.02) -> bool:
    return abs(ours - theirs) <= share * abs(theirs)


def template(case: str, tmp_path: Path) -> Path:
    """The first body the CLI sent, as ``--template`` takes it."""
    path = tmp_path / "template.json"
    path.write_bytes(orjson.dumps(sent(case)[0][1]))
    return path


@pytest.mark.parametrize("case", list(CASES))
def test_the_transcript_rebuilds_each_request_the_cli_sent(case: str) -> None:
    """Each request's conversation, as the CLI sent it (Claude Code's cache breakpoint aside:
    it moves to the newest message, and costs no token)."""
    rebuilt = session(case)
    recorded = sent(case)
    assert rebuilt.model == CASES[case][0]
    assert len(rebuilt.requests) == len(recorded)
    key = "messages" if rebuilt.fmt == "anthropic" else "input"
    for ours, (_, theirs) in zip(rebuilt.requests, recorded, strict=True):
        assert [_plain(m) for m in ours[key]] == [_plain(m) for m in theirs[key]]


def _plain(item: dict[str, Any]) -> dict[str, Any]:
    """A message's content as blocks, without cache breakpoints."""
    content = item.get("content")
    if isinstance(content, str) and "role" in item and "type" not in item:
        content = [{"type": "text", "text": content}]
    if not isinstance(content, list):
        return item
    blocks = [{k: v for k, v in b.items() if k != "cache_control"} for b in content]
    return {**item, "content": blocks}


@pytest.mark.parametrize("case", list(CASES))
def test_with_the_clis_own_prelude_the_figures_are_the_proxys(
    case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    theirs = asyncio.run(through_proxy(case, monkeypatch))
    ours = estimated(case, tmp_path, capsys, "--template", str(template(case, tmp_path)))
    assert ours["requests"] == theirs["requests"] == len(sent(case))
    assert ours["refused"] == ours["unfitted"] == 0
    assert ours["trimmed"] == theirs["trimmed"] > 0  # the window made the proxy trim
    assert close(ours["tokens_without"] - ours["tokens_with"], theirs["tokens_saved"])
    assert close(ours["cached_with"], theirs["cached_tokens_estimated"])
    assert close(ours["cost_without"], theirs["cost_as_sent"])
    assert close(ours["cost_with"], theirs["cost_as_forwarded"])
    assert ours["summaries"] == theirs["summaries_created"] == 0


def test_with_the_estimated_prelude_claude_codes_figures_are_the_proxys_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without ``--template``, the system prompt and tools Claude Code's transcript leaves out
    are a filler of the size the pinned release sends, by the proxy's count (prelude.py): the
    figures stay within 2% (the words differ, so the counts and cuts may by a few tokens)."""
    case = "claude-code"
    bare = {k: v for k, v in sent(case)[0][1].items() if k not in ("system", "tools")}
    # The session id and date in its system prompt move the count by a few tokens.
    frame = measured(case, sent(case)[0][1]) - measured(case, bare)
    assert abs(frame - OVERHEAD["claude-code"]) < 20
    theirs = asyncio.run(through_proxy(case, monkeypatch))
    ours = estimated(case, tmp_path, capsys)
    assert ours["notes"] == ["system prompt and tools: not in the transcript"]
    assert ours["trimmed"] == theirs["trimmed"] > 0
    assert close(ours["tokens_without"] - ours["tokens_with"], theirs["tokens_saved"])
    assert close(ours["cached_with"], theirs["cached_tokens_estimated"])
    assert close(ours["cost_without"], theirs["cost_as_sent"])
    assert close(ours["cost_with"], theirs["cost_as_forwarded"])


def measured(case: str, body: dict[str, Any], fmt: str = "anthropic") -> int:
    """A body's prompt tokens as the proxy counts them (tools included)."""
    settings = load_settings(None, **config(case))
    models = build_models(settings)
    who = Principal(
        team="default", config=settings.teams[settings.default_team], forward_client_auth=False
    )
    req = build_request(orjson.dumps(body), Headers(), settings, models, who, FORMATS[fmt])
    tools = budget_for(req, 10**9, settings.trimming).tools
    return tools + count_prompt(req.counter(), req.view.messages)


@pytest.mark.parametrize("case", list(CASES))
def test_the_figures_without_the_proxy_are_what_was_sent_whatever_the_window(case: str) -> None:
    """What the client sent does not depend on the window: the prompt tokens and cost without
    the proxy are the same at a window that trims, one that trims less and one that trims
    nothing, and they are each request's exact count (not the byte bound a request far under
    the window is forwarded on uncounted), its previous prompt cached."""
    model, trims = CASES[case]
    found = session(case)
    windows = [trims, 2 * trims, 1_000_000]
    runs = [
        asyncio.run(replay(found, Options(window=w, prices={"*": PRICES}, prelude=Prelude())))
        for w in windows
    ]
    assert runs[0].trimmed > 0 and runs[-1].trimmed == 0
    assert all(r.refused == r.unfitted == 0 for r in runs)

    def measure(body: dict[str, Any]) -> int:
        return measured(case, body, found.fmt)

    bodies = Prelude().complete(found, model, measure)
    counts = [measure(b) for b in bodies]
    # An append-only client's previous prompt is its prompt's prefix (Claude Code's own
    # compaction starts a new one).
    key = CONVERSATION[found.fmt]
    cached = [0] + [
        count if body[key][: len(last[key])] == last[key] else 0
        for count, last, body in zip(counts, bodies, bodies[1:], strict=False)
    ]
    prices = Prices(PRICES["input_cost_per_token"], PRICES["cache_read_input_token_cost"])
    prices = replace(prices, cache_write=PRICES["cache_creation_input_token_cost"])
    cost = sum(prices.prompt(t, c) for t, c in zip(counts, cached, strict=True))
    for r in runs:
        assert r.tokens_without == sum(counts), r.window
        assert r.cached_without == sum(cached), r.window
        assert r.cost_without == pytest.approx(cost), r.window


def test_chat_jsonl_of_request_bodies_or_of_one_conversation(tmp_path: Path) -> None:
    """A log of request bodies is replayed as it was sent; a conversation's messages, one a
    line, as the requests that asked for each assistant message."""
    steps = [
        {"role": "user", "content": f"step {k}: " + "lorem ipsum dolor " * 300} for k in range(6)
    ]
    turns: list[dict[str, Any]] = []
    for step in steps:
        turns += [step, {"role": "assistant", "content": "noted"}]
    (tmp_path / "messages.jsonl").write_bytes(b"\n".join(orjson.dumps(m) for m in turns))
    logged = [{"model": "gpt-4o", "messages": turns[: 2 * k + 1]} for k in range(6)]
    (tmp_path / "bodies.jsonl").write_bytes(b"\n".join(orjson.dumps(b) for b in logged))
    found, skipped = sessions([tmp_path])
    assert not skipped
    by_name = {Path(s.name).name: s for s in found}
    assert [r["messages"] for r in by_name["messages.jsonl"].requests] == [
        b["messages"] for b in logged
    ]
    assert by_name["bodies.jsonl"].requests == logged
    options = Options(window=3000, model="gpt-4o", prelude=Prelude())
    for s in found:
        figures = asyncio.run(replay(s, options))
        assert figures.requests == 6 and figures.refused == 0
        assert 0 < figures.trimmed < 6
        assert figures.tokens_with < figures.tokens_without


def test_what_is_not_a_session_is_said(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "notes.jsonl").write_text('{"hello": 1}\n')
    assert main(["estimate", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "not a Claude Code transcript, a Codex rollout nor chat-completions JSONL" in err
    assert "no session found" in err
    assert main(["estimate", str(tmp_path / "missing")]) == 2
    assert "no such file or directory" in capsys.readouterr().err
    (tmp_path / "notes.jsonl").write_text(
        '{"role": "user", "content": "hi"}\n{"role": "assistant"}'
    )
    assert main(["estimate", str(tmp_path)]) == 1
    assert "names no model (give --model)" in capsys.readouterr().err


def test_bad_lines_among_good_ones_are_said(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = [
        b'{"role": "user", "content": "hi"}',
        b"not json",
        b'{"role": "assistant", "content": "hello"}',
        b"",
        b"[1, 2]",
        b'{"role": "user", "content": "more"}',
        b'{"role": "assistant", "content": "ok"}',
        b'{"role": "user", "content": "torn',
    ]
    (tmp_path / "chat.jsonl").write_bytes(b"\n".join(lines))
    assert main(["estimate", str(tmp_path), "--model", "gpt-4o", "--window", "8000"]) == 0
    err = capsys.readouterr().err
    assert "chat.jsonl: 3 lines dropped, not JSON messages like the rest (lines 2, 5, 8)" in err
    bodies = [b'{"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}', b"{}"]
    (tmp_path / "chat.jsonl").write_bytes(b"\n".join(bodies))
    assert main(["estimate", str(tmp_path), "--window", "8000"]) == 0
    assert "1 line dropped, not JSON request bodies like the rest (line 2)" in (
        capsys.readouterr().err
    )


def test_a_bad_option_is_refused_by_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    codex = str(FIXTURES / "codex")
    prices = tmp_path / "prices.yaml"
    prices.write_text("a: [1\n")
    assert main(["estimate", codex, "--prices", str(prices)]) == 2
    err = capsys.readouterr().err
    assert f"--prices {prices}: not YAML or JSON: line 2, column 1: expected ','" in err
    assert "unicode string" not in err
    prices.write_text('"*":\n  input_cost_per_token: cheap\n')
    assert main(["estimate", codex, "--prices", str(prices)]) == 2
    err = capsys.readouterr().err
    assert f"--prices {prices}: *: input_cost_per_token: Input should be a valid number" in err
    assert "embedded default config" not in err
    with pytest.raises(SystemExit):
        main(["estimate", codex, "--overhead", "-100"])
    assert "-100 is below 0" in capsys.readouterr().err


def test_with_no_path_and_no_session_the_places_searched_are_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "codex"))
    assert main(["estimate"]) == 1
    err = capsys.readouterr().err
    assert f"no session found (searched: {tmp_path / '.claude' / 'projects'}, " in err
    assert str(tmp_path / "codex" / "sessions") in err
    (tmp_path / "codex" / "sessions").mkdir(parents=True)
    assert main(["estimate"]) == 1
    assert f"(searched: {tmp_path / 'codex' / 'sessions'})" in capsys.readouterr().err


def test_the_table_has_a_row_per_session_the_total_and_what_each_rests_on(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["estimate", str(FIXTURES), "--window", "21600"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("session") and "cost without" in lines[0]
    # requests, trimmed, summaries (the embedded config's policy summarizes: after Claude
    # Code's own compaction, the conversation is no single running task)
    assert lines[1].split()[1:4] == ["12", "9", "4"]
    assert lines[3].startswith("total (2 sessions)") and lines[3].split()[3] == "21"
    assert "claude-code, claude-opus-4-8, window 21600" in lines[4]
    assert "system prompt and tools: not in the transcript" in lines[4]
    assert "9 requests over the window without the proxy" in lines[4]
    assert "codex, gpt-6.1-sol, window 21600" in lines[5]
    assert main(["estimate", str(FIXTURES / "codex"), "--window", "20000"]) == 0
    assert "; 1 request over the window without the proxy" in capsys.readouterr().out
