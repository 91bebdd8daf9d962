"""Every option config.example.yaml documents fails at load, naming its key, when its type is
wrong: nothing the config accepted may turn into a 500 at request time."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from proxy.config.settings import ConfigError, load_settings

EXAMPLE = yaml.safe_load((Path(__file__).parents[3] / "config.example.yaml").read_text())
# Keys whose values are free-form on purpose (a header's value, a prompt override's text...).
FREE_FORM = {"headers", "prompts"}


def leaves(node: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Any]]:
    if isinstance(node, dict) and node:
        for key, value in node.items():
            if key in FREE_FORM or key == "extends":
                continue
            yield from leaves(value, (*path, key))
    elif isinstance(node, list) and node and all(isinstance(v, dict) for v in node):
        for i, value in enumerate(node):
            yield from leaves(value, (*path, i))
    else:
        yield path, node


def wrong(value: Any) -> Any:
    if isinstance(value, list):
        return 5
    return {"not": ["a", value.__class__.__name__]}


CASES = list(leaves(EXAMPLE))


def test_the_example_has_many_options() -> None:
    assert len(CASES) > 60


@pytest.mark.parametrize(("path", "value"), CASES, ids=[".".join(map(str, p)) for p, _ in CASES])
def test_a_wrong_type_fails_at_load_naming_the_key(
    path: tuple[Any, ...], value: Any, tmp_path: Path
) -> None:
    config = copy.deepcopy(EXAMPLE)
    node = config
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = wrong(value)
    file = tmp_path / "config.yaml"
    file.write_text(yaml.safe_dump(config))
    with pytest.raises(ConfigError) as failed:
        load_settings(file)
    assert str(path[-1]) in str(failed.value)


@pytest.mark.parametrize(
    ("history", "message"),
    [
        ({"strategy": "summarize"}, "summarize: true"),
        ({"strategy": "truncate_oldest", "options": {"min_messages": "three"}}, "min_messages"),
        ({"strategy": "truncate_oldest", "options": {"unit": "page"}}, "unit"),
        ({"strategy": "middle_out", "options": {"keep_first": 1.5}}, "keep_first"),
        ({"strategy": "truncate_oldest", "options": {"protect_roles": "system"}}, "protect_roles"),
    ],
)
def test_strategy_options_are_typed(history: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_settings(
            None,
            upstreams={"u": {"base_url": "http://u/v1"}},
            policies={"default": {"history": history}},
        )


@pytest.mark.parametrize(
    ("policy", "message"),
    [
        ({"light_trim": {"keep_recent": -1}}, "keep_recent"),
        ({"tool_result_microcompact": {"keep_recent": -2}}, "keep_recent"),
        ({"tool_result_microcompact": {"include_tools": "read"}}, "include_tools"),
        ({"pipeline": ["light_trim", "squash"]}, "squash"),
        ({"summarizer": {"prompts": {"system": 5}}}, "system"),
        ({"summarizer": {"prompts": {"sytem": "typo"}}}, "sytem"),
        ({"history": {"strategy": "middle_out", "options": {"keep_last": -1}}}, "keep_last"),
    ],
)
def test_pass_and_prompt_options_come_from_the_engine_and_are_checked(
    policy: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        load_settings(
            None, upstreams={"u": {"base_url": "http://u/v1"}}, policies={"default": policy}
        )


def test_the_defaults_are_the_engines() -> None:
    from strategies.engine import Policy

    settings = load_settings(None, upstreams={"u": {"base_url": "http://u/v1"}})
    built = settings.policies["default"].to_policy()
    assert built.passes == Policy().passes
    assert built.cache_cut_share == Policy().cache_cut_share
    assert built.history_strategy == Policy().history_strategy


def test_a_rule_cannot_be_called_history() -> None:
    with pytest.raises(ConfigError, match="history"):
        load_settings(
            None,
            upstreams={"u": {"base_url": "http://u/v1"}},
            policies={"default": {"rules": [{"id": "history", "strategy": "drop"}]}},
        )
