"""What to forward, the same for every wire format (chat, Responses, Messages, completions);
proxy/edge/exchange.py runs it:

fitting.py        how a request is made to fit by kind of body: a conversation (the
                  planner) or legacy prompts (cut at token boundaries)
planner.py        what to forward: the original bytes when they fit, a compacted body if not;
                  every plan checked against the post-condition (else the safe plan)
plan.py           a plan (the body to forward, what the headers say) and how a fit becomes one
first_sight.py    the first plan: pass-through, the byte-bound fast path, the exact count
allowances.py     what is given before a refusal: a reserve shrunk, the estimate's known error
fit_to_budget.py  a fit from the original messages: the last cut replayed, else a deep cut,
                  else a cut to the budget (summary checkpoint, then the engine's fit)
sticky_replay.py  a conversation's last cut replayed with the new messages appended
deep_cuts.py      how deep a fresh cut goes to leave room for growth; the next summary prepared
summary_context.py  what the summarizer needs of a request
planner_state.py  what the planner draws on between requests: settings, compactor, memories
off_loop.py       counting and fitting in a worker thread for a body with much that is new
postcondition.py  what every plan keeps, checked before it is written (else the safe plan)
budget.py         the one budget rule: how many tokens a request's messages may use
usage.py          what the upstream says it counted, read from its answer
lessons.py        what a request's outcome teaches about its model's window (overflows with
                  figures or without, answers, silent truncations)
compaction.py     a Responses compaction request (Codex's), answered by the proxy for an
                  upstream that does not implement it
conversations.py  what the proxy remembers of a conversation between requests (prefixes)
sticky_cuts.py    a conversation's last cut, remembered so later requests replay it (sticky),
                  and the key a request's cut is kept under (sticky_key)
reused_counts.py  a conversation's last counts, reused by its next request's same messages
recall.py         the originals of cleared outputs kept; the model's recall calls answered
"""
