"""Reading entity/relation records out of whatever an LLM actually answered.

The prompts ask for GraphRAG-style records, ``("entity"<|>NAME<|>TYPE<|>DESCRIPTION)`` and
``("relationship"<|>SRC<|>TGT<|>DESCRIPTION[<|>KEYWORDS]<|>STRENGTH)``, separated by ``##`` and
ended by ``<|COMPLETE|>``. Real models (small local ones above all) bend every part of that, and a
chunk whose answer cannot be read is a hole in the graph, so the parser accepts anything it can make
sense of: reasoning blocks, code fences, prose around the records, other delimiters, records on
separate lines, wrong-case or missing tags, quotes, missing parentheses, strengths written as words or
fractions, and JSON instead of records. It never raises; records it cannot read are counted in
``dropped``. Types and names are only cleaned here; ``finalize.finalize`` applies the graph's rules.
One record's fields are read in record_fields.py, JSON answers in json_records.py.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass, field
from typing import Any

from kbgraph.graph.extract.answer_json import _FENCE, load_json_lenient, strip_reasoning
from kbgraph.graph.extract.base import ExtractedEntity, ExtractedRelation
from kbgraph.graph.extract.json_records import walk_json
from kbgraph.graph.extract.record_fields import (
    _ALL_TAGS, _ENTITY_TAGS, _IGNORED_TAGS, _QUOTES, _clean_field, _entity_from_fields, _relation_from_fields,
    _untagged,
)

_ANGLE_DELIM = r"<\s*\|[^<>\n]{0,4}?\|?\s*>|<\|+|\|+>"  # <|>, <||>, <|#|>, and the broken halves <| and |>
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
        walk_json(obj, self._add)
        return len(self.out.entities) + len(self.out.relations) - before


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
