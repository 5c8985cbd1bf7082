"""Chat over knowledge bases: dialog.py (one conversation over a retrieval function), assistant.py
(a stored assistant and its sessions)."""

from kbgraph.chat.assistant import Answer, Conversation, assistant_dialog, reference_of, references_by_message
from kbgraph.chat.dialog import AssistantConfig, ChatEvent, Dialog, Reference, Turn

__all__ = ["Answer", "AssistantConfig", "ChatEvent", "Conversation", "Dialog", "Reference", "Turn",
           "assistant_dialog", "reference_of", "references_by_message"]
