"""biaslab.report.html: the one-page report, its charset and layout, read back in a real
headless browser (Debian's chromium, which scripts/test.sh installs) for broken glyphs, missing
figures and what the first screen shows."""
import shutil
import sys
import subprocess
from pathlib import Path

import pytest

from biaslab.report import html

MD = """# Bias report

## At a glance: each mitigation against Original

**S_synthetic**: the counterfactuals only
- Classifier (n = 5): Leakage −9.7 [−10.9, −8.6]: less bias; check holds.

## How to read the tables

Ratio →1, Δ ± 0.5, † degenerate.

## Table 1: multi-label classification

| Method | mAP ↑ | Ratio →1 |
|---|---|---|
| Original | 79.0 ± 2.5 | 1.7 ± 0.2 |

## Glossary

- **margin**: the smallest effect that matters.
"""


def _png(path: Path, w: int = 40, h: int = 20) -> None:
    from PIL import Image
    Image.new("RGB", (w, h), (200, 30, 30)).save(path)


def test_page_is_utf8_scriptless_and_puts_each_figure_after_its_section():
    page = html.page(MD, ["forest.png", "table1.png", "probe.png"])
    assert page.startswith("<!DOCTYPE html>") and '<meta charset="utf-8">' in page
    assert "<script" not in page and "http://" not in page and "https://" not in page
    assert "<table>" in page and "<td>79.0 ± 2.5</td>" in page
    i_glance, i_forest = page.index("At a glance"), page.index('src="forest.png"')
    i_read, i_t1 = page.index("How to read"), page.index("Table 1: multi-label")
    assert i_glance < i_forest < i_read            # the answer, then its figure, then details
    assert i_t1 < page.index('src="table1.png"') < page.index("Glossary")
    # a figure whose section the report lacks goes to the end
    assert page.index("<h2>Figures</h2>") < page.index('src="probe.png"')
    assert html.page(MD, []).count("<figure>") == 0


def test_broken_glyphs_finds_mojibake_and_nothing_else():
    assert html.broken_glyphs("Leakage −9.7 ± 1.2, Ratio →1, Δ, †") == []
    bad = "−9.7".encode("utf-8").decode("latin-1") + " and " + "±".encode().decode("cp1252")
    assert len(html.broken_glyphs(bad)) == 2
    assert html.broken_glyphs("a \ufffd b")


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium (scripts/test.sh installs Debian's)")
def test_the_page_reads_right_in_a_headless_browser(tmp_path):
    for name in ("forest.png", "table1.png"):
        _png(tmp_path / name)
    page = tmp_path / "index.html"
    page.write_text(html.page(MD, ["forest.png", "table1.png"]), encoding="utf-8")
    flags = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
             f"--user-data-dir={tmp_path / 'profile'}"]
    # the DOM after the load event: the text as the browser decoded it, and every image's size
    probe = tmp_path / "probe.html"
    probe.write_text(page.read_text(encoding="utf-8").replace(
        "</body>", "<script>window.addEventListener('load', () => document.body.setAttribute("
                   "'data-images', Array.from(document.images).map(i => i.naturalWidth + 'x' "
                   "+ i.naturalHeight).join(',')));</script></body>"), encoding="utf-8")
    dom = subprocess.run(flags + ["--virtual-time-budget=3000", "--dump-dom",
                                  probe.as_uri()], capture_output=True, text=True,
                         timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert 'data-images="40x20,40x20"' in dom.stdout        # both figures loaded
    assert html.broken_glyphs(dom.stdout) == []
    for glyph in ("−9.7", "± 2.5", "→1", "Δ", "†"):
        assert glyph in dom.stdout
    shot = tmp_path / "first_screen.png"
    r = subprocess.run(flags + ["--window-size=1280,900", f"--screenshot={shot}",
                                page.as_uri()], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and shot.stat().st_size > 1000, r.stderr[-2000:]


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium (scripts/test.sh installs Debian's)")
def test_dvc_plots_page_declares_its_charset_and_says_when_vega_cannot_load(tmp_path):
    """`dvc plots show` with the project's page template (.dvc/config plots.html_template),
    opened with no network: the page declares UTF-8 (a minus sign in a title read as Latin-1
    is the "â^'60" of an undeclared page) and says why its charts are missing instead of
    showing nothing."""
    root = Path(__file__).resolve().parents[1]
    repo = tmp_path / "repo"
    (repo / ".dvc/plots").mkdir(parents=True)
    shutil.copy(root / ".dvc/plots/page.html", repo / ".dvc/plots/page.html")
    (repo / ".dvc/config").write_text("[core]\n    no_scm = True\n[plots]\n"
                                      "    html_template = plots/page.html\n")
    (repo / "d.csv").write_text("x,y\n1,−0.5\n2,0.25\n")
    (repo / "dvc.yaml").write_text("plots:\n  - d.csv:\n      title: ΔM −60 → 0\n"
                                   "      x: x\n      y: y\n")
    dvc = Path(sys.executable).with_name("dvc")
    r = subprocess.run([str(dvc), "plots", "show", "-o", "out"], cwd=repo, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    page = (repo / "out/index.html").read_text(encoding="utf-8")
    assert '<meta charset="utf-8">' in page
    dom = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
                          f"--user-data-dir={tmp_path / 'profile'}",
                          "--proxy-server=127.0.0.1:9",          # offline: no CDN
                          "--virtual-time-budget=3000", "--dump-dom",
                          (repo / "out/index.html").as_uri()],
                         capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert 'id="offline" style="display: block;"' in dom.stdout
    assert html.broken_glyphs(dom.stdout) == []
