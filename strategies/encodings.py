"""Which tokenizer prices which model: pure name rules, no loading."""

from __future__ import annotations

from strategies.images import ImageCosts

# gpt-6*: Codex's default models (gpt-6.1-sol, gpt-6.2-sol) are OpenAI's, after gpt-5 (o200k in
# tiktoken's own table); counted as an estimate they ran 1.23-1.27 times the upstream's count.
_O200K = ("gpt-4o", "chatgpt-4o", "gpt-4.1", "gpt-4.5", "gpt-5", "gpt-6", "o1", "o3", "o4")
_CL100K = ("gpt-4", "gpt-3.5", "gpt-35")

# gpt-4o-mini charges images far more tokens than gpt-4o (2833 base, 5667 a tile).
_MINI_IMAGES = ImageCosts(base=2833, tile=5667)


def bare_name(model: str) -> str:
    """``openai/gpt-4o`` -> ``gpt-4o``; ``ft:gpt-4o-mini:org::id`` -> ``gpt-4o-mini``."""
    name = model.rsplit("/", 1)[-1].lower()
    if name.startswith("ft:"):
        name = name[3:].split(":", 1)[0]
    return name


def encoding_for_model(model: str) -> str | None:
    """The tiktoken encoding of an OpenAI model, or None when the tokenizer is not OpenAI's."""
    name = bare_name(model)
    if name.startswith(_O200K):
        return "o200k_base"
    if name.startswith(_CL100K):
        return "cl100k_base"
    return None


def image_costs_for_model(model: str) -> ImageCosts:
    return _MINI_IMAGES if bare_name(model).startswith("gpt-4o-mini") else ImageCosts()
