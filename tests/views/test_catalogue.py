"""The one table of views: every entry well formed, each view offered by the pages it names, the
figure views the CLI renders, and a click's settings."""

from __future__ import annotations

from attnviz.views.catalogue import (
    FIGURE_VIEWS,
    NEEDS,
    PAGE_NAMES,
    PAGES,
    PART_KINDS,
    VIEWS,
    open_head,
    views_on,
)
from attnviz.views.patching import pick_head


def _parts(parts):
    for part in parts:
        yield part
        yield from _parts(part.parts)


def test_every_entry_says_what_it_needs_where_it_is_offered_and_draws_known_parts():
    for name, view in VIEWS.items():
        assert view.name == name and view.needs in NEEDS, name
        assert view.pages and set(view.pages) <= set(PAGE_NAMES), name
        for part in _parts(view.parts):
            assert part.kind in PART_KINDS, (name, part.kind)
            assert part.kind not in ("caption", "subheader", "info") or part.build is not None, (name, part)
            assert part.kind != "columns" or part.parts, (name, part)


def test_each_page_offers_the_views_that_name_it():
    for page in PAGE_NAMES:
        assert set(views_on(page)) == {n for n, v in VIEWS.items() if page in v.pages}
    assert views_on("patching") == ("patching",) and "patching" not in views_on("explorer")
    assert "patching" not in FIGURE_VIEWS and "table" not in FIGURE_VIEWS and "grid" in FIGURE_VIEWS
    # the pages that run a causal LM's residual stream (or the tiny model's): they patch it, or read it
    assert [p.name for p in PAGES if p.reads_residual] == ["patching", "circuit", "logit-lens"]


def test_a_click_on_a_head_sets_what_its_view_says():
    assert open_head(1, 2, True) == {"layer": 1, "head": 2, "view": "head"}
    assert open_head(1, 2, False) == {"head": 2, "view": "head"}
    assert pick_head(1, 0, True) == {"patched": "1.0"}
    heatmap = next(p for p in VIEWS["patching"].parts if p.selectable)
    assert heatmap.opens is pick_head and VIEWS["grid"].parts[0].opens is open_head


def test_every_page_of_the_table_has_its_module_and_the_cli_offers_it():
    """One table: app.py's navigation, the CLI's --page choices and the module whose figure a link renders."""
    from attnviz.cli import build_parser
    from attnviz.views.pages import module_of

    for p in PAGES:
        if not p.command:  # a training has a command of its own
            assert callable(getattr(module_of(p.name), p.figure)), p.name
    render = build_parser()._subparsers._group_actions[0].choices["render"]
    page = next(a for a in render._actions if a.dest == "page")
    assert sorted(page.choices) == sorted(PAGE_NAMES)


def test_a_pages_own_settings_are_declared_in_its_module_and_the_state_keeps_the_shared_ones():
    """A setting that one page reads is a field of a settings dataclass that the page's module declares
    or imports; ``ViewState``'s own fields (the prompt pair Patching and Circuit share among them) are read by
    every page or by several, as their entries say. No declaration lists pages: a setting
    is every page's, one page's own, or read by the entries that name it."""
    from attnviz.settings.spec import BY_ENTRY, OWN
    from attnviz.views.catalogue import PAGES
    from attnviz.views.pages import module_of
    from attnviz.views.state import SETTINGS, ViewState, reads

    own = 0
    for url, e in SETTINGS.items():
        pages, readers = e.spec.pages, [p.name for p in PAGES if url in reads(p.name)]
        assert len(pages) <= 1 and readers, url
        if len(e.path) == 1 or e.path[0] == "pair":  # ViewState's own: shared
            assert pages == ("*",) or len(readers) > 1, url
        elif e.path[0] != "config":  # the run's settings are shared by every page that runs the text
            cls = type(getattr(ViewState(), e.path[0]))
            assert pages in (OWN, BY_ENTRY), url  # its page's own, or read by the entries naming it: no page named
            assert getattr(module_of(readers[0]), cls.__name__, None) is cls, url
            own += 1
    assert own >= 50  # every page's own settings, not a few


def test_a_page_with_a_command_of_its_own_renders_its_first_chart_too(learned_defaults, monkeypatch):
    from attnviz.plots.style import FigureStyle
    from attnviz.views.catalogue import page
    from attnviz.views.pages import page_figure
    from attnviz.views.state import ViewState

    monkeypatch.setenv("ATTNVIZ_LEARN_DIR", str(learned_defaults["dir"]))  # the session's trained runs
    assert page("watch-it-learn").command == "python -m attnviz learn"  # its training's own command
    fig = page_figure("watch-it-learn", ViewState(), FigureStyle())
    assert fig.layout.title.text == "loss as it learns"
    steps = [c["step"] for c in learned_defaults["records"][0]["checkpoints"]]
    assert list(fig.data[0].x) == steps  # the default training's record, as the page draws it
