"""What a page looks like in Chromium, measured: where each chart starts and how tall it is, and whether
each chart's title, axis titles, legend, colour bar title and annotations lie inside the chart and clear
of one another; and ``check_whole``, the layout test of one page at one size (tests/app/test_browser_layout.py at
a laptop's, as a fresh server's first session, tests/app/test_browser_layout_projector.py at a projector's: two
modules, so that the suite's workers share them)."""

from __future__ import annotations

import os
from urllib.parse import urlsplit

from tests.support.browserkit import SCREENSHOTS_ENV, SHOTS

LAPTOP, PROJECTOR = (1366, 768), (1024, 768)
LAPTOP_BODY_PX = 14  # Streamlit's body text
README_SHOTS = ("step-by-step", "mask-lab", "vision-language")  # what a projector shows first: the README's
# The pages whose first chart a projector's first screen does not yet hold whole (the README says so): the Logit
# lens' grid shorter shrinks its rows past reading. Every other page's first chart must be whole.
NOT_WHOLE_ON_A_PROJECTOR = frozenset({"logit-lens"})

# The parts of a Plotly chart that carry words a reader must read whole: the title, each axis's
# title, the legend, each colour bar's title and tick labels, each annotation (a grid's subplot titles among them).
_MEASURE = r"""() => {
  const box = e => { const r = e.getBoundingClientRect(); return {left: r.left, right: r.right, top: r.top,
                     bottom: r.bottom}; };
  const main = document.querySelector('[data-testid=stMain]');
  const scroll = main ? main.scrollTop : 0;
  const charts = [...document.querySelectorAll('.js-plotly-plot')].map((g, i) => {
    const parts = [];
    const add = (kind, e) => { const t = (e.textContent || '').trim(); const b = box(e);
      if (b.right - b.left > 0.5 && b.bottom - b.top > 0.5 && (t || kind === 'legend'))
        parts.push({kind, text: t.slice(0, 60), ...b}); };
    g.querySelectorAll('.g-gtitle text').forEach(e => add('title', e));
    g.querySelectorAll('text[class$=title]').forEach(e => {
      const c = e.getAttribute('class'); if (/^[xy]\d*title$/.test(c)) add('axis title', e); });
    g.querySelectorAll('.legend').forEach(e => add('legend', e.querySelector('.bg') || e));
    // a colour bar's title line by line (a blank line under it keeps it off the top tick), and its tick labels
    g.querySelectorAll('.cbtitle text').forEach(e => { const lines = e.querySelectorAll('tspan.line');
      if (lines.length) lines.forEach(l => add('colour bar title', l)); else add('colour bar title', e); });
    g.querySelectorAll('.colorbar .cbaxis text').forEach(e => add('colour bar tick', e));
    g.querySelectorAll('.annotation').forEach(e => { const t = e.querySelector('.annotation-text');
      if (t) add('annotation', t); });
    const seen = new Set();  // one element matched by two selectors counts once
    const unique = parts.filter(p => { const k = p.kind + p.text + p.left + p.top; if (seen.has(k)) return false;
                                        seen.add(k); return true; });
    return {index: i, ...box(g), parts: unique};
  });
  const errors = [...document.querySelectorAll('[data-testid=stException], [data-testid=stAlertContentError]')]
    .map(e => e.innerText.slice(0, 200));
  // the body text's size: the median of the page's paragraphs (a progress bar's or a widget's words aside)
  const fonts = [...document.querySelectorAll('[data-testid=stMain] [data-testid=stMarkdown] p')]
    .filter(e => e.getBoundingClientRect().height > 0).slice(0, 9)
    .map(e => parseFloat(getComputedStyle(e).fontSize)).sort((a, b) => a - b);
  // text a reader copies, searches or hears: no invisible character (a token's repeat is told apart otherwise)
  const invisible = [...document.querySelectorAll('.js-plotly-plot svg text')].map(e => e.textContent)
    .filter(t => /[\u200b\u200c\u2060\ufeff]/.test(t))
    // not a number: Plotly writes a log axis's 1e-6 with zero-width spaces of its own
    .filter(t => /[^0-9.,+\-−×e\s]/.test(t.replace(/[\u200b\u200c\u2060\ufeff]/g, '')))
    .slice(0, 5).map(t => JSON.stringify(t));
  // a chart still being computed shows its job's progress bar where it will be drawn
  const pending = [...document.querySelectorAll('[data-testid=stMain] [data-testid=stProgress] [role=progressbar]')]
    .filter(b => Number(b.getAttribute('aria-valuenow')) < 100).map(e => e.getBoundingClientRect().top);
  return {charts, errors, scroll, pending, invisible,
          bodyFont: fonts.length ? fonts[Math.floor(fonts.length / 2)] : null,
          height: main ? main.scrollHeight : document.body.scrollHeight};
}"""


