"""R7: with ``fallback_on_loss`` the proxy made the summarizer call for the model asked for, then
fell back to a larger model and threw the summary away: a billed call for nothing. The choice is
now made on dry runs; only the chosen model's plan may summarize."""

from __future__ import annotations

import orjson
import pytest

from tests.security.conftest import Capture, ProxyFactory
from tests.security.test_credential_flow import config, long_chat


@pytest.mark.usefixtures("own_keys")
def test_a_request_that_falls_back_pays_for_no_summary(
    capture: Capture, summary: Capture, big: Capture, make_proxy: ProxyFactory
) -> None:
    base = config(capture, summary, big)
    base["policies"]["summing"].update(fallbacks=["huge"], fallback_on_loss=0.1)
    proxy = make_proxy(**base)
    headers = {"content-type": "application/json", "authorization": "Bearer sk-caller"}
    status, raw = proxy.raw(
        "POST", "/v1/chat/completions", headers, orjson.dumps(long_chat("medium"))
    )
    assert status == 200, raw[:300]
    assert len(big.seen) == 1  # answered by the fallback
    assert summary.seen == []  # and no summary was bought for the model passed over
    assert capture.seen == []


@pytest.mark.usefixtures("own_keys")
def test_a_request_that_stays_is_still_summarized(
    capture: Capture, summary: Capture, big: Capture, make_proxy: ProxyFactory
) -> None:
    base = config(capture, summary, big)
    base["policies"]["summing"].update(fallbacks=["huge"], fallback_on_loss=0.95)
    proxy = make_proxy(**base)
    headers = {"content-type": "application/json", "authorization": "Bearer sk-caller"}
    status, raw = proxy.raw(
        "POST", "/v1/chat/completions", headers, orjson.dumps(long_chat("medium"))
    )
    assert status == 200, raw[:300]
    assert big.seen == [] and len(capture.seen) == 1
    assert len(summary.seen) >= 1  # the model kept is planned for real, summary and all
