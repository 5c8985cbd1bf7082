"""Chat with assistants over knowledge bases (built on the chat engine once it lands)."""

from __future__ import annotations

from flask import render_template

from web.ui.common import page_blueprint

blueprint = page_blueprint("ui_chat")


@blueprint.get("/chat")
def chat_page() -> str:
    return render_template("chat.html")
