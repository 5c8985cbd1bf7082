"""Chat over knowledge bases: see dialog.py."""

from kbgraph.chat.dialog import AssistantConfig, ChatEvent, Dialog, Reference, Turn

__all__ = ["AssistantConfig", "ChatEvent", "Dialog", "Reference", "Turn"]
