"""``contextwarden estimate``: a user's own past sessions replayed through the engine, offline,
one module per concern:

    command.py      the command's options, the replay of each session, its report printed
    jsonl.py        JSON Lines read leniently (a torn last line is skipped)
    session.py      a session: the requests its client sent, rebuilt, in order
    claude_code.py  Claude Code's transcripts (~/.claude/projects/<project>/<session>.jsonl)
    codex.py        Codex's rollouts (~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl)
    chat_jsonl.py   chat-completions JSONL: request bodies, or one conversation's messages
    sources.py      which reader reads a file; the files under a directory
    prelude.py      what transcripts leave out (system prompt, tool definitions): given, or
                    an estimate of their size
    replay.py       each request planned by the proxy's own planner, no network, no summary
    report.py       the figures per session and in total, as a table or JSON
"""
