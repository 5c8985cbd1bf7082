"""`kbgraph query` (what a knowledge base knows about a question) and `kbgraph chat` (answers
from a model, in the terminal): the two commands that ask, with the retrieval modes they share."""

from __future__ import annotations

import json
import sys
from typing import Iterator

import click

from kbgraph.cli.root import main, open_engine
from kbgraph.cli.output import print_chunks

MODES = ("naive", "kg", "ppr", "global", "mix")


@main.command()
@click.argument("question")
@click.option("--kb", "kb_names", required=True, multiple=True, help="Knowledge base(s) to search.")
@click.option("--mode", type=click.Choice(MODES), default=None,
              help="naive = chunks only; kg/ppr/global use the graph; mix = chunks + graph (default with a graph).")
@click.option("--top-k", "top_k", type=click.IntRange(1, 1000), default=None, help="How many chunks to return.")
@click.option("--json", "as_json", is_flag=True)
@click.option("--context", "show_context", is_flag=True, help="Also print the rendered context an LLM would get.")
@click.pass_context
def query(ctx: click.Context, question: str, kb_names: tuple[str, ...], mode: str | None, top_k: int | None,
          as_json: bool, show_context: bool) -> None:
    """Retrieve what the knowledge base knows about QUESTION."""
    with open_engine(ctx) as engine:
        result = engine.query(list(kb_names), question, mode=mode, top_n=top_k)
        if as_json:
            click.echo(json.dumps(result.to_json(), ensure_ascii=False, indent=1))
        else:
            if result.answer:
                click.echo(result.answer + "\n")
            for entity in result.entities[:8]:
                click.echo(f"entity  {entity.score:.3f}  {entity.name} ({entity.type})")
            if result.chunks or not result.answer:  # global mode answers from reports, with no chunks
                print_chunks(result.chunks)
            if show_context:
                click.echo("\n" + result.context)
        if not result.chunks and not result.answer:
            sys.exit(1)


@main.command("chat")
@click.option("--kb", "kb_names", required=True, multiple=True, help="Knowledge base(s) the assistant answers from.")
@click.option("--mode", type=click.Choice(MODES), default=None)
@click.option("--system", "system_prompt", default="", help="Extra instructions for the assistant.")
@click.option("-q", "--question", "questions", multiple=True, help="Ask these and exit (else read questions from stdin).")
@click.pass_context
def chat_cmd(ctx: click.Context, kb_names: tuple[str, ...], mode: str | None, system_prompt: str,
             questions: tuple[str, ...]) -> None:
    """Chat with knowledge bases in the terminal; answers stream and cite their sources."""
    from kbgraph.llm.base import LLMError

    with open_engine(ctx) as engine:
        dialog = engine.dialog(list(kb_names), mode=mode, system_prompt=system_prompt)
        interactive = not questions and sys.stdin.isatty()
        source = iter(questions) if questions else _read_questions(interactive)
        unanswered = 0
        for question in source:
            if not question.strip():
                continue
            try:
                for event in dialog.ask(question):
                    if event.kind == "delta":
                        click.echo(event.text, nl=False)
                    elif event.kind == "done":
                        click.echo()
                        for ref in event.references:
                            click.echo(f"  [ID:{ref.marker}] {ref.doc_name}: {' '.join(ref.content.split())[:100]}")
            except LLMError as exc:  # the conversation goes on; the exit code says an answer is missing
                unanswered += 1
                click.echo(f"\nerror: {exc}", err=True)
        if unanswered:
            click.echo(f"error: {unanswered} question(s) could not be answered", err=True)
            sys.exit(1)


def _read_questions(interactive: bool) -> Iterator[str]:
    while True:
        try:
            line = input("you> ") if interactive else sys.stdin.readline()
        except EOFError:
            return
        if not interactive and not line:
            return
        if line.strip() in {"exit", "quit"}:
            return
        yield line
