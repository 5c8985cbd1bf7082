"""Reading entity/relation records out of whatever an LLM actually answered.

The prompts ask for GraphRAG-style records, ``("entity"<|>NAME<|>TYPE<|>DESCRIPTION)`` and
``("relationship"<|>SRC<|>TGT<|>DESCRIPTION[<|>KEYWORDS]<|>STRENGTH)``, separated by ``##`` and
ended by ``<|COMPLETE|>``. Real models (small local ones above all) bend every part of that, and a
chunk whose answer cannot be read is a hole in the graph, so the parser accepts anything it can make
sense of: reasoning blocks, code fences, prose around the records, other delimiters, records on
separate lines, wrong-case or missing tags, quotes, missing parentheses, strengths written as words or
fractions, and JSON instead of records. It never raises; records it cannot read are counted in
``dropped``. Types and names are only cleaned here; ``extract.finalize`` applies the graph's rules.
"""

from __future__ import annotations

import ast
import csv
import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

from kbgraph.graph.extract import ExtractedEntity, ExtractedRelation

DEFAULT_WEIGHT = 1.0
_MAX_NAME_CHARS = 200

_ENTITY_TAGS = frozenset({"entity", "entities", "node", "nodes"})
_RELATION_TAGS = frozenset({"relationship", "relationships", "relation", "relations", "edge", "edges", "rel"})
# records some prompts ask for and we do not use: skipped without counting them as dropped
_IGNORED_TAGS = frozenset({"content_keywords", "high_level_keywords", "low_level_keywords"})
_ALL_TAGS = sorted(_ENTITY_TAGS | _RELATION_TAGS | _IGNORED_TAGS, key=len, reverse=True)

_ANGLE_DELIM = r"<\s*\|[^<>\n]{0,4}?\|?\s*>|<\|+|\|+>"  # <|>, <||>, <|#|>, and the broken halves <| and |>
_QUOTES = "\"'“”‘’`"
_THINK_BLOCK = re.compile(r"<(think|thinking|reasoning)>.*?</\1>", re.IGNORECASE | re.DOTALL)
_THINK_CLOSE = re.compile(r"^.*?</(?:think|thinking|reasoning)>", re.IGNORECASE | re.DOTALL)
_THINK_OPEN = re.compile(r"</?(?:think|thinking|reasoning)>", re.IGNORECASE)
_FENCE = re.compile(r"^[ \t]*```[\w+-]*[ \t]*$", re.MULTILINE)
_NUMBER = re.compile(r"^[+-]?(\d+(?:\.\d*)?|\.\d+)$")
_FRACTION = re.compile(r"^(\d+(?:\.\d+)?)\s*(?:/|out of)\s*(\d+(?:\.\d+)?)$", re.IGNORECASE)
_PERCENT = re.compile(r"^(\d+(?:\.\d+)?)\s*%$")
_LABELLED = re.compile(r"^(?:relationship[_ ])?(?:strength|weight|score|confidence)\s*[:=]\s*(.+)$", re.IGNORECASE)
_STRENGTH_WORDS = frozenset({"high", "medium", "low", "strong", "weak", "moderate", "very high", "very low",
                             "very strong", "very weak", "none", "n/a", "unknown"})
_KEYWORD_SPLIT = re.compile(r"[,，;；、]")
_SQUARE = re.compile(r"[\[\]]")
_ROUND = re.compile(r"[()（）]")


@dataclass
class ParsedOutput:
    entities: list[ExtractedEntity] = field(default_factory=list)
    relations: list[ExtractedRelation] = field(default_factory=list)
    dropped: int = 0
    complete: bool = False  # the completion marker was present

    @property
    def empty(self) -> bool:
        return not self.entities and not self.relations


