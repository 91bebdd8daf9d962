from __future__ import annotations

from strategies.formatter import inject_into_system


def test_xml_facts_are_escaped_inside_context_tags() -> None:
    system = {"role": "system", "content": "You help."}
    out = inject_into_system(system, ['a < b & "c"', "it's"], "xml")
    assert out["content"] == (
        "You help.\n\n<context>\n  <fact>a &lt; b &amp; &quot;c&quot;</fact>\n"
        "  <fact>it&#x27;s</fact>\n</context>"
    )
    assert system["content"] == "You help."


def test_markdown_list_and_no_facts() -> None:
    system = {"role": "system", "content": "S"}
    assert inject_into_system(system, ["one", "two"], "markdown")["content"] == "S\n\n- one\n- two"
    assert inject_into_system(system, [], "xml") is system


def test_parts_content_gets_a_new_part() -> None:
    system = {"role": "system", "content": [{"type": "text", "text": "S"}]}
    out = inject_into_system(system, ["f"], "markdown")
    assert out["content"][-1] == {"type": "text", "text": "\n\n- f"}
