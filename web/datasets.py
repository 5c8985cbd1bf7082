"""Datasets (kbgraph knowledge bases) and their knowledge graph: RAGFLOW_API.md §3 and §4."""

from __future__ import annotations

from typing import Any

from flask import Response, request
from pydantic import ValidationError

from kbgraph.engine import KBGraphError
from kbgraph.engine.providers import embedding_choice
from kbgraph.graph.scores import get_entities
from kbgraph.graph.view import sample_graph
from kbgraph.meta import AlreadyExists, GraphConfig, KBCounts, KnowledgeBase, MetaError, NotFound, graph_config
from kbgraph.store.base import StoreError
from kbgraph.store.records import Entity, Relation, entity_id, relation_id
from web.api import blueprint, own_kb, tenant
from web.envelope import ARGUMENT_ERROR, AUTHENTICATION_ERROR, DATA_ERROR, PERMISSION_ERROR, ApiError, json_body, ok
from web.rows import dataset_row
from web.schemas import (
    CreateDataset, DeleteDatasets, GraphragConfig, UpdateDataset, deep_merge, format_errors, is_uuid1,
    method_default, stored_parser_config,
)
from web.services import Services, services

MAX_NODES, MAX_EDGES = 256, 128


def _row(svc: Services, kb: KnowledgeBase) -> dict[str, Any]:
    return dataset_row(kb, svc.meta.kb_counts(kb.id), svc.settings.embedding_provider)


def _validate(model: type[CreateDataset] | type[DeleteDatasets], body: dict[str, Any]) -> Any:
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        raise ApiError(ARGUMENT_ERROR, format_errors(exc)) from None


def _graph_config(current: GraphConfig, sent: dict[str, Any], svc: Services) -> GraphConfig:
    """The KB's graph settings after the parser_config.graphrag keys a client sent."""
    mapped = {"use_graphrag": "enabled", "entity_types": "entity_types", "method": "method",
              "community": "community", "resolution": "resolution"}
    changes = {mapped[k]: v for k, v in sent.items() if k in mapped}
    try:
        config = graph_config({**current.model_dump(), **changes})
    except MetaError as exc:
        raise ApiError(ARGUMENT_ERROR, str(exc)) from None
    if config.enabled and config.method != "nlp" and not svc.settings.llm_configured:
        raise ApiError(ARGUMENT_ERROR, f"parser_config.graphrag.method {config.method!r} needs a chat model, and this "
                       "server has none (set KBGRAPH_LLM_BASE_URL and KBGRAPH_LLM_MODEL); use method 'nlp', which "
                       "extracts the graph without an LLM")
    return config


def _embedding_choice(value: str, svc: Services) -> str | None:
    """What the dataset records for ``value``: ``model@provider`` for an embedding model one of the
    tenant's providers offers, the server's model for its own name (RAGFlow's ``name@factory``)."""
    return embedding_choice(svc.meta, tenant(), value, svc.engine(tenant()).embedder.model_name)


def _check_embedding(value: str | None, svc: Services) -> str | None:
    """RAGFlow's availability check: None when no model is named; raises for a model that is not
    the server's and no provider of the tenant offers for embeddings."""
    if value is None:
        return None
    chosen = _embedding_choice(value, svc)
    if chosen is None:
        raise ApiError(ARGUMENT_ERROR, f"Unsupported model: <{value}>")
    return chosen


def _check_model_change(svc: Services, kb: KnowledgeBase, counts: KBCounts) -> None:
    """RAGFlow keeps the model of a dataset with chunks; a document being parsed would also write
    vectors of the old model into a dataset recorded with the new one."""
    if counts.chunks > 0:
        raise ApiError(DATA_ERROR, f"When chunk_num ({counts.chunks}) > 0, embedding_model must remain "
                       f"{dataset_row(kb, counts, svc.settings.embedding_provider)['embedding_model']}")
    parsing = svc.meta.count_documents(kb.id, status="running")
    if parsing:
        raise ApiError(DATA_ERROR, f"embedding_model cannot change while {parsing} document(s) are being parsed "
                       "with the current one")


def _free_name(svc: Services, name: str) -> str:
    """``name``, else RAGFlow's ``name(n)``: one indexed lookup per candidate, not a scan of every dataset."""
    candidate, n = name, 0
    while svc.meta.get_kb_by_name(tenant(), candidate) is not None:
        n += 1
        candidate = f"{name}({n})"
    return candidate