def parse_strength(value: str) -> float | None:
    """A relation strength from "8", "0.8", "8/10", "80%", "strength: 7"; words like "high" give the
    default. None when the value does not look like a strength at all."""
    s = value.strip().strip(_QUOTES + "()*[] ").strip()
    m = _LABELLED.match(s)
    if m:
        s = m.group(1).strip().strip(_QUOTES + "()*[] ")
    low = s.lower()
    try:
        if _NUMBER.match(s):
            w = float(s)
        elif m := _FRACTION.match(s):
            w = 10.0 * float(m.group(1)) / float(m.group(2))
        elif m := _PERCENT.match(s):
            w = float(m.group(1)) / 10.0
        elif low in _STRENGTH_WORDS:
            return DEFAULT_WEIGHT
        else:
            return None
    except (ValueError, ZeroDivisionError):
        return DEFAULT_WEIGHT
    return w if math.isfinite(w) and w > 0 else DEFAULT_WEIGHT


def _clean_field(value: str) -> str:
    s = value.strip()
    prev = None
    while s != prev:
        prev = s
        s = s.strip().strip(_QUOTES).strip()
        if s.startswith("**") and s.endswith("**") and len(s) > 4:
            s = s[2:-2]
    return s


def _split_keywords(value: Any) -> list[str]:
    items = value if isinstance(value, (list, tuple)) else _KEYWORD_SPLIT.split(str(value or ""))
    out: list[str] = []
    for item in items:
        kw = _clean_field(str(item))
        if kw and kw not in out:
            out.append(kw)
    return out


def _valid_name(name: str) -> bool:
    return bool(name) and len(name) <= _MAX_NAME_CHARS and any(ch.isalnum() for ch in name)


def _entity_from_fields(fields: list[str]) -> ExtractedEntity | None:
    if not fields or not _valid_name(fields[0]):
        return None
    name, rest = fields[0], fields[1:]
    etype = rest[0] if rest else ""
    rest = rest[1:]
    weight = DEFAULT_WEIGHT
    if len(rest) >= 2 and (w := parse_strength(rest[-1])) is not None:
        weight, rest = w, rest[:-1]
    return ExtractedEntity(name=name, type=etype, description=" ".join(r for r in rest if r), weight=weight)


def _relation_from_fields(fields: list[str]) -> ExtractedRelation | None:
    if len(fields) < 2 or not _valid_name(fields[0]) or not _valid_name(fields[1]):
        return None
    rest = fields[2:]
    weight = DEFAULT_WEIGHT
    if rest and (w := parse_strength(rest[-1])) is not None:
        weight, rest = w, rest[:-1]
    keywords: list[str] = []
    if len(rest) >= 2:  # the light format: DESCRIPTION, KEYWORDS
        keywords, rest = _split_keywords(rest[-1]), rest[:-1]
    return ExtractedRelation(source=fields[0], target=fields[1], description=" ".join(r for r in rest if r),
                             keywords=keywords, weight=weight)


def _untagged(fields: list[str]) -> ExtractedEntity | ExtractedRelation | None:
    """A record whose tag is missing: guess the kind by its shape."""
    if len(fields) == 3 and parse_strength(fields[2]) is None:
        return _entity_from_fields(fields)
    if len(fields) in (4, 5) and parse_strength(fields[-1]) is not None:
        return _relation_from_fields(fields)
    return None