def measure(page) -> dict:
    """The page as drawn now: its charts (boxes in viewport pixels and the boxes of their parts), the
    errors it shows, where a chart still computing shows its progress, the main pane's scroll height and the
    body text's size (the median paragraph's)."""
    return page.evaluate(_MEASURE)


def _inside(part: dict, chart: dict, slack: float = 1.0) -> bool:
    return (part["left"] >= chart["left"] - slack and part["right"] <= chart["right"] + slack
            and part["top"] >= chart["top"] - slack and part["bottom"] <= chart["bottom"] + slack)


def _overlap(a: dict, b: dict, slack: float = 1.0) -> bool:
    return (min(a["right"], b["right"]) - max(a["left"], b["left"]) > slack
            and min(a["bottom"], b["bottom"]) - max(a["top"], b["top"]) > slack)


def problems(drawn: dict, screen: tuple[int, int], present: bool, whole: bool = False) -> list[str]:
    """Everything wrong with a page as ``measure`` saw it, in words (empty: nothing): an error shown; a
    part of a chart outside it or over another part (a colour bar's tick labels over each other among them); the
    first chart (or the progress of one being computed)
    below the first screen (with ``whole``: its foot below it); in
    presenter mode, charts side by side or taller than the screen."""
    out = [f"error shown: {e}" for e in drawn["errors"]]
    out += [f"invisible characters in a label: {t}" for t in drawn.get("invisible", [])]
    charts = drawn["charts"]
    for c in charts:
        name = f"chart {c['index']}"
        for p in c["parts"]:
            if not _inside(p, c):
                out.append(f"{name}: {p['kind']} {p['text']!r} outside the chart")
        for i, a in enumerate(c["parts"]):
            for b in c["parts"][i + 1:]:
                if a["kind"] == b["kind"] == "legend":
                    continue
                # a colour bar's tick labels run together on a bar too short for them (a text's box is taller
                # than its glyphs: a quarter of a line's height apart is still read apart)
                slack = 0.25 * min(a["bottom"] - a["top"], b["bottom"] - b["top"]) \
                    if a["kind"] == b["kind"] == "colour bar tick" else 1.0
                if _overlap(a, b, slack):
                    out.append(f"{name}: {a['kind']} {a['text']!r} over {b['kind']} {b['text']!r}")
    tops = [c["top"] for c in charts] + drawn.get("pending", [])
    if tops and min(tops) + drawn["scroll"] >= screen[1]:
        out.append(f"first chart starts at {min(tops) + drawn['scroll']:.0f} px, below the first screen")
    if whole and charts:
        first = min(charts, key=lambda c: c["top"])
        if first["bottom"] + drawn["scroll"] > screen[1] + 1:
            out.append(f"first chart ends at {first['bottom'] + drawn['scroll']:.0f} px, below the first screen")
    if present:
        for c in charts:
            if c["bottom"] - c["top"] > screen[1]:
                out.append(f"chart {c['index']} is {c['bottom'] - c['top']:.0f} px tall, over one screen")
        for i, a in enumerate(charts):
            for b in charts[i + 1:]:
                if min(a["bottom"], b["bottom"]) - max(a["top"], b["top"]) > 1:
                    out.append(f"charts {a['index']} and {b['index']} side by side")
    return out


# Drawn: no run going, no background work's progress bar, every chart in sight holding its drawing.
_DRAWN = """() => !document.querySelector('[data-testid=stStatusWidget]')
  && ![...document.querySelectorAll('[data-testid=stMain] [data-testid=stProgress] [role=progressbar]')]
       .some(b => Number(b.getAttribute('aria-valuenow')) < 100)  // a job still running (a finished one stays)
  && !document.querySelector('[data-testid=stMain] [data-testid=stSkeleton]')
  && [...document.querySelectorAll('[data-testid=stPlotlyChart]')]
       .filter(c => c.getBoundingClientRect().top < innerHeight)  // drawn when scrolled to: those in sight
       .every(c => c.querySelector('.main-svg'))"""


