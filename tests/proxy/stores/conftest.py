"""The stores' tests run each case on SQLite and on a real redis-server (one a module)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.e2e.redis_server import redis_server


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with redis_server(tmp_path_factory.mktemp("redis")) as url:
        yield url
