"""The learned windows and calibration fits processes of one store keep in step
(proxy/edge/sharing.py ``learned_windows``): what one learns, the others hold a step later;
what an operator forgets through one, the others forget."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from proxy.config.settings import load_settings
from proxy.edge.sharing import learned_windows
from proxy.stores import open_store
from proxy.windows.calibration import Fit, to_settings
from proxy.windows.discovery import Discovery
from proxy.windows.knowledge import WindowKnowledge
from proxy.windows.learned import store_key
from proxy.windows.models import Models, build_models

KEY = store_key("team", "m")


def knowledge(models: Models, store: Any) -> WindowKnowledge:
    """What the proxy knows of windows, with no server to ask."""

    async def fetch(*_: Any) -> None:
        raise AssertionError("no server is asked here")

    return WindowKnowledge(models, store, Discovery(models.discovered, fetch, store.put_setting))


async def test_the_store_is_the_truth_for_learned_windows(tmp_path: Path) -> None:
    settings = load_settings(None, data_dir=str(tmp_path))
    store, models = open_store(settings), build_models(settings)
    step = learned_windows(store, knowledge(models, store))
    await store.put_learned_window(KEY, 900)  # another process, after this one's start
    await step()
    assert models.learned.get("team", "m") == 900

    await store.put_learned_window(KEY, 800)
    for prefix, value in to_settings(Fit(per_token=1.25, hidden=1.25)).items():
        await store.put_setting(prefix + KEY, value)
    await step()
    assert models.learned.get("team", "m") == 800
    assert models.calibration.ratio("team", "m") == 1.25

    await store.forget_learned([KEY])  # the operator, through another process
    await store.put_learned_window(KEY, 1000)  # which learns it again, larger
    await step()
    assert models.learned.get("team", "m") == 1000  # the store's, though windows only go down

    await store.forget_learned([k for k in await store.learned_windows() if k != KEY])
    await step()
    assert models.calibration.fit("team", "m") is None
    assert models.learned.get("team", "m") == 1000
    await store.forget_learned([KEY])
    await step()
    assert models.learned.items() == {}
    await store.close()


async def test_what_this_process_learned_is_not_forgotten_by_its_own_step(tmp_path: Path) -> None:
    settings = load_settings(None, data_dir=str(tmp_path))
    store, models = open_store(settings), build_models(settings)
    step = learned_windows(store, knowledge(models, store))
    await step()
    models.learned.learn("team", "m", 700)
    await store.put_learned_window(KEY, 700)
    await step()
    await step()
    assert models.learned.get("team", "m") == 700
    await store.close()
