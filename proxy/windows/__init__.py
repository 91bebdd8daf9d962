"""The window knowledge: how large a model's window is, for which team, in whose units, and why.

models.py       a requested name to its route, window and prices, and the window for a team
                (window_for): the read side
learned.py      windows learned from the upstream's own words, per team, in its units
bounds.py       a window learned without figures: narrowed between what was refused and taken
discovery.py    a window read from the server, when models: does not state it
servers.py      the local servers asked with their providers' probes (proxy/providers/), and
                which ones under ``auto``
sane.py         the range a stated, discovered or learned window may take (else: unknown)
truncation.py   a silent truncation, told from an answer's usage
knowledge.py    the write side: learning, calibrating, forgetting, and keeping it in the store
stored.py       what the store keeps of it, listed and forgotten with no running proxy (the
                windows and capabilities commands)
families.py     wildcard model keys (``claude-*``) and what they match
modeltable.py   litellm's bundled model table, read without importing litellm
calibration.py  how the proxy's count runs against the upstream's own, per kind of token
tokenizers.py   the counters: tiktoken's exact encodings, or a calibrated estimate
advice.py       what a first run is told of a model whose window nothing states: the ways out
client_setup.py the lines each client (Claude Code, Codex, openai-agents) reads to know a
                model's window: contextwarden client-setup
"""
