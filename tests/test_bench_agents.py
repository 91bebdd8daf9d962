from bench.agents import prefix_token_share, prompt_items


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
