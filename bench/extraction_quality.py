"""Entity extraction quality of the offline ``nlp`` extractor against hand-checked mentions.

    python bench/extraction_quality.py [GOLD ...] [--split dev|heldout] [--json] [--errors N] [--entity-types a,b,c]

GOLD is a .jsonl file or a folder of them (default: bench/data/extraction-gold/). One line per
text: ``{doc_id, lang, kind, source, text, entities: [{surface, type, start, end, canonical}]}``
(see that folder's README.md for the type set and the marking rules). Every text carries ``split``:
``dev`` (the texts whose errors are read while the extractor is worked on) or ``heldout`` (only its
figures are read: ``--split heldout``, which lists no errors unless ``--errors N`` asks); ``--split``
scores one part, and over all texts the error lists are the development texts' only. Every text is
given to the extractor alone, as one chunk, exactly as written (``build_extractor("nlp", ...)``). Figures per
language and per (language, kind), over the texts' distinct names (a name counted once per text):

- precision: the extractor's entities whose key (``normalize_key``) is the key of a gold surface or
  of a gold canonical name in that text, over all its entities;
- recall: gold surfaces found, over all gold surfaces (distinct per text). A surface is found
  when the extractor lists it, or when the extractor reads that mention as another gold name of the
  same entity (an alias folded into its full name: "Bob" read as "Bob Cratchit"; any name the set's
  gold gives that entity: 亚冠 read as 亚冠联赛, where the canonical name is 亚足联冠军联赛). With a
  linker (``--kb-links``) an entity read as another name of a gold entity of its text is no false
  positive either;
- recall by gold type, and type agreement: of the found surfaces of gold type person /
  organization / location / event, the share the extractor typed person / organization / geo /
  event (the knowledge base's default types);
- alias linking: of the gold mentions whose surface is not their canonical name (a first name, a
  short form, an abbreviation), the share the extractor maps to the canonical name's key. ``in-text``
  counts the aliases whose canonical name is written in the same text, ``cross-text`` those whose
  canonical name appears only in other texts of the set (a per-chunk extractor cannot link those;
  a knowledge-base-level linker can be measured by passing ``resolve`` to ``evaluate``). With
  ``--kb-links`` each (language, kind) group is read as one knowledge base and its name links
  (``kbgraph.graph.derive.aliases.name_links``: a first name or short form only one full name of
  the knowledge base can stand for, what the refresh links) resolve the extracted keys.

Which key a mention is read as comes from the nlp extractor's own name finder
(``kbgraph.graph.extract.nlp.detect.find_names``: every occurrence's offset and key, after short
names are merged into the longer name they stand for). If that function is gone or changed, the
script falls back to the entity list alone (a mention counts as read as its canonical name when the
canonical name is listed and the alias is not) and says so in the output (``mention_map``).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
if str(HERE.parent) not in sys.path:
    sys.path.insert(0, str(HERE.parent))

from kbgraph.graph.extract.base import DEFAULT_ENTITY_TYPES  # noqa: E402
from kbgraph.graph.extract.factory import build_extractor  # noqa: E402
from kbgraph.graph.keys import normalize_key  # noqa: E402

DEFAULT_GOLD = HERE / "data" / "extraction-gold"
GOLD_TO_KB_TYPE = {"person": "person", "organization": "organization", "location": "geo", "event": "event"}
TARGETS = {"precision": 0.85, "recall": 0.70}


def load_gold(paths: Iterable[Path]) -> list[dict[str, Any]]:
    files: list[Path] = []
    for p in paths:
        files += sorted(p.glob("*.jsonl")) if p.is_dir() else [p]
    rows = []
    for f in files:
        for line in f.read_text(encoding="utf-8").splitlines():
            if line.strip():
                rows.append(json.loads(line))
    return rows


def _key(name: str) -> str:
    return normalize_key(" ".join(name.split()))


def _mention_keys(text: str) -> Callable[[int, int], str | None] | None:
    """A function from a gold mention's span to the key the nlp name finder read there, or None when
    the finder's occurrences cannot be had (the script then uses the entity list alone)."""
    try:
        from kbgraph.graph.extract.nlp.detect import find_names
        _, _, occurrences, keep = find_names(text)
        starts = sorted((int(off), str(key)) for _, off, key in occurrences if key in keep)
    except Exception:  # noqa: BLE001 - an internal API may change; the bench must still run
        return None

    def at(start: int, end: int) -> str | None:
        for off, key in starts:
            if start <= off < end:
                return key
        return None
    return at