class _Parser:
    def __init__(self, tuple_delim: str, record_delim: str, completion: str) -> None:
        self.record_delim = record_delim
        custom = re.escape(tuple_delim) + "|" if tuple_delim and tuple_delim != "<|>" else ""
        self.angle_split = re.compile(custom + _ANGLE_DELIM)
        tags = "|".join(re.escape(t) for t in _ALL_TAGS)
        self.start = re.compile(
            rf"(?<![\w<|])(?P<open>[(（\[])?[ \t]*[{_QUOTES}*]*(?P<tag>{tags})[{_QUOTES}*]*[ \t]*"
            rf"(?P<delim>{custom}{_ANGLE_DELIM}|\|+|\t|(?<=[\"'”])\s*,)",
            re.IGNORECASE)
        self.completion = re.compile(
            (re.escape(completion) + "|" if completion else "")
            + r"<\s*\|?\s*complete\s*\|?\s*>|\|complete\|" + r"|^[ \t]*complete[ \t]*$",
            re.IGNORECASE | re.MULTILINE)
        self.loose_delim = re.compile(custom + _ANGLE_DELIM + r"|\||\t")
        self.out = ParsedOutput()
        self._seen: set[tuple[str, ...]] = set()

    # -- helpers ---------------------------------------------------------------------------------
    def _add(self, rec: ExtractedEntity | ExtractedRelation | None) -> bool:
        if rec is None:
            self.out.dropped += 1
            return False
        if isinstance(rec, ExtractedEntity):
            sig = ("e", rec.name, rec.type, rec.description)
        else:
            sig = ("r", rec.source, rec.target, rec.description, ",".join(rec.keywords), str(rec.weight))
        if sig not in self._seen:
            self._seen.add(sig)
            if isinstance(rec, ExtractedEntity):
                self.out.entities.append(rec)
            else:
                self.out.relations.append(rec)
        return True

    def _split(self, body: str, delim: str) -> list[str]:
        d = delim.strip() if delim.strip() else delim
        if d.endswith(",") and not d.strip(","):
            try:
                row = next(csv.reader([body.lstrip(" ,")], skipinitialspace=True))
            except (csv.Error, StopIteration):
                row = body.split(",")
            fields = [_clean_field(x) for x in row]
        elif "<" in d or ">" in d or (d not in ("|", "||", "\t") and set(d) != {"|"}):
            fields = [_clean_field(x) for x in self.angle_split.split(body)]
        elif d == "\t":
            fields = [_clean_field(x) for x in body.split("\t")]
        else:
            fields = [_clean_field(x) for x in re.split(r"\|+", body)]
        if fields and not fields[0]:
            fields = fields[1:]  # the body starts with the delimiter that followed the tag
        while fields and not fields[-1]:
            fields.pop()
        return fields

    @staticmethod
    def _close(body: str, opener: str) -> int:
        """Where the record's text ends within body: at the bracket closing ``opener``, else at the
        end of the line."""
        if opener:
            opens = "[" if opener == "[" else "(（"
            depth = 0
            for m in (_SQUARE if opener == "[" else _ROUND).finditer(body):  # only the brackets
                if m.group() in opens:
                    depth += 1
                elif depth == 0:
                    return m.start()
                else:
                    depth -= 1
        nl = body.find("\n")
        return len(body) if nl < 0 else nl

    def _loose(self, text: str) -> None:
        """Text outside tagged records: prose is ignored, delimiter-bearing lines are tried as
        untagged records and counted as dropped when that fails."""
        parts = text.split(self.record_delim) if self.record_delim else [text]
        for part in parts:
            for line in part.split("\n"):
                if not self.loose_delim.search(line):
                    continue
                s = line.strip().lstrip("-*•0123456789. ").strip()
                if s[:1] in "(（[" and s[-1:] in ")）]":
                    s = s[1:-1]
                delim_m = self.loose_delim.search(s)
                if delim_m is None:
                    continue
                fields = self._split(s, delim_m.group(0))
                if not fields:
                    continue
                self._add(_untagged(fields))

    # -- entry -----------------------------------------------------------------------------------
    def tuples(self, text: str) -> None:
        matches = list(self.start.finditer(text))
        pos = 0
        for i, m in enumerate(matches):
            if m.start() < pos:
                continue  # inside the previous record (a tag word within its description)
            self._loose(text[pos:m.start()])
            end = matches[i + 1].start() if i + 1 < len(matches) else len(text)
            body = text[m.end():end]
            consumed = len(body)
            if self.record_delim and (cut := body.find(self.record_delim)) >= 0:
                body, consumed = body[:cut], cut + len(self.record_delim)
            close = self._close(body, m.group("open") or "")
            rest = body[close:].lstrip(")）] \t")
            body = body[:close]
            if not m.group("open") and body.rstrip().endswith(")") and body.count(")") > body.count("("):
                body = body.rstrip()[:-1]
            self._loose(rest)
            pos = m.end() + consumed
            tag = m.group("tag").lower()
            fields = self._split(m.group("delim") + body, m.group("delim"))
            if tag in _IGNORED_TAGS:
                continue
            if tag in _ENTITY_TAGS:
                self._add(_entity_from_fields(fields))
            else:
                self._add(_relation_from_fields(fields))
        self._loose(text[pos:])

    def json_records(self, obj: Any) -> int:
        """Records from parsed JSON; returns how many were accepted."""
        before = len(self.out.entities) + len(self.out.relations)
        self._json(obj, depth=0)
        return len(self.out.entities) + len(self.out.relations) - before

    def _json(self, obj: Any, depth: int) -> None:
        if depth > 4:
            return
        if isinstance(obj, dict):
            lower = {str(k).lower(): v for k, v in obj.items()}
            lists = False
            for key, value in lower.items():
                if not isinstance(value, (list, dict)):
                    continue  # {"relation": "nephew of"} is a field, not a list of relations
                if key in _ENTITY_TAGS or key in ("named_entities", "entity_list"):
                    lists = True
                    for item in value if isinstance(value, list) else [value]:
                        self._add(_json_entity(item))
                elif key in _RELATION_TAGS or key in ("relation_list", "links", "triples"):
                    lists = True
                    for item in value if isinstance(value, list) else [value]:
                        self._add(_json_relation(item))
            if lists:
                return
            kind = _json_kind(lower)
            if kind == "relation":
                self._add(_json_relation(obj))
            elif kind == "entity":
                self._add(_json_entity(obj))
            else:
                for value in lower.values():
                    if isinstance(value, (dict, list)):
                        self._json(value, depth + 1)
        elif isinstance(obj, list):
            for item in obj:
                if isinstance(item, (list, tuple)) and item and all(isinstance(x, (str, int, float)) for x in item):
                    fields = [_clean_field(str(x)) for x in item]
                    tag = fields[0].lower()
                    if tag in _ENTITY_TAGS:
                        self._add(_entity_from_fields(fields[1:]))
                    elif tag in _RELATION_TAGS:
                        self._add(_relation_from_fields(fields[1:]))
                    elif tag not in _IGNORED_TAGS:
                        self._add(_untagged(fields))
                else:
                    self._json(item, depth + 1)


