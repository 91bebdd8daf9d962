"""Providers: what differs between the kinds of upstream, each kind in one module. Everything
else asks ``provider_of(upstream)`` (registry.py) and never tests a provider's name.

base.py        the Provider every kind is (its auth, wire formats, what its config needs, its
               transport, its model list, window discovery, context_management's hosts, how
               summaries are asked of it) and what it reads of an upstream's config
openai.py      OpenAI's API and the OpenAI-compatible servers
anthropic.py   Anthropic's API
litellm.py     upstreams reached through litellm (Bedrock, Gemini...)
local.py       the local servers, as refinements of the OpenAI-compatible provider, each with
               the probe that reads a model's window from its own endpoints:
ollama.py      Ollama
llamacpp.py    llama.cpp's server
vllm.py        vLLM and SGLang
lmstudio.py    LM Studio
probing.py     what a local server's probe is given (Asking) and gives back (Said)
registry.py    provider_of, the kinds by name (a kind is a module here with a PROVIDER, and its
               name in the config's list), context_management under ``auto``
"""
