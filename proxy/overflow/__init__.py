"""The overflow layer: everything about an upstream answering "context length exceeded".

    detect.py   is_context_overflow: a pure function over any provider's wording and shape
    retry.py    the retry loop: peek at a stream's first event, decide whether to retry
                (should_retry, which logs why at every exit), learn the window, shrink the
                budget by the first attempt's own rules, re-fit from the original, send again
    fallbacks.py   a larger-window model named by the policy, when trimming cannot make it fit

Only detection is re-exported here: the transports need it, and the retry loop needs them.
"""

from proxy.overflow.detect import Overflow, is_context_overflow

__all__ = ["Overflow", "is_context_overflow"]
