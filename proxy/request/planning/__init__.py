"""The planner: what to forward for a conversation (chat, Responses, Messages alike), the
original bytes when they fit, a compacted body if not. proxy/request/fitting.py calls it:

planner.py        the entry points; every plan checked against the post-condition (else the
                  safe plan)
plan.py           a plan (the body to forward, what the headers say) and how a fit becomes one
first_sight.py    the first plan: pass-through, the byte-bound fast path, the exact count
allowances.py     what is given before a refusal: a reserve shrunk, the estimate's known error
fit_to_budget.py  a fit from the original messages: the last cut replayed, else a deep cut,
                  else a cut to the budget (summary checkpoint, then the engine's fit)
ledger.py         the ledger of what a cut removed, after the instructions (room kept first)
sticky_replay.py  a conversation's last cut replayed with the new messages appended
deep_cuts.py      how deep a fresh cut goes to leave room for growth; the next summary prepared
summary_context.py  what the summarizer needs of a request
planner_state.py  what the planner draws on between requests: settings, compactor, memories;
                  one request's Attempt (its count, counter, dry run), which the parts pass
off_loop.py       counting and fitting in a worker thread for a body with much that is new
postcondition.py  what every plan keeps, checked before it is written (else the safe plan)
"""
