"""`kbgraph demo`: the bundled sample corpus indexed (graph on, no LLM needed) and a question
answered, by the model when one is configured, else with sentences of the evidence."""

from __future__ import annotations

import sys
from typing import Any

import click

from kbgraph.cli.root import main, open_engine
from kbgraph.cli.output import ProgressBars, print_chunks
from kbgraph.meta.schemas import GraphConfig


@main.command()
@click.argument("question", required=False)
@click.option("--kb", "kb_name", default="sample", show_default=True)
@click.pass_context
def demo(ctx: click.Context, question: str | None, kb_name: str) -> None:
    """Index the bundled sample corpus (graph on, no LLM needed) and answer a question."""
    from kbgraph.data import SAMPLE_CORPUS_DIR

    question = question or "What is the emblem of the guild founded by Mira Castell?"
    bars = ProgressBars(sys.stderr.isatty())
    with open_engine(ctx, creates=True) as engine:
        if engine.meta.get_kb_by_name(engine.tenant, kb_name) is None:
            engine.create_kb(kb_name, graph=GraphConfig(enabled=True, method="nlp", community=True))
        try:
            report = engine.index_paths(kb_name, [SAMPLE_CORPUS_DIR], progress=bars)
        finally:
            bars.close()
        click.echo(f"indexed {SAMPLE_CORPUS_DIR}: {report.count('indexed')} new, {report.count('skipped')} unchanged, "
                   f"{report.count('failed')} failed")
        click.echo(f"\nQ: {question}  (mode: mix = chunks + knowledge graph)\n")
        result = engine.query([kb_name], question, mode="mix")
        click.echo(_demo_answer(engine, kb_name, question, result) + "\n")
        click.echo("evidence:")
        for entity in result.entities[:5]:
            click.echo(f"entity  {entity.score:.3f}  {entity.name} ({entity.type})")
        print_chunks(result.chunks)
        if not result.chunks:
            sys.exit(1)


def _demo_answer(engine: Any, kb_name: str, question: str, result: Any) -> str:
    """The model's answer when one is configured, else sentences of the evidence, with citations."""
    from kbgraph.chat.extractive import extractive_answer

    if engine.chat_for(engine.kb(kb_name)) is not None:
        turn = engine.dialog([kb_name], mode="mix").answer(question)
        sources = "; ".join(f"[ID:{r.marker}] {r.doc_name}" for r in turn.references)
        return f"A: {turn.answer}" + (f"\n   sources: {sources}" if sources else "")
    found = extractive_answer(result)
    if found is None:
        return f"A: {engine.settings.empty_response}"
    by_marker = {m: c for c in result.chunks for m, cid in result.citations.items() if cid == c.chunk_id}
    sources = "; ".join(f"[ID:{m}] {by_marker[m].doc_name}" for m in found.markers if m in by_marker)
    return (f"A (sentences of the evidence; configure an LLM for a written answer): {found.text}"
            f"\n   sources: {sources}")
