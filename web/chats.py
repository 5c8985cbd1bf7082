"""Chat assistants: create, list, update, delete (RAGFLOW_API.md §8), stored as kbgraph.meta
``Assistant`` rows. RAGFlow's API names map onto the stored ones: ``llm`` -> llm_setting (its
``model_name`` -> llm_id), ``avatar`` -> icon, ``dataset_ids`` -> kb_ids, ``prompt`` -> prompt_config with
variables/opener/show_quote/prompt renamed parameters/prologue/quote/system, and the retrieval knobs
(similarity_threshold, keywords_similarity_weight, top_n, rerank_model, top_k) lifted to columns.

``keywords_similarity_weight`` is stored as sent (as the vector weight) and read back as 1 - it, as
RAGFlow does; clients compare exactly that."""

from __future__ import annotations

import copy
from typing import Any

from flask import Response, request

from kbgraph.meta import Assistant, KnowledgeBase, NotFound
from web.api import blueprint, dedupe, tenant
from web.envelope import AUTHENTICATION_ERROR, DATA_ERROR, EXCEPTION_ERROR, ApiError, json_body, ok
from web.rows import dataset_row, http_date
from kbgraph.engine.providers import provider_of
from web.services import services

DEFAULT_SYSTEM = (
    "You are an intelligent assistant. Please summarize the content of the knowledge base to answer the question. "
    "Please list the data in the knowledge base and answer in detail. When all knowledge base content is irrelevant "
    "to the question, your answer must include the sentence \"The answer you are looking for is not found in the "
    "knowledge base!\" Answers need to consider chat history.\n      Here is the knowledge base:\n      {knowledge}\n"
    "      The above is the knowledge base.")
DEFAULT_OPENER = "Hi! I'm your assistant. What can I do for you?"
DEFAULT_EMPTY_RESPONSE = "Sorry! No relevant content was found in the knowledge base!"
# RAGFlow's stored default for a chat created without an ``llm`` object
DEFAULT_LLM_SETTING = {"temperature": 0.1, "top_p": 0.3, "frequency_penalty": 0.7, "presence_penalty": 0.4,
                       "max_tokens": 512}
BUILTIN_RERANKERS = ("BAAI/bge-reranker-v2-m3", "maidalun1020/bce-reranker-base_v1")
PROMPT_RENAMES = {"variables": "parameters", "opener": "prologue", "show_quote": "quote", "prompt": "system"}
PROMPT_COLUMNS = {"similarity_threshold": "similarity_threshold", "keywords_similarity_weight": "vector_similarity_weight",
                  "top_n": "top_n", "rerank_model": "rerank_id", "top_k": "top_k"}
# top-level keys an update may set directly (RAGFlow: the dialog table's columns)
COLUMN_KEYS = {"description": "description", "language": "language", "top_k": "top_k", "top_n": "top_n",
               "similarity_threshold": "similarity_threshold", "vector_similarity_weight": "vector_similarity_weight",
               "rerank_id": "rerank_id", "prompt_type": None, "meta_data_filter": None, "status": None, "icon": "icon"}


# -- requests -> stored fields --------------------------------------------------------------------

def _checked_datasets(ids: Any) -> list[KnowledgeBase]:
    svc = services()
    kbs: list[KnowledgeBase] = []
    for kb_id in ids or []:  # a string iterates its characters, as RAGFlow's loop does
        if not kb_id:
            continue
        try:
            kb = svc.meta.get_kb(tenant(), str(kb_id))
        except NotFound:
            raise ApiError(DATA_ERROR, f"You don't own the dataset {kb_id}") from None
        if svc.meta.kb_counts(kb.id).chunks == 0:
            raise ApiError(DATA_ERROR, f"The dataset {kb_id} doesn't own parsed file")
        kbs.append(kb)
    if len({kb.embedding_model for kb in kbs}) > 1:
        raise ApiError(AUTHENTICATION_ERROR, 'Datasets use different embedding models."')
    return kbs


def _default_model() -> str:
    return services().settings.llm_model


