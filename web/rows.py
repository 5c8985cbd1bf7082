"""kbgraph records as RAGFlow's JSON rows (datasets, documents, tasks)."""

from __future__ import annotations

from email.utils import formatdate
from pathlib import PurePosixPath
from typing import Any

from kbgraph.meta import Document, KBCounts, KnowledgeBase, Task
from task_executor.submit import NO_WORKER_MESSAGE, QUEUED_MESSAGE
from web.schemas import DEFAULT_NAIVE, deep_merge

RUN = {"pending": "UNSTART", "running": "RUNNING", "cancelled": "CANCEL", "done": "DONE", "failed": "FAIL"}
AURAL = {"mp3", "wav", "flac", "ogg", "m4a", "aac", "wma", "aiff", "opus"}
VISUAL = {"jpg", "jpeg", "png", "gif", "webp", "svg", "bmp", "tif", "tiff", "ico", "mp4", "mov", "avi", "mkv",
          "webm", "flv", "mpeg", "mpg", "wmv", "3gp", "psd", "pcx", "tga", "exif", "fpx", "pcd", "dxf", "apng",
          "icon", "heic", "jpe"}
DOC = {"msg", "eml", "doc", "docx", "ppt", "pptx", "yml", "xml", "htm", "json", "jsonl", "ldjson", "csv", "txt",
       "ini", "xls", "xlsx", "wps", "rtf", "hlp", "pages", "numbers", "key", "md", "py", "js", "java", "c", "cpp",
       "h", "php", "go", "ts", "sh", "cs", "kt", "html", "sql"}


def http_date(ms: int | None) -> str | None:
    return formatdate(ms / 1000.0, usegmt=True) if ms else None


def suffix(name: str) -> str:
    return PurePosixPath(name).suffix.lower().lstrip(".")


def file_type(name: str) -> str | None:
    """RAGFlow's file type by extension; None when it takes no such file."""
    ext = suffix(name)
    if ext == "pdf":
        return "pdf"
    if ext in DOC:
        return "doc"
    if ext in AURAL:
        return "aural"
    if ext in VISUAL:
        return "visual"
    return None


def embedding_label(model: str, provider: str) -> str:
    """RAGFlow's ``name@factory``: a tenant's provider's model is ``model@provider`` already."""
    if "@" in model:
        return model
    factory = {"openai": "OpenAI-API-Compatible"}.get(provider, "Builtin")
    return f"{model}@{factory}"


def parser_config_of(kb: KnowledgeBase) -> dict[str, Any] | None:
    if "parser_config" in kb.extra:
        return kb.extra["parser_config"]
    # a knowledge base made by the CLI: describe what it really does
    graph = kb.graph
    return deep_merge(DEFAULT_NAIVE, {"chunk_token_num": kb.chunk_tokens, "graphrag": {
        "use_graphrag": graph.enabled, "entity_types": list(graph.entity_types), "method": graph.method,
        "community": graph.community, "resolution": graph.resolution}})


def dataset_row(kb: KnowledgeBase, counts: KBCounts, provider: str) -> dict[str, Any]:
    extra = kb.extra
    return {
        "id": kb.id, "name": kb.name, "avatar": extra.get("avatar"),
        "description": extra.get("description", kb.description or None),
        "tenant_id": kb.tenant_id, "created_by": kb.tenant_id, "language": "English",
        "embedding_model": embedding_label(kb.embedding_model, provider),
        "permission": extra.get("permission", "me"), "chunk_method": extra.get("chunk_method", "naive"),
        "parser_config": parser_config_of(kb), "pipeline_id": None,
        "document_count": counts.documents, "chunk_count": counts.chunks, "token_num": counts.tokens,
        "pagerank": extra.get("pagerank", 0), "similarity_threshold": 0.2, "vector_similarity_weight": 0.3,
        "status": "1", "graphrag_task_id": extra.get("graphrag_task_id"),
        "graphrag_task_finish_at": extra.get("graphrag_task_finish_at"), "raptor_task_id": None,
        "raptor_task_finish_at": None, "mindmap_task_id": None, "mindmap_task_finish_at": None,
        "create_time": kb.created, "create_date": http_date(kb.created),
        "update_time": kb.updated, "update_date": http_date(kb.updated),
    }


def _duration(started: int | None, finished: int | None) -> float:
    return round((finished - started) / 1000.0, 3) if started and finished and finished >= started else 0.0


def _progress_msg(doc: Document, no_worker: bool = False) -> str:
    lines = [doc.message] if doc.message else []
    if no_worker and doc.status in ("pending", "running"):
        # "queued" forever is not what is happening: nothing will take the task until a worker runs
        lines = [NO_WORKER_MESSAGE] if doc.message in (QUEUED_MESSAGE, "") else [*lines, NO_WORKER_MESSAGE]
    if doc.error:
        lines.append(doc.error)
    if doc.status == "done":
        lines.append(f"Task done ({_duration(doc.started, doc.finished):.2f}s)")
    return "\n".join(lines)


def document_parser_config(doc: Document, kb: KnowledgeBase) -> dict[str, Any]:
    """The document's own parser_config once it was updated; the dataset's until then."""
    own = doc.extra.get("parser_config")
    return own if own is not None else (parser_config_of(kb) or {})


def document_row(doc: Document, kb: KnowledgeBase, *, no_worker: bool = False) -> dict[str, Any]:
    """``no_worker``: no worker is running (a waiting document says so instead of "queued")."""
    extra = doc.extra
    return {
        "id": doc.id, "name": doc.name, "thumbnail": "", "dataset_id": doc.kb_id,
        "chunk_method": extra.get("chunk_method", kb.extra.get("chunk_method", "naive")), "pipeline_id": None,
        "parser_config": document_parser_config(doc, kb), "source_type": "local",
        "type": extra.get("type", file_type(doc.name) or "doc"), "suffix": suffix(doc.name),
        "created_by": kb.tenant_id, "location": doc.name, "size": doc.size,
        "token_count": doc.token_count, "chunk_count": doc.chunk_count,
        "progress": -1.0 if doc.status == "failed" else float(doc.progress),
        "progress_msg": _progress_msg(doc, no_worker), "process_begin_at": http_date(doc.started),
        "process_duration": _duration(doc.started, doc.finished), "meta_fields": extra.get("meta_fields", {}),
        "run": RUN[doc.status], "status": "1" if doc.enabled else "0", "title": None,
        "create_time": doc.created, "create_date": http_date(doc.created),
        "update_time": doc.updated, "update_date": http_date(doc.updated),
    }


def task_row(task: Task) -> dict[str, Any]:
    progress = {"done": 1.0, "failed": -1.0}.get(task.status, float(task.progress))
    message = "\n".join(p for p in (task.message, task.error or "") if p)
    return {
        "id": task.id, "doc_id": task.doc_id or "", "task_type": task.kind, "priority": 0,
        "from_page": 100000000, "to_page": 100000000, "begin_at": http_date(task.started),
        "process_duration": _duration(task.started, task.finished), "progress": progress, "progress_msg": message,
        "retry_count": task.attempts, "digest": "", "chunk_ids": "", "status": task.status,
        "llm_calls": task.llm_calls, "prompt_tokens": task.prompt_tokens, "completion_tokens": task.completion_tokens,
        "create_time": task.created, "create_date": http_date(task.created),
        "update_time": task.updated, "update_date": http_date(task.updated),
    }