# --- JSON ----------------------------------------------------------------------------------------

_J_NAME = ("entity_name", "name", "entity", "title", "label", "id", "text")
_J_TYPE = ("entity_type", "type", "category", "label", "kind")
_J_DESC = ("description", "entity_description", "relationship_description", "desc", "summary", "definition")
_J_SRC = ("source", "src", "source_entity", "src_id", "source_name", "from", "head", "subject", "entity1")
_J_TGT = ("target", "tgt", "target_entity", "tgt_id", "target_name", "to", "tail", "object", "entity2")
_J_KW = ("keywords", "relationship_keywords", "keys", "tags")
_J_WEIGHT = ("weight", "strength", "relationship_strength", "score", "confidence")
_J_REL_LABEL = ("relation", "relationship", "predicate", "type", "label")


def _pick(d: dict[str, Any], names: tuple[str, ...], skip: str | None = None) -> tuple[str | None, Any]:
    for n in names:
        if n != skip and n in d and d[n] not in (None, "", []):
            return n, d[n]
    return None, None


def _json_kind(lower: dict[str, Any]) -> str | None:
    if _pick(lower, _J_SRC)[0] and _pick(lower, _J_TGT)[0]:
        return "relation"
    if _pick(lower, _J_NAME)[0]:
        return "entity"
    return None


