"""Transitional alias: the store interface lives in ``actors.store`` (the brokers and the
controller, which are actors, depend on it; the implementations here provide it)."""

from __future__ import annotations

from actors.store import MetadataStore, StoreSession, new_event_stream

__all__ = ["MetadataStore", "StoreSession", "new_event_stream"]
