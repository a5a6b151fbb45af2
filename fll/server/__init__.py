"""The fll REST server (FastAPI app factory `create_app` and the `serve` command).

Importing this package must never open a store or bind a socket.
"""
from __future__ import annotations

from .app import create_app

__all__ = ["create_app"]