def _chunking(svc: Services, chunk_tokens: int) -> tuple[int, int]:
    return chunk_tokens, min(svc.settings.chunk_overlap, chunk_tokens // 8)


@blueprint.post("/datasets")
def create_dataset() -> Response:
    svc = services()
    req: CreateDataset = _validate(CreateDataset, json_body())
    embedding = _check_embedding(req.embedding_model, svc)
    graph = GraphConfig()
    if req.parser_config is not None and "graphrag" in req.parser_config.model_fields_set:
        graph = _graph_config(GraphConfig(method="light"), req.parser_config.graphrag.model_dump(), svc)
    parser_config = stored_parser_config(req.chunk_method, req.parser_config)
    tokens = req.parser_config.chunk_token_num if req.parser_config is not None else svc.settings.chunk_tokens
    chunk_tokens, overlap = _chunking(svc, tokens)
    extra = {"avatar": req.avatar, "description": req.description, "permission": req.permission,
             "chunk_method": req.chunk_method, "parser_config": parser_config, "pagerank": 0}
    engine = svc.engine(tenant())
    try:
        kb = svc.meta.create_kb(tenant(), _free_name(svc, req.name), description=req.description or "",
                                embedding_model=embedding or engine.embedder.model_name, chunk_tokens=chunk_tokens,
                                chunk_overlap=overlap, graph=graph, extra=extra)
    except AlreadyExists:  # lost a race for the name: the client may retry
        raise ApiError(DATA_ERROR, f"Dataset name '{req.name}' already exists") from None
    return ok(_row(svc, kb))


TRUE_WORDS = {"true", "1", "yes", "y", "on", "t"}
FALSE_WORDS = {"false", "0", "no", "n", "off", "f"}


def _bool_arg(name: str, default: bool) -> bool:
    """A query flag read as pydantic reads a boolean (RAGFlow validates list arguments with it)."""
    raw = request.args.get(name)
    if raw is None or raw == "":
        return default
    word = raw.strip().lower()
    if word in TRUE_WORDS or word in FALSE_WORDS:
        return word in TRUE_WORDS
    raise ApiError(ARGUMENT_ERROR, f"Field: <{name}> - Message: <Input should be a valid boolean, unable to interpret "
                   f"input> - Value: <{raw}>")


def _int_arg(name: str, default: int, minimum: int) -> int:
    raw = request.args.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ApiError(ARGUMENT_ERROR, f"Field: <{name}> - Message: <Input should be a valid integer, unable to parse "
                       f"string as an integer> - Value: <{raw}>") from None
    if value < minimum:
        raise ApiError(ARGUMENT_ERROR, f"Field: <{name}> - Message: <Input should be greater than or equal to "
                       f"{minimum}> - Value: <{raw}>")
    return value


@blueprint.get("/datasets")
def list_datasets() -> Response:
    svc = services()
    known = {"page", "page_size", "orderby", "desc", "id", "name"}
    extra = sorted(set(request.args) - known)
    if extra:
        raise ApiError(ARGUMENT_ERROR, "\n".join(f"Field: <{k}> - Message: <Extra inputs are not permitted> - "
                                                 f"Value: <{request.args[k]}>" for k in extra))
    page, page_size = _int_arg("page", 1, 1), _int_arg("page_size", 30, 1)
    orderby = request.args.get("orderby", "create_time")
    if orderby not in ("create_time", "update_time"):
        raise ApiError(ARGUMENT_ERROR, f"Field: <orderby> - Message: <Input should be 'create_time' or "
                       f"'update_time'> - Value: <{orderby}>")
    kbs = svc.meta.list_kbs(tenant())
    dataset_id, name = request.args.get("id"), request.args.get("name") or None
    if dataset_id is not None:
        if not is_uuid1(dataset_id):
            raise ApiError(ARGUMENT_ERROR, f"Field: <id> - Message: <Invalid UUID1 format> - Value: <{dataset_id}>")
        if not any(kb.id == dataset_id for kb in kbs):
            raise ApiError(PERMISSION_ERROR, f"User '{tenant()}' lacks permission for dataset '{dataset_id}'")
        kbs = [kb for kb in kbs if kb.id == dataset_id]
    if name is not None:
        if svc.meta.get_kb_by_name(tenant(), name) is None:
            raise ApiError(PERMISSION_ERROR, f"User '{tenant()}' lacks permission for dataset '{name}'")
        kbs = [kb for kb in kbs if kb.name.casefold() == name.strip().casefold()]
    key = (lambda kb: kb.created) if orderby == "create_time" else (lambda kb: kb.updated)
    kbs.sort(key=key, reverse=_bool_arg("desc", True))
    start = (page - 1) * page_size
    return ok([_row(svc, kb) for kb in kbs[start:start + page_size]], total_datasets=len(kbs))


@blueprint.route("/datasets/<dataset_id>", methods=["PUT", "PATCH"])
def update_dataset(dataset_id: str) -> Response:
    svc = services()
    body = json_body()
    req: UpdateDataset = _validate(UpdateDataset, body)
    if not is_uuid1(dataset_id):
        raise ApiError(ARGUMENT_ERROR, f"Field: <dataset_id> - Message: <Invalid UUID1 format> - Value: <{dataset_id}>")
    sent = req.model_dump(mode="json", exclude_unset=True)
    if not sent:
        raise ApiError(ARGUMENT_ERROR, "No properties were modified")
    kb = own_kb(dataset_id, f"User '{tenant()}' lacks permission for dataset '{dataset_id}'", PERMISSION_ERROR)
    extra = dict(kb.extra)
    current_config = extra.get("parser_config") or {}
    sent_config = sent.get("parser_config") or {}
    changes: dict[str, Any] = {}
    if sent_config:
        extra["parser_config"] = deep_merge(current_config, sent_config)
        if "graphrag" in sent_config:
            changes["graph"] = _graph_config(kb.graph, sent_config["graphrag"], svc)
        if "chunk_token_num" in sent_config:
            changes["chunk_tokens"], changes["chunk_overlap"] = _chunking(svc, sent_config["chunk_token_num"])
    if "chunk_method" in sent and sent["chunk_method"] != extra.get("chunk_method", "naive"):
        extra["chunk_method"] = sent["chunk_method"]
        if not sent_config:
            extra["parser_config"] = method_default(sent["chunk_method"])
            graphrag = GraphragConfig.model_validate((extra["parser_config"] or {}).get("graphrag") or {})
            if not graphrag.use_graphrag:
                changes["graph"] = graph_config({**kb.graph.model_dump(), "enabled": False})
    name = sent.get("name")
    if name is not None and name.casefold() != kb.name.casefold():
        if svc.meta.get_kb_by_name(tenant(), name) is not None:
            raise ApiError(DATA_ERROR, f"Dataset name '{name}' already exists")
        changes["name"] = name
    elif name is not None:
        changes["name"] = name  # a change of case only
    if "embedding_model" in sent and sent["embedding_model"] is not None:
        counts = svc.meta.kb_counts(kb.id)
        if _embedding_choice(sent["embedding_model"], svc) != kb.embedding_model:
            _check_model_change(svc, kb, counts)
        changes["embedding_model"] = _check_embedding(sent["embedding_model"], svc)
    for key in ("avatar", "description", "permission", "pagerank"):
        if key in sent:
            extra[key] = sent[key]
    if "description" in sent:
        changes["description"] = sent["description"] or ""
    try:
        kb = svc.meta.update_kb(tenant(), kb.id, extra=extra, **changes)
    except AlreadyExists:
        raise ApiError(DATA_ERROR, f"Dataset name '{name}' already exists") from None
    return ok(_row(svc, kb))


def _find_kb(svc: Services, dataset_id: str) -> KnowledgeBase | None:
    try:
        return svc.meta.get_kb(tenant(), dataset_id)
    except NotFound:
        return None


@blueprint.delete("/datasets")
def delete_datasets() -> Response:
    svc = services()
    req: DeleteDatasets = _validate(DeleteDatasets, json_body())
    if req.ids is None:
        own = {kb.id: kb for kb in svc.meta.list_kbs(tenant())}
    else:  # one lookup per named id: deleting one of thousands of datasets must not read them all
        own = {kb.id: kb for kb in (_find_kb(svc, i) for i in dict.fromkeys(req.ids)) if kb is not None}
    ids = list(own) if req.ids is None else req.ids
    missing = [i for i in ids if i not in own]
    if missing:  # all or nothing
        raise ApiError(PERMISSION_ERROR, f"User '{tenant()}' lacks permission for datasets: '{', '.join(missing)}'")
    engine = svc.engine(tenant())
    errors = []
    for dataset_id in ids:
        try:
            engine.delete_kb(own[dataset_id].name)  # its tasks go with it: running ones see that and stop
            svc.delete_kb_files(dataset_id)
        except (KBGraphError, MetaError, StoreError) as exc:  # keep deleting the others, report this one
            errors.append(f"Delete dataset error for {dataset_id}: {exc}")
    if errors:
        return ok({"success_count": len(ids) - len(errors), "errors": errors})
    return ok()


# -- knowledge graph ------------------------------------------------------------------------------

def _kg_kb(dataset_id: str) -> KnowledgeBase:
    return own_kb(dataset_id, "No authorization.", AUTHENTICATION_ERROR)


@blueprint.get("/datasets/<dataset_id>/knowledge_graph")
def knowledge_graph(dataset_id: str) -> Response:
    kb = _kg_kb(dataset_id)
    store = services().pool.base.store
    # the graph view's sample: the top entities by PageRank and the heaviest relations among them;
    # then their rows, for what RAGFlow's answer carries besides (descriptions, documents)
    sample = sample_graph(store, tenant(), kb.id, limit=MAX_NODES, facets=False)
    if not sample.nodes:
        return ok({"graph": {}, "mind_map": {}})
    entities = [Entity.from_doc(d) for d in get_entities(store, tenant(), [kb.id],
                                                         [entity_id(kb.id, n.key) for n in sample.nodes])]
    entities.sort(key=lambda e: (-e.pagerank, -e.mention_count, e.key))  # one order among equal PageRanks
    kept = {e.key: e for e in entities}
    ids = [relation_id(kb.id, e.source, e.target) for e in sample.edges if e.source in kept and e.target in kept]
    edges = [Relation.from_doc(d) for d in store.get(tenant(), [kb.id], ids[:MAX_EDGES])] if ids else []
    edges.sort(key=lambda r: (-r.weight, r.id))
    doc_ids = sorted({d for e in kept.values() for d in e.doc_ids})
    nodes = [{"id": e.name, "entity_name": e.name, "entity_type": e.type, "description": e.description,
              "source_id": list(e.doc_ids), "pagerank": e.pagerank, "rank": e.mention_count,
              "communities": list(e.community_ids)} for e in kept.values()]
    links = [{"source": kept[r.src_key].name, "target": kept[r.tgt_key].name, "src_id": kept[r.src_key].name,
              "tgt_id": kept[r.tgt_key].name, "description": r.description, "keywords": list(r.keywords),
              "weight": r.weight, "source_id": list(r.doc_ids)} for r in edges]
    graph = {"directed": False, "multigraph": False, "graph": {"source_id": doc_ids}, "nodes": nodes, "edges": links}
    return ok({"graph": graph, "mind_map": {}})


@blueprint.delete("/datasets/<dataset_id>/knowledge_graph")
def delete_knowledge_graph(dataset_id: str) -> Response:
    kb = _kg_kb(dataset_id)
    # the engine's drop: every graph row goes, the graph version moves on (so no cache keyed by it
    # serves the old graph), the documents wait to be extracted again and the rebuild mark goes
    try:
        services().engine(tenant()).clear_graph_for_rebuild(kb.name)
    except KBGraphError as exc:  # deleted meanwhile, or its embedding model cannot run here
        raise ApiError(DATA_ERROR, str(exc)) from None
    return ok(True)


@blueprint.post("/datasets/<dataset_id>/run_graphrag")
def run_graphrag(dataset_id: str) -> Response:
    from task_executor.submit import enqueue_graph

    svc = services()
    kb = own_kb(dataset_id, "Invalid Dataset ID")
    previous = kb.extra.get("graphrag_task_id")
    if previous:
        try:
            task = svc.meta.get_task(kb.id, previous)
        except NotFound:  # the old task row is gone: start afresh
            task = None
        if task is not None and task.status in ("pending", "running"):
            raise ApiError(DATA_ERROR, f"Task {task.id} in progress with status {task.progress}. "
                           "A Graph Task is already running.")
    if not svc.meta.count_documents(kb.id):
        raise ApiError(DATA_ERROR, f"No documents in Dataset {dataset_id}")
    if not kb.graph.enabled:
        raise ApiError(DATA_ERROR, "The knowledge graph is off for this dataset: set parser_config.graphrag."
                       "use_graphrag to true (PUT /api/v1/datasets/<id>) first")
    task = enqueue_graph(svc.settings, tenant(), kb.id, meta=svc.meta, app=svc.celery)
    svc.meta.update_kb(tenant(), kb.id, extra={**kb.extra, "graphrag_task_id": task.id})
    return ok({"graphrag_task_id": task.id})


@blueprint.get("/datasets/<dataset_id>/trace_graphrag")
def trace_graphrag(dataset_id: str) -> Response:
    from web.rows import task_row

    svc = services()
    kb = own_kb(dataset_id, "Invalid Dataset ID")
    task_id = kb.extra.get("graphrag_task_id")
    if not task_id:
        return ok({})
    try:
        return ok(task_row(svc.meta.get_task(kb.id, task_id)))
    except NotFound:  # the task row is gone (its dataset's tasks were cleared)
        return ok({})
