from bench.agents import append_ceiling, broken_prefixes, prefix_token_share, prompt_items


def test_the_prefix_share_counts_the_leading_items_equal_to_the_previous_requests() -> None:
    system = {"role": "system", "content": "You are an agent. " * 20}
    first = [system, {"role": "user", "content": "step one"}]
    grown = [*first, {"role": "assistant", "content": "done"}]
    recut = [system, {"role": "user", "content": "a summary of the steps"}]
    assert prefix_token_share([first, grown]) > 0.9
    only_system = prefix_token_share([grown, recut])
    assert 0.5 < only_system < 1.0
    assert prefix_token_share([first, [{"role": "user", "content": "new"}]]) == 0.0
    assert prefix_token_share([first]) == 0.0


def test_the_prompt_is_read_as_a_cache_reads_it_tools_and_instructions_first() -> None:
    body = {"tools": [{"name": "Bash"}], "system": "rules", "messages": [{"role": "user"}]}
    assert prompt_items(body, "messages") == [
        {"tools": [{"name": "Bash"}]},
        {"system": "rules"},
        {"role": "user"},
    ]
    codex = {"instructions": "be brief", "input": [{"type": "message"}], "tools": []}
    assert prompt_items(codex, "responses") == [
        {"tools": []},
        {"instructions": "be brief"},
        {"type": "message"},
    ]


def test_the_ceiling_counts_only_the_new_trailing_items_as_lost() -> None:
    system = {"role": "system", "content": "You are an agent. " * 20}
    step = {"role": "tool", "content": "output line " * 40}
    first = [system, {"role": "user", "content": "task"}, {"role": "assistant", "content": "ok"}]
    grown = [*first, step]
    recut = [system, first[2], step]  # the task dropped: the prefix breaks after the system
    # An append keeps all it can; a re-cut keeps less, but its step is the only new item.
    assert abs(prefix_token_share([first, grown]) - append_ceiling([first, grown])) < 1e-9
    assert append_ceiling([first, grown]) < 1.0
    assert prefix_token_share([first, recut]) < append_ceiling([first, recut]) < 1.0


def test_a_broken_prefix_is_reported_with_its_first_differing_item() -> None:
    system = {"role": "system", "content": "rules"}
    first = [system, {"role": "user", "content": "task"}]
    grown = [*first, {"role": "assistant", "content": "ok"}]
    recut = [system, {"role": "user", "content": "a ledger"}, grown[2]]
    lines = broken_prefixes([first, grown, recut])
    assert lines[0] == "request 3: 3 -> 3 items, the prefix breaks at item 1"
    assert "task" in lines[1] and "a ledger" in lines[2]
    assert len(lines) == 3  # the append broke nothing
