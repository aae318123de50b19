"""The link a page writes: the settings it reads that differ from their defaults, and defaults that
follow the shared settings."""

from urllib.parse import urlencode

import pytest

from attnviz.views.catalogue import PAGES
from attnviz.views.cross import CROSS_SOURCES
from attnviz.views.state import DEFAULTS, SETTINGS, ViewState, link_query, parse, reads


def test_the_default_explorer_link_is_empty_and_three_changes_write_three_parameters():
    assert link_query(DEFAULTS, "explorer") == {}
    state = DEFAULTS.with_(heads=8, text='She said "hello" & left', view="head")
    q = link_query(state, "explorer")
    assert q == {"heads": "8", "text": 'She said "hello" & left', "view": "head"}
    assert len("http://localhost:8501/?" + urlencode(q)) <= 200
    assert parse(q)[0] == state  # the short link reopens exactly this state


def test_a_link_writes_only_what_its_page_reads():
    state = DEFAULTS.with_(heads=8, patch=4, additive=True, clean="BOS 3 4 5")
    assert link_query(state, "explorer") == {"heads": "8"}
    assert link_query(state, "image-patches") == {"heads": "8", "patch": "4"}
    assert link_query(state, "why-scale") == {"additive": "1"}
    assert link_query(state, "patching") == {"clean": "BOS 3 4 5"}


@pytest.mark.parametrize("page", ["why-scale", "image-patches", "audio-frames", "graph-nodes", "attention-file",
                                  "watch-it-learn", "patching"])
def test_pages_that_do_not_read_the_text_do_not_declare_it(page):
    assert "text" not in reads(page) and "mask" not in reads(page)


def test_pages_that_embed_a_text_of_their_own_read_how_it_is_masked_but_not_the_sidebars_text():
    for page in ("qk-map", "long-sequences"):
        assert {"mask", "window", "positional", "projections"} <= reads(page), page
    assert "text" not in reads("qk-map")


def test_every_page_reads_the_shared_language_colours_and_presenter_mode():
    for page in PAGES:
        assert {"lang", "present"} <= reads(page.name), page.name
        assert ("colors" in reads(page.name)) is ("colors" not in page.ignores), page.name
    assert "colors" not in reads("why-scale")  # line charts: no colour scale to choose


def test_cross_attentions_source_follows_the_language_until_it_is_changed():
    source = DEFAULTS.cross_attention.source
    assert source == CROSS_SOURCES["en"] and all(ord(c) < 0x2E80 for c in source)  # no CJK
    zh, warnings = parse({"lang": "zh"})
    assert zh.cross_attention.source == CROSS_SOURCES["zh"] and not warnings
    assert link_query(zh, "cross-attention") == {"lang": "zh"}  # the followed default is not written
    own = zh.with_(source="Hallo Welt")
    assert link_query(own, "cross-attention") == {"lang": "zh", "source": "Hallo Welt"}
    assert parse(link_query(own, "cross-attention"))[0].cross_attention.source == "Hallo Welt"


def test_an_old_long_link_still_opens_the_same_view():
    state = DEFAULTS.with_(heads=8, mask="none", view="mean", seed=3)
    old = state.to_query()  # every setting of every page, as links were written before
    assert len(old) == len(SETTINGS) > 60
    assert parse(old)[0] == state and parse(link_query(state, "explorer"))[0] == state
    assert ViewState.of(**{k: v for k, v in state.values().items()}) == state
