"""Bundled data: an invented sample corpus for demos and tests, and its question set.

SAMPLE_CORPUS_DIR holds documents only, so it can be indexed as a folder; the description and the
questions live beside it. SAMPLE_QUESTIONS is a JSON list of
{"question", "answer", "supporting_docs": [file names in the corpus], "hops": 1 or 2}.
"""

from pathlib import Path

DATA_DIR = Path(__file__).resolve().parent
SAMPLE_CORPUS_DIR = DATA_DIR / "sample_corpus"
SAMPLE_QUESTIONS = DATA_DIR / "SAMPLE_QUESTIONS.json"
SAMPLE_CORPUS_README = DATA_DIR / "SAMPLE_CORPUS.md"

__all__ = ["DATA_DIR", "SAMPLE_CORPUS_DIR", "SAMPLE_QUESTIONS", "SAMPLE_CORPUS_README"]
