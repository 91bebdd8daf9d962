"""Upstreams: where a fitted request goes, and how its answer comes back.

forwarding.py        an OpenAI-compatible upstream over one pooled client (httpx): headers
                     out, the answer relayed byte for byte, the error mapping every
                     transport shares
http1.py             the default transport: HTTP/1.1 on asyncio connections, answers parsed
                     by httptools, a keep-alive pool per origin
aiohttp_transport.py aiohttp (``upstream_client: aiohttp``; uploads and HEAD always)
litellm_client.py    upstreams reached through ``litellm.acompletion`` (Bedrock, Gemini...)
capabilities.py      what an upstream was learned to serve (Responses compaction)
overflows.py         is_context_overflow: a pure function over any provider's wording and shape
                     of "context length exceeded" (the overflow layer recovers from it)
"""
