"""The overflow layer: everything about an upstream answering "context length exceeded".

    retry.py    the retry loop: peek at a stream's first event, decide whether to retry
                (should_retry, which logs why at every exit), learn the window, shrink the
                budget by the first attempt's own rules, re-fit from the original, send again
    fallbacks.py   a larger-window model named by the policy, when trimming cannot make it fit
    relearning.py  a learned window tried again after a while (one request let through past
                   it), and a refusal that rests on one said to

Detection (is_context_overflow over any provider's wording and shape) is the upstreams' own
(proxy/upstreams/overflows.py): every transport reads an answer with it; it is re-exported here.
"""

from proxy.upstreams.overflows import Overflow, is_context_overflow

__all__ = ["Overflow", "is_context_overflow"]