def _checked_model(name: Any) -> str:
    """The model a chat names, kept as sent (RAGFlow's ``name@factory`` too): ``model@provider`` of one
    of the tenant's providers (kbgraph/engine/providers.py), the configured model or another one the
    LLM endpoint serves (kbgraph.chat.models); none named: the configured one."""
    if name in (None, ""):
        return _default_model()
    if isinstance(name, str):
        named = provider_of(services().meta, tenant(), name)
        if named is not None:  # one of the tenant's providers: a model it offers (any, if it lists none)
            provider, model = named
            if not provider.chat_models or model in provider.chat_models:
                return name
            raise ApiError(DATA_ERROR, f"`model_name` {name} doesn't exist")
    if not isinstance(name, str) or not services().models.knows(name):
        raise ApiError(DATA_ERROR, f"`model_name` {name} doesn't exist")
    return name


def _checked_reranker(name: Any) -> None:
    if name and name not in BUILTIN_RERANKERS:
        raise ApiError(DATA_ERROR, f"`rerank_model` {name} doesn't exist")


def _prompt_fields(prompt: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(prompt_config keys, column values) of a request's ``prompt`` object."""
    config: dict[str, Any] = {}
    columns: dict[str, Any] = {}
    for key, value in prompt.items():
        if key in PROMPT_COLUMNS:
            columns[PROMPT_COLUMNS[key]] = value
        else:
            config[PROMPT_RENAMES.get(key, key)] = value
    return config, columns


def _with_prompt_defaults(config: dict[str, Any]) -> dict[str, Any]:
    filled = dict(config)
    if not filled.get("system"):
        filled["system"] = DEFAULT_SYSTEM
    filled.setdefault("prologue", DEFAULT_OPENER)
    filled.setdefault("parameters", [{"key": "knowledge", "optional": False}])
    filled.setdefault("empty_response", DEFAULT_EMPTY_RESPONSE)
    filled.setdefault("quote", True)
    filled.setdefault("tts", False)
    filled.setdefault("refine_multiturn", True)
    return filled


def _check_parameters(config: dict[str, Any]) -> None:
    system = str(config.get("system") or "")
    for parameter in config.get("parameters") or []:
        if isinstance(parameter, dict) and not parameter.get("optional") and f"{{{parameter.get('key')}}}" not in system:
            raise ApiError(DATA_ERROR, f"Parameter '{parameter.get('key')}' is not used")


def _checked_numbers(columns: dict[str, Any]) -> dict[str, Any]:
    for key in ("similarity_threshold", "vector_similarity_weight"):
        if key in columns and (isinstance(columns[key], bool) or not isinstance(columns[key], (int, float))):
            raise ApiError(DATA_ERROR, f"`{key}` should be a number")
    for key in ("top_n", "top_k"):
        if key in columns and (isinstance(columns[key], bool) or not isinstance(columns[key], int)):
            raise ApiError(DATA_ERROR, f"`{key}` should be an integer")
    if "rerank_id" in columns:
        _checked_reranker(columns["rerank_id"])
        columns["rerank_id"] = columns["rerank_id"] or ""
    return columns


def _object(body: dict[str, Any], key: str) -> dict[str, Any] | None:
    value = body.get(key)
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ApiError(DATA_ERROR, f"`{key}` should be an object")
    return value


# -- stored -> responses --------------------------------------------------------------------------

def _prompt_out(assistant: Assistant) -> dict[str, Any]:
    config = copy.deepcopy(assistant.prompt_config)
    out: dict[str, Any] = {}
    renamed_back = {v: k for k, v in PROMPT_RENAMES.items()}
    for key, value in config.items():
        out[renamed_back.get(key, key)] = value
    out.update({"similarity_threshold": assistant.similarity_threshold,
                "keywords_similarity_weight": 1 - assistant.vector_similarity_weight,
                "top_n": assistant.top_n, "rerank_model": assistant.rerank_id})
    return out


def assistant_row(assistant: Assistant) -> dict[str, Any]:
    return {
        "id": assistant.id, "name": assistant.name, "avatar": assistant.icon, "description": assistant.description,
        "language": assistant.language, "do_refer": "1" if assistant.do_refer else "0", "prompt_type": "simple",
        "status": "0" if assistant.deleted else "1", "tenant_id": assistant.tenant_id, "meta_data_filter": {},
        "llm": {"model_name": assistant.llm_id, **assistant.llm_setting}, "prompt": _prompt_out(assistant),
        "create_time": assistant.created, "create_date": http_date(assistant.created),
        "update_time": assistant.updated, "update_date": http_date(assistant.updated),
    }


def _raw_dataset(kb: KnowledgeBase) -> dict[str, Any]:
    svc = services()
    row = dataset_row(kb, svc.meta.kb_counts(kb.id), svc.settings.embedding_provider)
    renames = {"chunk_count": "chunk_num", "document_count": "doc_num", "chunk_method": "parser_id",
               "embedding_model": "embd_id"}
    return {renames.get(k, k): v for k, v in row.items()}


def _listed_row(assistant: Assistant) -> dict[str, Any]:
    row = assistant_row(assistant)
    row["top_k"] = assistant.top_k
    datasets = []
    for kb_id in assistant.kb_ids:
        try:
            datasets.append(_raw_dataset(services().meta.get_kb(tenant(), kb_id)))
        except NotFound:  # a deleted dataset does not break the listing
            continue
    row["datasets"] = datasets
    return row


# -- routes -----------------------------------------------------------------------------------------

@blueprint.post("/chats")
def create_chat() -> Response:
    svc = services()
    body = json_body()
    kbs = _checked_datasets(body.get("dataset_ids"))
    sent_llm = _object(body, "llm")
    llm = dict(sent_llm) if sent_llm is not None else dict(DEFAULT_LLM_SETTING)
    model = _checked_model(llm.pop("model_name", None))
    prompt = _object(body, "prompt") or {}
    config, columns = _prompt_fields(prompt)
    _checked_reranker(columns.get("rerank_id"))
    name = body.get("name")
    if not isinstance(name, str) or not name.strip():
        raise ApiError(DATA_ERROR, "`name` is required.")
    if svc.meta.find_assistant(tenant(), name) is not None:
        raise ApiError(DATA_ERROR, "Duplicated chat name in creating chat.")
    if "tenant_id" in body:
        raise ApiError(DATA_ERROR, "`tenant_id` must not be provided.")
    config = _with_prompt_defaults(config)
    _check_parameters(config)
    columns = _checked_numbers(columns)
    assistant = svc.meta.create_assistant(
        tenant(), name.strip(), kb_ids=[kb.id for kb in kbs], icon=str(body.get("avatar") or ""),
        description=str(body.get("description") or "A helpful Assistant"), llm_id=model, llm_setting=llm,
        prompt_config=config, **columns)
    row = assistant_row(assistant)
    row["dataset_ids"] = [kb.id for kb in kbs]
    return ok(row)


def _page_args() -> tuple[int, int, bool, str]:
    def number(name: str, default: int) -> int:
        try:
            return int(request.args.get(name) or default)
        except ValueError:
            raise ApiError(EXCEPTION_ERROR, f"ValueError(\"invalid literal for int() with base 10: "
                                            f"'{request.args.get(name)}'\")") from None

    page, page_size = max(number("page", 1), 1), number("page_size", 30)
    descending = (request.args.get("desc") or "true").strip().lower() != "false"
    orderby = "updated" if request.args.get("orderby") == "update_time" else "created"
    return page, page_size, descending, orderby


@blueprint.get("/chats")
def list_chats() -> Response:
    svc = services()
    page, page_size, descending, orderby = _page_args()
    chat_id, name = request.args.get("id"), request.args.get("name")
    found = svc.meta.list_assistants(tenant())
    if chat_id:
        found = [a for a in found if a.id == chat_id]
    if name:
        found = [a for a in found if a.name == name]
    if (chat_id or name) and not found:
        raise ApiError(DATA_ERROR, "The chat doesn't exist")
    found.sort(key=lambda a: (getattr(a, orderby), a.id), reverse=descending)
    if page_size <= 0:
        return ok([])
    chosen = found[(page - 1) * page_size:page * page_size]
    return ok([_listed_row(a) for a in chosen])


def _own_assistant(chat_id: str, message: str) -> Assistant:
    try:
        return services().meta.get_assistant(tenant(), chat_id)
    except NotFound:
        raise ApiError(DATA_ERROR, message) from None


@blueprint.route("/chats/<chat_id>", methods=["PUT", "PATCH"])
def update_chat(chat_id: str) -> Response:
    svc = services()
    body = json_body(required=False)
    assistant = _own_assistant(chat_id, "You do not own the chat")
    fields: dict[str, Any] = {}
    rest = dict(body)
    if "show_quotation" in rest:
        fields["do_refer"] = str(rest.pop("show_quotation")).strip().lower() not in ("0", "false", "")
    if "dataset_ids" in rest:
        fields["kb_ids"] = [kb.id for kb in _checked_datasets(rest.pop("dataset_ids"))]
    llm = rest.pop("llm", None)
    if llm:  # an empty object is no change: RAGFlow then fails on the unknown "llm" field
        if not isinstance(llm, dict):
            raise ApiError(DATA_ERROR, "`llm` should be an object")
        llm = dict(llm)
        if "model_name" in llm:
            fields["llm_id"] = _checked_model(llm.pop("model_name"))
        fields["llm_setting"] = {**assistant.llm_setting, **llm}
    elif llm is not None:
        rest["llm"] = llm
    prompt = rest.pop("prompt", None)
    config = dict(assistant.prompt_config)
    if prompt:
        if not isinstance(prompt, dict):
            raise ApiError(DATA_ERROR, "`prompt` should be an object")
        sent_config, columns = _prompt_fields(prompt)
        config.update(sent_config)
        fields.update(_checked_numbers(columns))
        fields["prompt_config"] = config
    elif prompt is not None:
        rest["prompt"] = prompt
    name = rest.pop("name", None)
    if name is not None or "name" in body:
        if not isinstance(name, str) or not name.strip():
            raise ApiError(DATA_ERROR, "`name` cannot be empty.")
        other = svc.meta.find_assistant(tenant(), name)
        if name.strip().casefold() != assistant.name.casefold() and other is not None:
            raise ApiError(DATA_ERROR, "Duplicated chat name in updating chat.")
    _check_parameters(config)
    if "avatar" in rest:
        fields["icon"] = str(rest.pop("avatar") or "")
    for key in list(rest):
        if key in COLUMN_KEYS:
            value = rest.pop(key)
            if COLUMN_KEYS[key] is not None:
                fields[COLUMN_KEYS[key]] = value
    if rest:
        key = next(iter(rest))
        raise ApiError(EXCEPTION_ERROR, f"ValueError('Unrecognized field name: \"{key}\" in {body}.')")
    fields = _checked_numbers(fields)
    svc.meta.update_assistant(tenant(), assistant.id, name=name.strip() if name else None, **fields)
    return ok()


@blueprint.delete("/chats")
def delete_chats() -> Response:
    svc = services()
    body = json_body(required=False)
    ids = body.get("ids")
    if ids is not None and (not isinstance(ids, list) or not all(isinstance(i, str) for i in ids)):
        raise ApiError(DATA_ERROR, "`ids` should be a list of strings")
    unique, dupes = dedupe(ids) if ids else ([a.id for a in svc.meta.list_assistants(tenant())], [])
    errors: list[str] = []
    done = 0
    for chat_id in unique:
        try:
            svc.meta.delete_assistant(tenant(), chat_id)
            done += 1
        except NotFound:
            errors.append(f"Assistant({chat_id}) not found.")
    if errors and not done:
        raise ApiError(DATA_ERROR, "; ".join(errors))
    errors += [f"Duplicate assistant ids: {d}" for d in dupes]
    if errors:
        return ok({"success_count": done, "errors": errors})
    return ok()
