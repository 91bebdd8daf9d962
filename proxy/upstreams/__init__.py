"""Upstreams: where a fitted request goes, and how its answer comes back.

forwarding.py        an OpenAI-compatible upstream: the transport's contract, the answer
                     relayed byte for byte, the error mapping
aiohttp_transport.py the HTTP transport: aiohttp, a keep-alive pool per origin
litellm_client.py    upstreams reached through ``litellm.acompletion`` (Bedrock, Gemini...): the
                     litellm transport
transports.py        the transports by name (a provider names its own: proxy/providers/)
capabilities.py      what an upstream was learned to serve (Responses compaction)
overflows.py         is_context_overflow: a pure function over any provider's wording and shape
                     of "context length exceeded" (the overflow layer recovers from it)
"""