def evaluate(rows: list[dict[str, Any]], entity_types: list[str] | None = None,
             resolve: Callable[[str, dict[str, Any]], str] | None = None) -> dict[str, Any]:
    """Run the nlp extractor over the gold rows and score it. ``resolve(key, row)`` may map an
    extracted key to another (a knowledge-base-level alias linker); default: none."""
    extractor = build_extractor("nlp", None, entity_types=entity_types or list(DEFAULT_ENTITY_TYPES))
    resolve = resolve or (lambda key, row: key)
    # canonical names written anywhere in each (lang, source set) group: cross-text aliases
    written: dict[tuple[str, str], set[str]] = defaultdict(set)
    # every name of each gold entity in a group: a linker that reads a name as another of the same
    # entity (亚冠 as 亚冠联赛, where the gold's canonical is 亚足联冠军联赛) is not wrong
    names: dict[tuple[str, str], dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for row in rows:
        for m in row["entities"]:
            written[(row["lang"], row["kind"])].add(_key(m["surface"]))
            names[(row["lang"], row["kind"])][_key(m["canonical"])] |= {_key(m["surface"]), _key(m["canonical"])}
    per_doc = []
    mention_map = True
    for row in rows:
        text = row["text"]
        out = extractor.extract(text)
        extracted = {}
        raw_of: dict[str, set[str]] = defaultdict(set)
        for e in out.entities:
            extracted.setdefault(resolve(_key(e.name), row), e.type)
            raw_of[resolve(_key(e.name), row)].add(_key(e.name))
        at = _mention_keys(text)
        mention_map = mention_map and at is not None
        gold_keys = {_key(m["surface"]) for m in row["entities"]} | {_key(m["canonical"]) for m in row["entities"]}
        surfaces: dict[str, dict[str, Any]] = {}
        aliases = []
        for m in row["entities"]:
            sk, ck = _key(m["surface"]), _key(m["canonical"])
            read = at(m["start"], m["end"]) if at else None
            read = resolve(read, row) if read else None
            if at is None:  # fallback: the entity list alone
                read = ck if (ck in extracted and sk not in extracted) else (sk if sk in extracted else None)
            found = sk in extracted or (read is not None and read in extracted
                                        and (read in (sk, ck) or read in names[(row["lang"], row["kind"])][ck]))
            s = surfaces.setdefault(sk, {"surface": " ".join(m["surface"].split()), "type": m["type"],
                                         "found": False, "kb_type": None})
            if found and not s["found"]:
                s["found"] = True
                s["kb_type"] = extracted.get(sk) or extracted.get(read or "")
            if sk != ck:
                in_text = ck in {_key(x["surface"]) for x in row["entities"]}
                aliases.append({"surface": s["surface"], "canonical": m["canonical"], "in_text": in_text,
                                "linked": read == ck and ck in extracted, "read_as": read})
        canon_of = {_key(m["surface"]): _key(m["canonical"]) for m in row["entities"]}
        canon_of.update({_key(m["canonical"]): _key(m["canonical"]) for m in row["entities"]})
        group_names = names[(row["lang"], row["kind"])]

        def same_entity(key: str) -> bool:  # a gold name of this text, linked to another name of it
            return any(raw in canon_of and key in group_names[canon_of[raw]] for raw in raw_of[key])

        false_pos = sorted(k for k in extracted if k not in gold_keys and not same_entity(k))
        per_doc.append({"doc_id": row["doc_id"], "lang": row["lang"], "kind": row["kind"],
                        "extracted": len(extracted), "true_pos": len(extracted) - len(false_pos),
                        "false_pos": false_pos, "surfaces": list(surfaces.values()), "aliases": aliases,
                        "extracted_types": extracted})
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for d in per_doc:
        groups[d["lang"]].append(d)
        groups[f"{d['lang']}/{d['kind']}"].append(d)
    return {"mention_map": mention_map, "entity_types": entity_types or list(DEFAULT_ENTITY_TYPES),
            "groups": {name: _score(docs) for name, docs in sorted(groups.items())}, "docs": per_doc}


def kb_name_links(rows: list[dict[str, Any]], entity_types: list[str] | None = None
                  ) -> Callable[[str, dict[str, Any]], str]:
    """A resolver that maps each extracted key through the name links of its (language, kind) group,
    read as one knowledge base of the group's texts (``aliases.kb_name_links``, what the refresh links)."""
    from kbgraph.graph.derive.aliases import kb_name_links as links_of
    from kbgraph.graph.extract.nlp.types import kind_types

    types = entity_types or list(DEFAULT_ENTITY_TYPES)
    kinds = kind_types(types)
    extractor = build_extractor("nlp", None, entity_types=types)
    typed: dict[tuple[str, str], dict[str, Counter[str]]] = defaultdict(lambda: defaultdict(Counter))
    for row in rows:
        group = (row["lang"], row["kind"])
        for e in extractor.extract(row["text"]).entities:
            typed[group][_key(e.name)][e.type] += 1
    links = {group: links_of(by_key, kinds["person"], kinds["geo"]) for group, by_key in typed.items()}
    return lambda key, row: links.get((row["lang"], row["kind"]), {}).get(key, key)


def _ratio(a: int, b: int) -> float | None:
    return round(a / b, 4) if b else None


def _score(docs: list[dict[str, Any]]) -> dict[str, Any]:
    extracted = sum(d["extracted"] for d in docs)
    tp = sum(d["true_pos"] for d in docs)
    surfaces = [s for d in docs for s in d["surfaces"]]
    found = [s for s in surfaces if s["found"]]
    by_type: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for s in surfaces:
        by_type[s["type"]][1] += 1
        by_type[s["type"]][0] += s["found"]
    typed = [s for s in found if s["type"] in GOLD_TO_KB_TYPE]
    agree = sum(1 for s in typed if s["kb_type"] == GOLD_TO_KB_TYPE[s["type"]])
    aliases = [a for d in docs for a in d["aliases"]]
    in_text = [a for a in aliases if a["in_text"]]
    cross = [a for a in aliases if not a["in_text"]]
    fp = Counter(k for d in docs for k in d["false_pos"])
    fn = Counter(s["surface"] for s in surfaces if not s["found"])
    return {
        "texts": len(docs), "gold_surfaces": len(surfaces), "extracted": extracted,
        "precision": _ratio(tp, extracted), "recall": _ratio(len(found), len(surfaces)),
        "recall_by_type": {t: _ratio(f, n) for t, (f, n) in sorted(by_type.items())},
        "gold_by_type": {t: n for t, (_, n) in sorted(by_type.items())},
        "type_agreement": _ratio(agree, len(typed)),
        "alias_mentions": len(aliases), "alias_linking": _ratio(sum(a["linked"] for a in aliases), len(aliases)),
        "alias_in_text": len(in_text), "alias_linking_in_text": _ratio(sum(a["linked"] for a in in_text), len(in_text)),
        "alias_cross_text": len(cross), "alias_linking_cross_text": _ratio(sum(a["linked"] for a in cross), len(cross)),
        "top_false_positives": fp.most_common(25), "top_missed": fn.most_common(25),
        "extracted_types": dict(Counter(t for d in docs for t in d["extracted_types"].values())),
    }


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def print_table(result: dict[str, Any], errors: int) -> None:
    print(f"nlp extractor, entity types {','.join(result['entity_types'])}{result.get('split_note', '')}"
          f"{'' if result['mention_map'] else ' (mention map unavailable: entity-list fallback)'}")
    print(f"targets: precision >= {TARGETS['precision']}, recall >= {TARGETS['recall']} per language\n")
    print("| group | texts | gold names | extracted | precision | recall | type agreement | alias linking (in-text / cross-text) |")
    print("|---|---|---|---|---|---|---|---|")
    for name, g in result["groups"].items():
        print(f"| {name} | {g['texts']} | {g['gold_surfaces']} | {g['extracted']} | {_fmt(g['precision'])} | "
              f"{_fmt(g['recall'])} | {_fmt(g['type_agreement'])} | {_fmt(g['alias_linking'])} of {g['alias_mentions']} "
              f"({_fmt(g['alias_linking_in_text'])} of {g['alias_in_text']} / {_fmt(g['alias_linking_cross_text'])} "
              f"of {g['alias_cross_text']}) |")
    print("\nrecall by gold type (found / gold names):")
    for name, g in result["groups"].items():
        if "/" in name:
            continue
        parts = [f"{t} {_fmt(r)} of {g['gold_by_type'][t]}" for t, r in g["recall_by_type"].items()]
        print(f"  {name}: " + ", ".join(parts))
        print(f"  {name} extracted types: " + ", ".join(f"{t} {n}" for t, n in sorted(g["extracted_types"].items())))
    if errors:
        for name, g in result["groups"].items():
            if "/" not in name:
                continue
            print(f"\n{name}: most frequent false positives{result.get('errors_note', '')}: "
                  + ", ".join(f"{k} ({n})" for k, n in g["top_false_positives"][:errors]))
            print(f"{name}: most frequent missed names: " + ", ".join(f"{k} ({n})" for k, n in g["top_missed"][:errors]))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("gold", nargs="*", type=Path, help="gold .jsonl files or folders (default: %(default)s)",
                    default=[DEFAULT_GOLD])
    ap.add_argument("--json", action="store_true", help="print the figures as JSON (per group; --docs adds texts)")
    ap.add_argument("--docs", action="store_true", help="with --json: include every text's details")
    ap.add_argument("--errors", type=int, default=None,
                    help="list the N most frequent errors per group (0: none; default 10, and 0 with --split "
                         "heldout); without --split they are the development texts' errors only")
    ap.add_argument("--entity-types", default=None,
                    help="the knowledge base's entity types, comma-separated (default: the kb default)")
    ap.add_argument("--limit", type=int, default=0, help="only the first N texts of each file set")
    ap.add_argument("--kb-links", action="store_true",
                    help="resolve keys through the name links of each (language, kind) group read as one KB")
    ap.add_argument("--split", choices=("dev", "heldout"), default=None,
                    help="score only the development or the held-out texts (default: all)")
    args = ap.parse_args(argv)
    rows = load_gold(args.gold)
    if args.split:
        rows = [r for r in rows if r.get("split", "dev") == args.split]
    if args.limit:
        rows = rows[: args.limit]
    types = [t.strip() for t in args.entity_types.split(",")] if args.entity_types else None
    result = evaluate(rows, types, kb_name_links(rows, types) if args.kb_links else None)
    if args.kb_links:
        result["split_note"] = ", keys resolved through each group's name links"
    if args.split:
        result["split_note"] = result.get("split_note", "") + f", {args.split} texts only"
    errors = args.errors if args.errors is not None else (0 if args.split == "heldout" else 10)
    if not args.split and errors:
        _dev_errors(result, rows, types)
    if args.json:
        if not args.docs:
            result = {k: v for k, v in result.items() if k != "docs"}
        json.dump(result, sys.stdout, ensure_ascii=False, indent=1)
        print()
    else:
        print_table(result, errors)
    return 0


def _dev_errors(result: dict[str, Any], rows: list[dict[str, Any]], types: list[str] | None) -> None:
    """Over all texts, the error lists are the development texts' only: the held-out texts' errors
    are not to be read while the extractor is worked on (their figures are the check)."""
    dev = evaluate([r for r in rows if r.get("split", "dev") == "dev"], types)
    for name, group in result["groups"].items():
        other = dev["groups"].get(name, {})
        group["top_false_positives"] = other.get("top_false_positives", [])
        group["top_missed"] = other.get("top_missed", [])
    result["errors_note"] = " (errors: development texts only)"


if __name__ == "__main__":
    raise SystemExit(main())