def _text(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return " ".join(_text(v) for v in value)
    return _clean_field(str(value)) if value is not None else ""


def _json_entity(item: Any) -> ExtractedEntity | None:
    if isinstance(item, str):
        name = _clean_field(item)
        return ExtractedEntity(name=name, type="", description="") if _valid_name(name) else None
    if not isinstance(item, dict):
        return None
    d = {str(k).lower(): v for k, v in item.items()}
    name_key, name = _pick(d, _J_NAME)
    if name_key is None:
        return None
    _, etype = _pick(d, _J_TYPE, skip=name_key)
    _, desc = _pick(d, _J_DESC)
    fields = [_text(name), _text(etype), _text(desc)]
    ent = _entity_from_fields(fields)
    _, w = _pick(d, _J_WEIGHT)
    if ent is not None and w is not None:
        ent.weight = parse_strength(str(w)) or DEFAULT_WEIGHT
    return ent


def _json_relation(item: Any) -> ExtractedRelation | None:
    if not isinstance(item, dict):
        return None
    d = {str(k).lower(): v for k, v in item.items()}
    _, src = _pick(d, _J_SRC)
    _, tgt = _pick(d, _J_TGT)
    _, desc = _pick(d, _J_DESC)
    if desc is None:
        _, desc = _pick(d, _J_REL_LABEL)
    _, kws = _pick(d, _J_KW)
    _, w = _pick(d, _J_WEIGHT)
    src_t, tgt_t = _text(src), _text(tgt)
    if not _valid_name(src_t) or not _valid_name(tgt_t):
        return None
    return ExtractedRelation(source=src_t, target=tgt_t, description=_text(desc), keywords=_split_keywords(kws),
                             weight=(parse_strength(str(w)) or DEFAULT_WEIGHT) if w is not None else DEFAULT_WEIGHT)


def json_values(text: str, openers: str = "[{") -> list[Any]:
    """Every JSON value that starts at one of ``openers`` somewhere in ``text`` and parses, in order
    (for model answers that wrap JSON in prose or fences)."""
    decoder = json.JSONDecoder()
    found: list[Any] = []
    for match in re.finditer(f"[{re.escape(openers)}]", text):
        try:
            value, _ = decoder.raw_decode(text, match.start())
        except ValueError:
            continue
        found.append(value)
    return found


def load_json_lenient(text: str) -> Any:
    """The first JSON value in text (fences, prose, trailing commas and Python-style quoting
    tolerated), or None."""
    s = _FENCE.sub("", strip_reasoning(text)).strip()
    starts = [i for i in (s.find("{"), s.find("[")) if i >= 0]
    if not starts:
        return None
    begin = min(starts)
    closer = "}" if s[begin] == "{" else "]"
    end = s.rfind(closer)
    if end <= begin:
        return None
    candidate = s[begin:end + 1]
    for attempt in (candidate, re.sub(r",\s*([\]}])", r"\1", candidate)):
        try:
            return json.loads(attempt)
        except (ValueError, RecursionError):
            pass
        try:
            return ast.literal_eval(attempt)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            pass
    return None


def strip_reasoning(text: str) -> str:
    s = _THINK_BLOCK.sub("", text or "")
    s = _THINK_CLOSE.sub("", s)  # a closing tag without its opening: everything before was thinking
    return _THINK_OPEN.sub("", s)


# --- answers written exactly as asked ------------------------------------------------------------
#
# Most answers follow the prompt to the letter. For those the general reader's record-start search
# (a lenient pattern tried at every character) is most of the parsing time, and it finds nothing a
# plain split would not: the fast path below reads such answers directly and gives the same
# ParsedOutput, and it declines, passing the answer to the general reader, as soon as anything could
# read differently there (brackets, angle brackets, pipes, tabs, braces, hashes, backticks or a
# record tag inside a field; prose or a completion marker between records; another format).

_CANONICAL_START = {'("entity"<|>': "entity", '("relationship"<|>': "relationship"}
# characters that can change how the general reader splits or ends a record
_UNSAFE_IN_FIELD = re.compile(r"[()（）\[\]<>|\t#{}`\r\n\u017f\u0130\u0131]")
_TAG_BEFORE = re.compile(r"\w")
_QUOTES_STARS_SPACE = _QUOTES + "* \t"


def _tag_could_start_a_record(field_text: str) -> bool:
    """Whether a record tag inside the fields could look, to the general reader, like the start of
    a record: a tag word not joined to a word before it, followed (past quotes, stars and spaces)
    by a comma, a delimiter or the end."""
    low = field_text.lower()
    for tag in _ALL_TAGS:
        at = low.find(tag)
        while at >= 0:
            if at == 0 or not _TAG_BEFORE.match(low[at - 1]):
                rest = low[at + len(tag):].lstrip(_QUOTES_STARS_SPACE)
                if not rest or rest[0] in ",<|>":
                    return True
            at = low.find(tag, at + 1)
    return False


def _parse_canonical(text: str) -> ParsedOutput | None:
    """The records of an answer in exactly the requested format with the default delimiters, or
    None when the general reader could read it differently."""
    body = text.strip()
    complete = body.endswith("<|COMPLETE|>")
    if complete:
        body = body[:-len("<|COMPLETE|>")]
    parser = _Parser("<|>", "##", "<|COMPLETE|>")
    for piece in body.split("##"):
        record = piece.strip()
        if not record:
            continue
        tag = next((t for opener, t in _CANONICAL_START.items() if record.startswith(opener)), None)
        if tag is None or not record.endswith(")"):
            return None
        inner = record[len(tag) + 6:-1]
        if _UNSAFE_IN_FIELD.search(inner.replace("<|>", "")) or _tag_could_start_a_record(inner):
            return None
        fields = [_clean_field(x) for x in inner.split("<|>")]
        while fields and not fields[-1]:
            fields.pop()
        parser._add(_entity_from_fields(fields) if tag == "entity" else _relation_from_fields(fields))
    if parser.out.empty and not parser.out.dropped:
        return None
    parser.out.complete = complete
    return parser.out


def parse_records(text: str, tuple_delim: str = "<|>", record_delim: str = "##",
                  completion: str = "<|COMPLETE|>") -> ParsedOutput:
    """Entities and relations from an LLM answer; never raises (see the module doc)."""
    if (tuple_delim, record_delim, completion) == ("<|>", "##", "<|COMPLETE|>") and text:
        canonical = _parse_canonical(text)
        if canonical is not None:
            return canonical
    return _parse_general(text, tuple_delim, record_delim, completion)


def _parse_general(text: str, tuple_delim: str, record_delim: str, completion: str) -> ParsedOutput:
    parser = _Parser(tuple_delim, record_delim, completion)
    try:
        s = strip_reasoning((text or "").replace("\r\n", "\n").replace("\r", "\n"))
        s = _FENCE.sub("", s)
        s, n_complete = parser.completion.subn("\n", s)
        parser.out.complete = n_complete > 0
        head = s.lstrip()
        if (head[:1] in "[{" and "<|" not in head[:200]) or (
                ("{" in s or "[" in s) and "<|" not in s and "|>" not in s):
            obj = load_json_lenient(head)
            if obj is not None and parser.json_records(obj) > 0:
                return parser.out
        parser.tuples(s)
        if parser.out.empty and ("{" in s or "[" in s):
            obj = load_json_lenient(s)
            if obj is not None and parser.json_records(obj) > 0:
                parser.out.dropped = 0
    except Exception:  # noqa: BLE001 - a parser bug must cost one answer, never the chunk's task
        parser.out.dropped += 1
    return parser.out