def _settle(page, tries: int = 480) -> None:
    """Until the page is drawn at three looks half a second apart (a rerun starts a moment after the first paint:
    a second of calm, seen three times, where two looks a second apart saw it twice), or four minutes passed: a
    chart still computing is measured where its progress bar stands."""
    page.wait_for_selector("[data-testid=stMain] h1, .js-plotly-plot", timeout=120_000)  # the explorer in
    calm = 0  # presenter mode has no title: its chart is the first screen
    for _ in range(tries):
        page.wait_for_timeout(500)
        calm = calm + 1 if page.evaluate(_DRAWN) else 0
        if calm == 3:
            return


_SCROLLER = "(document.querySelector('[data-testid=stMain]') || document.scrollingElement)"


def _draw_every_chart(page) -> None:
    """Scroll down the page a screen at a time (Streamlit draws a chart when it comes into sight), wait until
    every chart holds its drawing, and scroll back to the top, where a reader starts."""
    height = page.evaluate(f"() => {_SCROLLER}.scrollHeight")
    for y in range(0, int(height) + 1, 600):
        page.evaluate(f"y => {_SCROLLER}.scrollTo(0, y)", y)
        page.wait_for_timeout(250)
    page.wait_for_function("() => [...document.querySelectorAll('[data-testid=stPlotlyChart]')]"
                           ".every(c => c.querySelector('.main-svg'))", timeout=60_000)
    page.evaluate(f"() => {_SCROLLER}.scrollTo(0, 0)")
    page.wait_for_timeout(500)


def assert_page_named(page, title: str | None, timeout: float = 30_000) -> None:
    """The page the link names: no Streamlit "Page not found" dialog (streamlit#8860: a pages/ folder beside
    app.py), no traceback, and (``title`` given) a heading that ends with ``title``, waited for up to ``timeout`` ms
    (a loaded machine redrew it more than 30 s after its run ended)."""
    body = page.inner_text("body")
    assert page.locator("[role=dialog]").count() == 0 and "Page not found" not in body, body[:300]
    assert page.locator("[data-testid=stException]").count() == 0, body[:500]
    if title is not None:
        heading = page.locator("[data-testid=stMain] h1").first.inner_text(timeout=timeout)
        assert heading.lower().endswith(title.lower()), (heading, title)


def check_whole(server: str, browser, entry, size: tuple[int, int], present: bool) -> None:
    """Open ``entry``'s page at ``size`` (in presenter mode with ``present``), let it draw every chart, and assert
    what the layout tests assert of it (their module doc); screenshots under build/screenshots."""
    ctx = browser.new_context(viewport={"width": size[0], "height": size[1]})
    asked = []
    ctx.on("request", lambda r: asked.append(r.url))
    page = ctx.new_page()
    try:
        page.goto(f"{server}/{entry.path}" + ("?present=1" if present else ""))
        _settle(page)
        _draw_every_chart(page)
        drawn = measure(page)
        mode = "presenter" if present else "laptop"
        if present and entry.name in README_SHOTS:  # the README's: what a projector shows first
            page.screenshot(path=str(SHOTS / f"presenter-{entry.name}.png"))
        if not os.environ.get(SCREENSHOTS_ENV):  # every page's, to look at after a run (build/screenshots)
            page.screenshot(path=str(SHOTS / f"layout-{entry.name}-{mode}.png"))
        found = problems(drawn, size, present, whole=present and entry.name not in NOT_WHOLE_ON_A_PROJECTOR)
        assert found == [], found  # (a support module's asserts are not rewritten: the list, said)
        if present and entry.name == "vision-language":  # the picture and its overlay, whole on the first screen
            assert drawn["charts"][0]["bottom"] <= size[1], drawn["charts"][0]
        if present:
            assert drawn["bodyFont"] >= LAPTOP_BODY_PX * 1.25  # presenter mode's 1.1–1.3 rem
        else:  # the switch into presenter mode, in sight on every page
            switch = page.get_by_role("switch", name="Presenter mode")
            assert switch.is_visible() and switch.bounding_box()["y"] < size[1]
        # presenter mode draws the explorer without its title: its chart is the first screen
        assert_page_named(page, None if present else entry.title)
        outside = {urlsplit(u).hostname for u in asked if urlsplit(u).scheme in ("http", "https")}
        outside -= {urlsplit(server).hostname}
        assert not outside, f"asked hosts other than the app's own: {sorted(outside)}"
    finally:
        ctx.close()
