"""The pure trimming engine: token counting, message grouping and fitting strategies.

Nothing in this package performs I/O or imports an HTTP library; everything it needs from the
outside world is passed in.
"""
