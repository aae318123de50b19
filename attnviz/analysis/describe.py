"""Text alternatives: one or two generated sentences that say what a chart shows.

Read by screen readers (the chart's accessible name), shown under the chart in
presenter mode, and written into the JSON export. Two kinds:

- for attention weights, what a head does: "Head 2: “it” attends most to “cat”
  (0.61); 5 of 12 rows have keys blocked by the causal mask.";
- for any other chart, from its figure: its title, what it plots and where its
  largest value is.
"""

from __future__ import annotations

import numpy as np

from attnviz.i18n import _

MAX_NAMED_SERIES = 4  # a chart of more lines is described by its title alone


def _tok(t: str) -> str:
    return "“" + t + "”"


def strongest(w: np.ndarray, lengths: tuple[int, int]) -> tuple[int, int, float]:
    """(query, key, weight) of the largest weight among real tokens, preferring rows that
    see more than one key (a row that sees one key puts 1.0 there by definition)."""
    L, S = lengths
    w = np.asarray(w)[:L, :S]
    open_rows = (w > 0).sum(1) > 1
    rows = np.nonzero(open_rows)[0] if open_rows.any() else np.arange(L)
    sub = w[rows]
    i, j = np.unravel_index(int(np.argmax(sub)), sub.shape)
    return int(rows[i]), int(j), float(sub[i, j])


def strongest_of_heads(w: np.ndarray, lengths: tuple[int, int]) -> tuple[int, int, float, int]:
    """(query, key, weight, head): ``strongest`` of every head of ``w`` (H, L, S) at once, and
    the first head whose strongest weight is the largest."""
    L, S = lengths
    w = np.asarray(w)[:, :L, :S]  # (H, L, S)
    open_rows = (w > 0).sum(2) > 1  # (H, L)
    rows = open_rows | ~open_rows.any(1, keepdims=True)  # a head with no open row: every row
    flat = np.where(rows[:, :, None], w, -np.inf).reshape(w.shape[0], -1)  # (H, L·S)
    best = flat.argmax(1)  # first in row-major order, as strongest's argmax over its rows
    h = int(np.argmax(flat[np.arange(w.shape[0]), best]))  # the first head with the largest
    q, k = divmod(int(best[h]), S)
    return q, k, float(w[h, q, k]), h


def mask_sentence(result, n: int) -> str:
    """How many query rows the mask touches (empty when none)."""
    if result.mask is None:
        return ""
    m = result.mask_matrix(n).numpy()[: result.lengths[n], :]
    blocked_rows = int((~m).any(1).sum())
    if not blocked_rows:
        return ""
    return _("{k} of {n} rows have keys blocked by the {mask} mask.").format(
        k=blocked_rows, n=m.shape[0], mask=_(result.mask_name))


def describe_head(result, n: int, h: int) -> str:
    w = result.weights[n, h].numpy()
    q, k, v = strongest(w, (result.lengths[n], result.source_lengths[n]))
    first = _("Head {h}: {query} attends most to {key} ({w}).").format(
        h=h, query=_tok(result.tokens[n][q]), key=_tok(result.source_tokens[n][k]), w=f"{v:.2f}")
    return " ".join(x for x in (first, mask_sentence(result, n)) if x)


def describe_grid(result, n: int) -> str:
    N, H, L, S = result.weights.shape
    q, k, v, h = strongest_of_heads(result.weights[n].numpy(), (result.lengths[n], result.source_lengths[n]))
    first = _("{H} heads over {L} tokens; the strongest link is in head {h}: {query} attends to {key} ({w}).").format(
        H=H, L=result.lengths[n], h=h, query=_tok(result.tokens[n][q]), key=_tok(result.source_tokens[n][k]),
        w=f"{v:.2f}")
    return " ".join(x for x in (first, mask_sentence(result, n)) if x)


