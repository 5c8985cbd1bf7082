"""Request models of the dataset endpoints, mirroring RAGFlow's pydantic validators so that the
wire messages match (``Field: <loc> - Message: <msg> - Value: <input>``), and the stored
``parser_config`` rules (method defaults, deep merge). As RAGFlow v0.22.1 validates datasets and documents.
"""

from __future__ import annotations

import copy
import json
import uuid
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError, field_validator
from pydantic_core import PydanticCustomError

from kbgraph.meta import DEFAULT_ENTITY_TYPES

CHUNK_METHODS = ("naive", "book", "email", "laws", "manual", "one", "paper", "picture", "presentation", "qa",
                 "table", "tag")
RAPTOR_PROMPT = ("Please summarize the following paragraphs. Be careful with the numbers, do not make things up. "
                 "Paragraphs as following:\n      {cluster_content}\nThe above is the content you need to summarize.")
DEFAULT_NAIVE: dict[str, Any] = {
    "layout_recognize": "DeepDOC", "chunk_token_num": 512, "delimiter": "\n", "auto_keywords": 0,
    "auto_questions": 0, "html4excel": False, "topn_tags": 3,
    "raptor": {"use_raptor": True, "prompt": RAPTOR_PROMPT, "max_token": 256, "threshold": 0.1, "max_cluster": 64,
               "random_seed": 0},
    "graphrag": {"use_graphrag": True, "entity_types": list(DEFAULT_ENTITY_TYPES), "method": "light"},
}
_NO_EXTRAS = {"raptor": {"use_raptor": False}, "graphrag": {"use_graphrag": False}}
METHOD_DEFAULTS: dict[str, dict[str, Any] | None] = {
    "naive": DEFAULT_NAIVE, **{m: _NO_EXTRAS for m in ("qa", "manual", "paper", "book", "laws", "presentation")},
    **{m: None for m in ("tag", "resume", "table", "one", "email", "picture")},
}

Name = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=128)]
LongText = Annotated[str, StringConstraints(max_length=65535)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class RaptorConfig(_Strict):
    use_raptor: bool = False
    prompt: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)] = RAPTOR_PROMPT
    max_token: int = Field(default=256, ge=1, le=2048)
    threshold: float = Field(default=0.1, ge=0.0, le=1.0)
    max_cluster: int = Field(default=64, ge=1, le=1024)
    random_seed: int = Field(default=0, ge=0)


class GraphragConfig(_Strict):
    use_graphrag: bool = False
    entity_types: list[str] = Field(default_factory=lambda: list(DEFAULT_ENTITY_TYPES))
    # "nlp" is kbgraph's LLM-free extraction; RAGFlow knows only light and general
    method: Literal["light", "general", "nlp"] = "light"
    community: bool = False
    resolution: bool = False


class ParserConfig(_Strict):
    auto_keywords: int = Field(default=0, ge=0, le=32)
    auto_questions: int = Field(default=0, ge=0, le=10)
    chunk_token_num: int = Field(default=512, ge=1, le=2048)
    delimiter: Annotated[str, StringConstraints(min_length=1)] = "\\n"
    html4excel: bool = False
    layout_recognize: str = "DeepDOC"
    tag_kb_ids: list[str] = Field(default_factory=list)
    topn_tags: int = Field(default=1, ge=1, le=10)
    filename_embd_weight: float | None = Field(default=0.1, ge=0.0, le=1.0)
    task_page_size: int | None = Field(default=None, ge=1)
    pages: list[list[int]] | None = None
    raptor: RaptorConfig = Field(default_factory=RaptorConfig)
    graphrag: GraphragConfig = Field(default_factory=GraphragConfig)


def _check_avatar(value: str | None) -> str | None:
    if value is None:
        return None
    if "," not in value:
        raise PydanticCustomError("format_invalid", "Missing MIME prefix. Expected format: data:<mime>;base64,<data>")
    prefix = value.split(",", 1)[0]
    if not prefix.startswith("data:"):
        raise PydanticCustomError("format_invalid", "Invalid MIME prefix format. Must start with 'data:'")
    mime = prefix[5:].split(";", 1)[0]
    if mime not in ("image/jpeg", "image/png"):
        raise PydanticCustomError("format_invalid", "Unsupported MIME type. Allowed: ['image/jpeg', 'image/png']")
    return value


