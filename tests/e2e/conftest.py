"""A real demo upstream and a real proxy, each on a loopback port, for the openai SDK to drive."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest
from starlette.applications import Starlette

from proxy.app import create_app
from proxy.config.settings import load_settings
from proxy.demo.servers import BackgroundServer
from proxy.demo.upstream import WindowCounter, create_upstream
from tests.conftest import assert_no_plan_fallbacks

# The loopback proxy in front of a capture upstream, for end-to-end tests that check bytes.
from tests.security.conftest import capture, keys, make_proxy  # noqa: F401

WINDOW = 1024
MODEL = "demo-model"
LITELLM_MODEL = "via-litellm"


@dataclass
class Stack:
    upstream_app: Starlette
    proxy_url: str
    client: openai.OpenAI
    window: int
    anthropic: anthropic.Anthropic  # the same proxy through the anthropic SDK

    @property
    def received(self) -> list[dict[str, Any]]:
        return self.upstream_app.state.received  # type: ignore[no-any-return]

    @property
    def raw(self) -> list[bytes]:
        return self.upstream_app.state.raw  # type: ignore[no-any-return]

    def upstream_count(self, payload: dict[str, Any]) -> int:
        return WindowCounter("o200k_base", 1.0).prompt(payload)


StackFactory = Callable[..., Stack]


def unseen() -> dict[str, Any]:
    """The ``policies:`` of a test about summary machinery that sends a long conversation
    once and wants it summarized (by default, a conversation's first request is truncated:
    it may be a one-off)."""
    return {"default": {"summarizer": {"summarize_unseen": True}}}


def first_request_summaries(config: dict[str, Any]) -> dict[str, Any]:
    """``config`` with every policy summarizing from a conversation's first request on.

    By default a conversation the proxy has never seen is truncated (it may be a one-off);
    the tests of checkpoint machinery that send a long conversation once and want its summary
    say so with this, in the test (the harness runs at the defaults)."""
    policies = config.setdefault("policies", {})
    for policy in [policies.setdefault("default", {}), *policies.values()]:
        policy.setdefault("summarizer", {}).setdefault("summarize_unseen", True)
    return config


@pytest.fixture
def make_stack(tmp_path: Path) -> Iterator[StackFactory]:
    with ExitStack() as stack:

        def build(
            window: int = WINDOW,
            count_scale: float = 1.0,
            proxy_window: int | None = None,
            models: dict[str, Any] | None = None,
            summarize: bool | None = None,
            apis: list[str] | None = None,
            **settings: Any,
        ) -> Stack:
            """The stack at the defaults a user gets; ``summarize`` (and ``settings``)
            override them only where a test says so."""
            app = create_upstream(window=window, count_scale=count_scale)
            upstream = stack.enter_context(BackgroundServer(app))
            base_url = f"{upstream.url}/v1"
            config: dict[str, Any] = {
                "upstreams": {
                    "demo": {"base_url": base_url, **({"apis": apis} if apis else {})},
                    # The same upstream reached through litellm's OpenAI provider.
                    "lm": {"provider": "litellm", "model": f"openai/{MODEL}", "base_url": base_url},
                },
                "default_upstream": "demo",
                "models": models
                or {
                    MODEL: {"context_window": proxy_window or window, "tokenizer": "o200k_base"},
                    LITELLM_MODEL: {
                        "upstream": "lm",
                        "context_window": window,
                        "tokenizer": "o200k_base",
                    },
                },
                **settings,
            }
            config.setdefault("data_dir", str(tmp_path / "data"))
            if summarize is not None:
                policies = config.setdefault("policies", {})
                for policy in [policies.setdefault("default", {}), *policies.values()]:
                    policy.setdefault("summarize", summarize)
            proxy_app = create_app(load_settings(None, **config))
            apps.append(proxy_app)
            proxy = stack.enter_context(BackgroundServer(proxy_app))
            client = openai.OpenAI(base_url=f"{proxy.url}/v1", api_key="sk-test", max_retries=0)
            claude = anthropic.Anthropic(base_url=proxy.url, api_key="sk-test", max_retries=0)
            stack.enter_context(client)
            stack.enter_context(claude)
            return Stack(app, proxy.url, client, window, claude)

        apps: list[Starlette] = []
        yield build
        for proxy_app in apps:
            assert_no_plan_fallbacks(proxy_app)


@pytest.fixture
def stack(make_stack: StackFactory) -> Stack:
    return make_stack()
