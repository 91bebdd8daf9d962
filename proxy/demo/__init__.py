"""``contextwarden demo``: a demo upstream for each wire format and the clients that drive it.

Not the product's request path: the demo stands on the proxy's side, the way a user would. It
imports nothing of the product but its public API (proxy/__init__.py), and its upstream stands
where a provider stands (tests/test_demo_boundary.py holds both).

    run          starts the demo upstream and the proxy, drives a conversation, prints the table
    clients      one client per format (chat, Responses, Messages), and the line each prints
    upstream     the OpenAI-compatible demo upstream, enforcing its window as OpenAI does
    anthropic    its Messages endpoint (Anthropic's tokenizer, thinking signatures, breakpoints)
    responses    its Responses endpoint
    completions  its legacy completions endpoint
    own          what the upstream needs of its own: tiktoken's files, Anthropic's pairing rule
    servers      an ASGI app on a loopback port in a background thread (the demo and the tests)
"""
