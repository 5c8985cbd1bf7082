"""Test helpers shared across suites: the scripted OpenAI-compatible server and its fixture."""

from .scripted_llm import ScriptedError, ScriptedLLM

__all__ = ["ScriptedError", "ScriptedLLM"]
