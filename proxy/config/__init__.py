"""Configuration: one YAML file, overridden by ``CONTEXTWARDEN_*`` environment variables.

settings.py     the whole file: server, auth, teams, stores, summaries (load_settings)
defaults.py     the embedded default (OpenAI and Anthropic from the clients' own variables),
                also what a file that configures no upstreams is served with
startup.py      what serve checks and says before it listens: an upstream at its own address,
                the key variables that are unset and what that means
catalog.py      what is served: upstreams, their wire formats, models, prices
policies.py     how a request is made to fit, and its translation into the engine's Policy
credentials.py  where a caller's credential may go: the passthrough start-up check
plugins.py      the options of the engine's plug-ins, as pydantic models
environment.py  the process environment, prepared before litellm or tiktoken load
"""