def describe_query(result, n: int, q: int) -> str:
    w = result.weights[n, :, q, : result.source_lengths[n]].numpy()  # (H, S)
    mean = w.mean(0)
    k = int(np.argmax(mean))
    heads = int((w.argmax(1) == k).sum())
    return _("{query} attends most to {key} ({w} on average over heads); {m} of {H} heads agree.").format(
        query=_tok(result.tokens[n][q]), key=_tok(result.source_tokens[n][k]), w=f"{mean[k]:.2f}", m=heads,
        H=w.shape[0])


def describe_figure(fig) -> str:
    """A generic sentence from any figure: its title, what it plots and its largest value."""
    d = fig.to_dict() if hasattr(fig, "to_dict") else fig
    layout = d.get("layout", {})
    title = (layout.get("title") or {}).get("text", "") if isinstance(layout.get("title"), dict) else ""
    traces = d.get("data", [])
    title = title.replace("<br>", " — ")  # a title's line break, read as a pause
    parts = [title + "." if title else ""]
    heat = [t for t in traces if t.get("type") == "heatmap" and t.get("opacity", 1) > 0]
    lines = [t for t in traces if t.get("type") in ("bar", "scatter") and t.get("name")]
    if heat:
        z = _array(heat[0].get("z"))
        if z is not None and z.size and np.isfinite(z).any():
            i, j = np.unravel_index(int(np.nanargmax(np.where(np.isfinite(z), z, -np.inf))), z.shape)
            ys, xs = _labels(heat[0].get("y")), _labels(heat[0].get("x"))
            where = ""
            if ys is not None and xs is not None and len(ys) > i and len(xs) > j:
                where = " " + _("at row {row}, column {col}").format(row=_tok(_plain(ys[i])), col=_tok(_plain(xs[j])))
            parts.append(_("A heatmap of {rows} × {cols} cells; the largest value is {v}{where}.").format(
                rows=z.shape[0], cols=z.shape[1], v=f"{z[i, j]:.3g}", where=where))
    elif lines:
        best = None
        for t in lines:
            y = _array(t.get("y"))
            if y is None or not y.size or not np.isfinite(y).any():
                continue
            k = int(np.nanargmax(y))
            if best is None or y[k] > best[0]:
                xs = _labels(t.get("x"))
                best = (float(y[k]), t["name"], _plain(xs[k]) if xs is not None and len(xs) > k else str(k))
        if best and len(lines) <= MAX_NAMED_SERIES:  # past a few, "the highest of 24 series" names nothing a
            parts.append(_("{n} series; the highest value is {v}, for {name} at {x}.").format(  # reader can find
                n=len(lines), v=f"{best[0]:.3g}", name=best[1], x=_tok(str(best[2]))))
    return " ".join(p for p in parts if p)


def _labels(v) -> list | None:
    """Axis labels as a list, whether they travel as a list or as a typed array."""
    if v is None:
        return None
    if isinstance(v, dict):
        arr = _array(v)
        return None if arr is None else [f"{x:.4g}" for x in arr.reshape(-1)]
    return list(v)


def _plain(label) -> str:
    import html

    return html.unescape(str(label)).rstrip("\u200b\u200c\u2060\ufeff\u2007")


def _array(v) -> np.ndarray | None:
    if v is None:
        return None
    if isinstance(v, dict) and "bdata" in v:
        import base64

        arr = np.frombuffer(base64.b64decode(v["bdata"]), dtype=np.dtype(v["dtype"]))
        shape = v.get("shape")
        if isinstance(shape, str):
            shape = [int(s) for s in shape.split(",")]
        return arr.reshape(shape).astype(float) if shape else arr.astype(float)
    try:
        return np.array([[np.nan if x is None else x for x in row] for row in v], dtype=float) \
            if len(v) and isinstance(v[0], (list, tuple, np.ndarray)) else np.array(
                [np.nan if x is None else x for x in v], dtype=float)
    except (TypeError, ValueError):
        return None
