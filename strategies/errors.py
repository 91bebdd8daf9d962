"""Errors raised by the engine.

    ContextError
     ├── InvalidConfig            the budget or the counter is unusable
     ├── NilStrategy              a block that holds messages has no strategy
     ├── TokenCountFailed         a counter failed or contradicted itself
     └── DoesNotFit               a block ended over budget (block_id, tokens, limit)
          ├── BudgetExceeded          a block that must be kept whole does not fit (strict)
          └── StrategyExceededBudget  a strategy returned more than the budget it was given

They mirror contexty's ErrInvalidConfig, ErrNilStrategy, ErrTokenCountFailed, ErrBudgetExceeded
and ErrStrategyExceededBudget.
"""

from __future__ import annotations


class ContextError(Exception):
    """Base class of every engine error."""


class InvalidConfig(ContextError):
    pass


class NilStrategy(ContextError):
    pass


class TokenCountFailed(ContextError):
    pass


class DoesNotFit(ContextError):
    """A block ended over its budget. ``block_id``, ``tokens`` and ``limit`` say which."""

    def __init__(self, message: str, block_id: str = "", tokens: int = 0, limit: int = 0) -> None:
        super().__init__(message)
        self.block_id = block_id
        self.tokens = tokens
        self.limit = limit


class BudgetExceeded(DoesNotFit):
    pass


class StrategyExceededBudget(DoesNotFit):
    pass
