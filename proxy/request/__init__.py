"""What to forward, the same for every wire format (chat, Responses, Messages, completions);
proxy/edge/exchange.py runs it:

fitting.py        how a request is made to fit by kind of body: a conversation (the
                  planner) or legacy prompts (cut at token boundaries)
planning/         the planner: what to forward for a conversation, the original bytes when
                  they fit, a compacted body if not; every plan checked against the
                  post-condition (else the safe plan); its own docstring maps its modules
budget.py         the one budget rule: how many tokens a request's messages may use
usage.py          what the upstream says it counted, read from its answer
lessons.py        what a request's outcome teaches about its model's window (overflows with
                  figures or without, answers, silent truncations)
compaction.py     a Responses compaction request (Codex's), answered by the proxy for an
                  upstream that does not implement it
context_compaction.py
                  a compaction the client asks of the server (Responses context_management,
                  Anthropic's compact edit and parameter), served for an upstream without it
conversations.py  what the proxy remembers of a conversation between requests (prefixes)
kept_prefix.py    whether a forwarded prompt kept its conversation's previous one, and its cost
sticky_cuts.py    a conversation's last cut, remembered so later requests replay it (sticky),
                  and the key a request's cut is kept under (sticky_key)
reused_counts.py  a conversation's last counts, reused by its next request's same messages
recall.py         the originals of cleared outputs kept; the model's recall calls answered
"""
