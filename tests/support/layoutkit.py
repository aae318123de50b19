"""What a page looks like in Chromium, measured: where each chart starts and how tall it is, and whether
each chart's title, axis titles, legend, colour bar title and annotations lie inside the chart and clear
of one another. Used by the layout test of every page (tests/app/test_browser_layout.py)."""

from __future__ import annotations

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


def problems(drawn: dict, screen: tuple[int, int], present: bool) -> list[str]:
    """Everything wrong with a page as ``measure`` saw it, in words (empty: nothing): an error shown; a
    part of a chart outside it or over another part; the first chart (or the progress of one being computed)
    below the first screen; in
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
                if a["kind"] == b["kind"] and a["kind"] in ("legend", "colour bar tick"):
                    continue
                if _overlap(a, b):
                    out.append(f"{name}: {a['kind']} {a['text']!r} over {b['kind']} {b['text']!r}")
    tops = [c["top"] for c in charts] + drawn.get("pending", [])
    if tops and min(tops) + drawn["scroll"] >= screen[1]:
        out.append(f"first chart starts at {min(tops) + drawn['scroll']:.0f} px, below the first screen")
    if present:
        for c in charts:
            if c["bottom"] - c["top"] > screen[1]:
                out.append(f"chart {c['index']} is {c['bottom'] - c['top']:.0f} px tall, over one screen")
        for i, a in enumerate(charts):
            for b in charts[i + 1:]:
                if min(a["bottom"], b["bottom"]) - max(a["top"], b["top"]) > 1:
                    out.append(f"charts {a['index']} and {b['index']} side by side")
    return out
