"""The broker and its pipeline."""

from __future__ import annotations

from runtime.broker.core import Approver, AskUser, Broker
from runtime.broker.events import Event, EventBus, EventKind
from runtime.broker.sync import SyncBroker

__all__ = ["Approver", "AskUser", "Broker", "Event", "EventBus", "EventKind", "SyncBroker"]
