"""Wire formats beside chat completions, each fitted to the window by the same budget rule,
overflow loop and headers as chat.

    completions.py   the legacy ``POST /v1/completions``: a ``prompt`` (a string, strings,
                     token ids) cut at token boundaries, middle-out by default
"""
