"""The preview: the same report from the API and the CLI, and nothing forwarded."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
import respx

from proxy.cli import main
from tests.proxy.upstreams.test_forwarding import running

CONFIG: dict[str, Any] = {
    "upstreams": {"demo": {"base_url": "http://upstream.test/v1"}},
    "default_upstream": "demo",
    "models": {"small": {"context_window": 700, "tokenizer": "o200k_base"}},
    "policies": {"default": {"summarize": False}},
}


def long_body(turns: int = 30) -> dict[str, Any]:
    msgs: list[dict[str, Any]] = [{"role": "system", "content": "Be brief."}]
    for i in range(turns):
        msgs += [
            {"role": "user", "content": f"question {i} " * 10},
            {"role": "assistant", "content": f"answer {i} " * 10},
        ]
    msgs.append({"role": "user", "content": "last one"})
    return {"model": "small", "messages": msgs, "max_tokens": 100, "temperature": 0.2}


@respx.mock(assert_all_called=False)
async def test_preview_endpoint_reports_without_forwarding(respx_mock: respx.MockRouter) -> None:
    route = respx_mock.post("http://upstream.test/v1/chat/completions")
    async with running(CONFIG) as client:
        response = await client.post("/v1/contextwarden/preview", json=long_body())
    assert response.status_code == 200
    assert not route.called
    data = response.json()
    report = data["report"]
    assert report["window"] == 700
    assert report["budget"] == 700 - 100 - 16
    assert report["tokens_after"] <= report["budget"] < report["tokens_before"]
    assert report["actions"] == ["truncate_oldest", "ledger"]
    assert [s["name"] for s in report["steps"]] == [
        "lossless",
        "tool_result_microcompact",
        "reattached_clear",
        "light_trim",
    ]
    blocks = {b["id"]: b for b in report["blocks"]}
    assert blocks["history"]["label"] == "truncated"
    assert blocks["system"] == {
        "id": "system",
        "tier": 0,
        "strategy": "strict",
        "tokens_before": blocks["system"]["tokens_before"],
        "tokens_after": blocks["system"]["tokens_before"],
        "label": None,
    }
    assert data["messages"][0] == {"role": "system", "content": "Be brief."}
    assert data["messages"][-1] == {"role": "user", "content": "last one"}


async def test_preview_of_a_fitting_request_shows_its_blocks() -> None:
    async with running(CONFIG) as client:
        response = await client.post("/v1/contextwarden/preview", json=long_body(2))
    report = response.json()["report"]
    assert report["actions"] == ["none"]
    assert report["count"] == "exact"
    assert {b["id"] for b in report["blocks"]} == {"system", "current", "history"}
    assert all(b["label"] is None for b in report["blocks"])


async def test_preview_rejects_bad_input_like_the_chat_endpoint() -> None:
    async with running(CONFIG) as client:
        response = await client.post("/v1/contextwarden/preview", content=b"{")
    assert response.status_code == 400
    assert response.json()["error"]["type"] == "invalid_request_error"


def test_cli_preview_prints_the_same_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import yaml

    config = tmp_path / "cw.yaml"
    config.write_text(yaml.safe_dump({**CONFIG, "data_dir": str(tmp_path / "data")}))
    body = tmp_path / "body.json"
    body.write_bytes(orjson.dumps({**long_body(), "model": "other"}))
    assert main(["preview", str(body), "--model", "small", "--config", str(config), "--json"]) == 0
    as_json = orjson.loads(capsys.readouterr().out)
    assert as_json["report"]["actions"] == ["truncate_oldest", "ledger"]
    assert main(["preview", str(body), "--model", "small", "--config", str(config)]) == 0
    table = capsys.readouterr().out
    assert "history" in table and "truncated" in table
    assert f"{as_json['report']['tokens_before']} -> {as_json['report']['tokens_after']}" in table


def test_cli_preview_reports_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    body = tmp_path / "bad.json"
    body.write_text("{")
    assert main(["preview", str(body)]) == 1
    assert "not valid JSON" in capsys.readouterr().err
    assert main(["preview", str(tmp_path / "missing.json")]) == 2


@pytest.mark.parametrize("fmt", ["responses", "anthropic"])
async def test_preview_of_the_agent_formats_answers_in_their_own_shape(
    respx_mock: respx.MockRouter, fmt: str
) -> None:
    config = {
        **CONFIG,
        "upstreams": {
            "demo": {
                "base_url": "http://upstream.test/v1",
                "apis": ["chat_completions", "responses", "messages"],
            }
        },
    }
    turns = [m for m in long_body()["messages"] if m["role"] != "system"]
    if fmt == "responses":
        body: dict[str, Any] = {"model": "small", "instructions": "Be brief.", "input": turns}
        key = "input"
    else:
        body = {"model": "small", "max_tokens": 100, "system": "Be brief.", "messages": turns}
        key = "messages"
    async with running(config) as client:
        response = await client.post(f"/v1/contextwarden/preview?format={fmt}", json=body)
    assert response.status_code == 200, response.text
    result = response.json()
    assert result["report"]["format"] == fmt
    assert "truncate_oldest" in result["report"]["actions"]
    assert result[key][-1] == turns[-1]
    assert len(result[key]) < len(turns)
    assert not respx_mock.calls
