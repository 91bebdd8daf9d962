"""Upstreams: where a fitted request goes, and how its answer comes back.

forwarding.py        an OpenAI-compatible upstream over one pooled client (httpx): headers
                     out, the answer relayed byte for byte, the error mapping every
                     transport shares
aiohttp_transport.py the default transport, whose pool stays cheap under concurrency
litellm_client.py    upstreams reached through ``litellm.acompletion`` (Bedrock, Gemini...)
"""
