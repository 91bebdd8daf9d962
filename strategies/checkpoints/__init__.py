"""Summary checkpoints as pure rules (the LLM call and whether to summarize are the proxy's,
proxy/summaries/):

    chain.py    which stored summary covers how much of a conversation (the hash chain over
                its messages) and where the next one cuts
    cut.py      the summary's cut points, pieces, file tracking and the summary message
    prompt.py   the summarizer's prompt as text: instructions, sections, the conversation

The ``summarize`` block strategy (strategies/summarize.py) uses them inside the engine.
"""
