"""The window knowledge: how large a model's window is, for which team, in whose units, and why.

models.py       a requested name to its route, window and prices; windows learned at run
                time from the upstream's own words
families.py     wildcard model keys (``claude-*``) and what they match
modeltable.py   litellm's bundled model table, read without importing litellm
calibration.py  how the proxy's count runs against the upstream's own, per kind of token
tokenizers.py   the counters: tiktoken's exact encodings, or a calibrated estimate
advice.py       what a first run is told of a model whose window nothing states: the ways out
"""