def _check_embedding_model(value: str | None) -> str | None:
    if value is None:
        return None
    value = value.strip()
    if "@" not in value:
        raise PydanticCustomError("format_invalid", "Embedding model identifier must follow <model_name>@<provider> format")
    model, provider = value.split("@", 1)
    if not model.strip() or not provider.strip():
        raise PydanticCustomError("format_invalid", "Both model_name and provider must be non-empty strings")
    return value


def _parser_config_before(value: Any) -> Any:
    if value is None or value == {}:
        return None
    if isinstance(value, dict):
        size = len(json.dumps(value))
        if size > 65535:
            raise PydanticCustomError(
                "string_too_long", f"Parser config exceeds size limit (max 65,535 characters). Current size: {size}")
    return value


class CreateDataset(_Strict):
    name: Name
    avatar: Annotated[str, StringConstraints(max_length=65535)] | None = None
    description: LongText | None = None
    embedding_model: Annotated[str, StringConstraints(max_length=255)] | None = None
    permission: Literal["me", "team"] = "me"
    chunk_method: Literal[CHUNK_METHODS] = "naive"  # type: ignore[valid-type]
    parser_config: ParserConfig | None = None

    @field_validator("name")
    @classmethod
    def _name_bytes(cls, value: str) -> str:
        if len(value.encode("utf-8")) > 128:
            raise PydanticCustomError("string_too_long", "Dataset name exceeds 128 bytes when UTF-8 encoded")
        return value

    _avatar = field_validator("avatar")(classmethod(lambda cls, v: _check_avatar(v)))
    _embedding = field_validator("embedding_model", mode="before")(classmethod(
        lambda cls, v: _check_embedding_model(v) if isinstance(v, str) else v))
    _parser = field_validator("parser_config", mode="before")(classmethod(lambda cls, v: _parser_config_before(v)))


class UpdateDataset(CreateDataset):
    name: Name = ""  # type: ignore[assignment]  # only keys the client sent are applied
    pagerank: int = Field(default=0, ge=0, le=100)


def _is_uuid1(value: Any) -> bool:
    try:
        return isinstance(value, str) and uuid.UUID(hex=value).version == 1
    except ValueError:
        return False


class DeleteDatasets(_Strict):
    ids: list[str] | None

    @field_validator("ids")
    @classmethod
    def _ids(cls, value: list[str] | None) -> list[str] | None:
        if value is None:
            return None
        if not all(_is_uuid1(v) for v in value):
            raise PydanticCustomError("invalid_UUID1_format", "Invalid UUID1 format")
        dupes = sorted({v for v in value if value.count(v) > 1})
        if dupes:
            raise PydanticCustomError("duplicate_uuids", "Duplicate ids: '{dupes}'", {"dupes": ", ".join(dupes)})
        return value


def is_uuid1(value: Any) -> bool:
    return _is_uuid1(value)


def format_errors(exc: ValidationError) -> str:
    """RAGFlow's one line per error: ``Field: <a.b> - Message: <msg> - Value: <input>``."""
    lines = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"])
        msg = err["msg"]
        if err["type"] == "literal_error" and err["loc"][-2:] == ("graphrag", "method"):
            # RAGFlow's own wording first (clients match it), then kbgraph's third method
            msg = "Input should be 'light' or 'general' (or 'nlp': kbgraph's extraction without an LLM)"
        value = str(err.get("input", ""))
        if len(value) > 128:
            value = value[:128] + "..."
        lines.append(f"Field: <{loc}> - Message: <{msg}> - Value: <{value}>")
    return "\n".join(lines)


def deep_merge(base: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    merged = copy.deepcopy(base)
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def method_default(chunk_method: str) -> dict[str, Any] | None:
    found = METHOD_DEFAULTS.get(chunk_method)
    return copy.deepcopy(found) if found is not None else None


def stored_parser_config(chunk_method: str, given: ParserConfig | None) -> dict[str, Any] | None:
    """What RAGFlow stores at create: the method default, deep-merged with the full given config."""
    default = method_default(chunk_method)
    if given is None:
        return default
    return deep_merge(default or {}, given.model_dump(mode="json"))
