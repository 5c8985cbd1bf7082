"""PDF: the text layer page by page (pypdf), each page a page of the document; encrypted, corrupt
and scanned (no text layer) files are ParseErrors."""

from __future__ import annotations

import io

from kbgraph.parse.readers.document import ParseError
from kbgraph.parse.readers.text import _tidy


def _read_pdf(name: str, data: bytes) -> tuple[str, list[tuple[int, int]]]:
    import logging

    from pypdf import PdfReader
    from pypdf.errors import FileNotDecryptedError, PdfReadError

    # pypdf logs every repair it attempts on damaged files; the ParseError says what matters.
    logging.getLogger("pypdf").setLevel(logging.ERROR)
    if b"%PDF" not in data[:1024]:
        raise ParseError(name, "not a PDF file (no %PDF header); the file is corrupt or mislabelled")
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            try:
                if not reader.decrypt(""):
                    raise ParseError(name, "the PDF is encrypted and needs a password")
            except (FileNotDecryptedError, NotImplementedError) as exc:
                raise ParseError(name, f"the PDF is encrypted and cannot be opened ({exc})") from exc
        parts: list[str] = []
        pages: list[tuple[int, int]] = []
        offset = 0
        for number, page in enumerate(reader.pages, start=1):
            page_text = _tidy(page.extract_text() or "")
            if parts:
                offset += 2  # the "\n\n" joining pages
            pages.append((offset, number))
            parts.append(page_text)
            offset += len(page_text)
    except ParseError:
        raise
    except (PdfReadError, FileNotDecryptedError) as exc:
        raise ParseError(name, f"corrupt or unreadable PDF ({exc})") from exc
    except Exception as exc:  # pypdf raises many kinds (KeyError, ValueError...) on damaged files
        raise ParseError(name, f"corrupt or unreadable PDF ({type(exc).__name__}: {exc})") from exc
    if not any(part.strip() for part in parts):
        raise ParseError(name, "the PDF has no text layer; scanned PDFs need OCR, which kbgraph does not do")
    text = "\n\n".join(parts)
    # Leading empty pages would make read_bytes' strip() shift offsets; keep them exact instead.
    lead = len(text) - len(text.lstrip())
    pages = [(max(0, start - lead), number) for start, number in pages]
    return text.strip(), pages
