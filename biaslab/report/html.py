"""The one-page HTML report (stage ``report``: ``plots/report/index.html``): ``tables.md``
rendered to HTML with the report's figures placed where a reader needs them, the answer
first.

Layout: the "At a glance" section (each mitigation against Original), then the forest plot
(every mitigation's difference from Original with its CI), then the rest of ``tables.md``
with each table's figure after it. The page declares its charset (UTF-8: the report is full of
±, Δ, →, †, −), needs no script and no network (the figures are files beside it, referenced
by name), and carries a small stylesheet so that wide tables scroll instead of spilling.

Markdown is rendered by markdown-it-py (CommonMark with GitHub's tables), not by our code.
"""
from __future__ import annotations

import html
import re
from collections.abc import Sequence

#: figure file -> (the heading prefix of the section it follows, its caption)
FIGURES = {
    "forest.png": ("## At a glance", "Each mitigation's difference from Original per headline "
                                     "metric, mean over seeds with its 95 % CI; the line is "
                                     "no change."),
    "table1.png": ("## Table 1", "Table 1 as bars: mean over seeds with 95 % CI."),
    "table2.png": ("## Table 2", "Table 2 as bars: mean over seeds with 95 % CI."),
    "table3.png": ("## Table 3", "Table 3 as bars: mean over seeds with 95 % CI."),
    "sensitivity.png": ("### Table 1, feature sensitivity",
                        "Bias score (x, mean over seeds, 95 % CI) against its change when only "
                        "the non-person features change (y, 95 % CI), one point per model."),
    "sensitivity_captioner.png": ("### Table 2, feature sensitivity",
                                  "The same for the captioners' Table 2 bias scores."),
    "probe.png": ("## Causal probe", "Probe sensitivities: mean over seeds with 95 % CI."),
}

STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif;
       max-width: 1200px; margin: 1.5em auto; padding: 0 1em; line-height: 1.45; color: #222; }
table { border-collapse: collapse; display: block; overflow-x: auto; margin: 0.8em 0;
        font-size: 0.88em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.5em; white-space: nowrap; }
th { background: #f3f3f3; }
figure { margin: 1em 0; }
figure img { max-width: 100%; height: auto; border: 1px solid #ddd; }
figcaption { font-size: 0.9em; color: #555; }
code { background: #f5f5f5; padding: 0 0.2em; }
"""


def _sections(md: str) -> list[tuple[str, str]]:
    """``md`` cut at its level-2 headings: ``[(heading line or "", text), ...]`` in order."""
    out: list[tuple[str, str]] = []
    head, buf = "", []
    for line in md.splitlines(keepends=True):
        if line.startswith("## "):
            out.append((head, "".join(buf)))
            head, buf = line.rstrip("\n"), [line]
        else:
            buf.append(line)
    out.append((head, "".join(buf)))
    return [(h, t) for h, t in out if h or t.strip()]


def _figure(name: str, caption: str) -> str:
    return (f'<figure><img src="{html.escape(name)}" alt="{html.escape(caption)}">'
            f"<figcaption>{html.escape(caption)}</figcaption></figure>\n")


def page(markdown: str, figures: Sequence[str] = tuple(FIGURES),
         title: str = "Bias report") -> str:
    """The report page.

    Args:
        markdown: ``plots/report/tables.md``.
        figures: file names of the figures beside the page (a subset of :data:`FIGURES`;
            each goes after the section its heading prefix names, or at the end when the
            report has no such section).
        title: the page title.

    Returns:
        A complete HTML5 document (str), UTF-8, no script, no external resource.
    """
    from markdown_it import MarkdownIt
    md = MarkdownIt("commonmark", {"html": False}).enable("table")
    body: list[str] = []
    placed: set[str] = set()
    for head, text in _sections(markdown):
        body.append(md.render(text))
        for name in figures:
            where, caption = FIGURES.get(name, ("", name))
            if name not in placed and where and head.startswith(where):
                body.append(_figure(name, caption))
                placed.add(name)
    rest = [n for n in figures if n not in placed]
    if rest:
        body.append("<h2>Figures</h2>\n" + "".join(_figure(n, FIGURES.get(n, ("", n))[1])
                                                    for n in rest))
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
            f"<title>{html.escape(title)}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n"
            + "".join(body) + "</body>\n</html>\n")


#: character sequences that show a text decoded with the wrong charset (UTF-8 read as
#: Latin-1 / Windows-1252: "Â±" for ±, "â€" / "âˆ" for –, −) or a glyph the decoder gave up on
MOJIBAKE = re.compile("[\ufffd]|Â[\u00a0-\u00bf]|â[\u0080-\u00bf\u20ac\u02c6\u201a-\u201e]")


def broken_glyphs(text: str) -> list[str]:
    """Up to 10 snippets of ``text`` (a rendered page's text) around a :data:`MOJIBAKE`
    sequence; empty when the page reads right."""
    return [text[max(0, m.start() - 15):m.end() + 15] for m in MOJIBAKE.finditer(text)][:10]


__all__ = ["FIGURES", "MOJIBAKE", "page", "broken_glyphs"]
