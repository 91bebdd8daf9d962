"""llama.cpp's server: ``/props`` states a slot's context."""

from __future__ import annotations

from proxy.providers.local import local_server

PROVIDER = local_server("llama.cpp", probe="llama.cpp")
