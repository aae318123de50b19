"""Hostile input, generated: links, CLI flags and spec files.

- The URL parser never raises, and every parameter it did not take as given is
  named in a warning.
- An AppTest run of every page with such a link shows no exception element, and
  every warning on the page is escaped Markdown (no live link, no emphasis).
- The CLI exits 0 or 2 with no traceback, and in a batch the good entries are still
  written.
"""

from __future__ import annotations

import re
import string
import tomllib
from urllib.parse import urlencode

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from attnviz import cli
from attnviz.core.masks import MASK_KINDS
from attnviz.plots import COLOR_SCALES
from attnviz.views.catalogue import VIEW_NAMES as VIEWS
from attnviz.views.state import NAMES, parse
from tests.support.apphelp import app

KEYS = st.sampled_from(NAMES) | st.text(min_size=1, max_size=12)
NASTY = st.sampled_from([
    "`[Sign in](https://evil.example)`", "**bold**", "$x^2$", ":red[alarm]", ":material/home:", "<b>x</b>",
    "<script>alert(1)</script>", "1e999", "-0", "nan", "inf", "9" * 5000, "  3 ", "٣", "0x10", "\u200d", "\n\n",
    "[x](javascript:alert(1))", "![img](http://e/x.png)", "# heading", "> quote", "- list", "|a|b|", "\\", "",
])
VALUES = NASTY | st.text(max_size=60) | st.integers(-10**12, 10**12).map(str) | st.floats(allow_nan=True).map(str)
QUERIES = st.lists(st.tuples(KEYS, VALUES), max_size=8)

# A value that no numeric or choice parameter accepts.
GARBAGE = st.text(alphabet=string.ascii_letters + "[]()`*_:$<>!", min_size=1, max_size=20).map(lambda s: "x" + s)
CHOICES = {"mask": MASK_KINDS, "view": VIEWS, "colors": COLOR_SCALES, "tokenize": ("auto", "word", "char")}
NUMERIC = ("heads", "d_model", "window", "pad_to", "seed", "dropout", "head", "query", "seq")


def unescaped_punctuation(md: str) -> list[str]:
    """ASCII punctuation in ``md`` not preceded by a backslash (attnviz.views.markdown.md escapes all of it)."""
    out, i = [], 0
    while i < len(md):
        if md[i] == "\\":
            i += 2
            continue
        if md[i] in string.punctuation:
            out.append(md[i])
        i += 1
    return out


@settings(max_examples=300, deadline=None)
@given(QUERIES)
def test_the_url_parser_never_raises(pairs):
    state, warnings = parse(dict(pairs))
    assert state is not None
    names = {w.name for w in warnings}
    assert names <= set(NAMES)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(NUMERIC + tuple(CHOICES)), GARBAGE)
def test_every_value_not_taken_is_named(name, value):
    _, warnings = parse({name: value})
    assert [w.name for w in warnings] == [name]
    assert value[:30].replace("\n", " ") in warnings[0].text  # quoted as given, so the user can find it


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(tuple(CHOICES)), st.data())
def test_valid_values_are_taken_silently(name, data):
    value = data.draw(st.sampled_from(CHOICES[name]))
    state, warnings = parse({name: value})
    assert not warnings and state.value(name) == value


PAGES = ["explorer", "step_by_step", "mask_lab", "cross_attention", "verify", "gradients", "why_scale",
         "image_patches", "audio_frames", "graph_nodes"]


@pytest.mark.parametrize("page", PAGES)
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pairs=st.lists(st.tuples(st.sampled_from(NAMES), NASTY | GARBAGE), min_size=1, max_size=4))
def test_every_page_survives_a_hostile_link(page, pairs):
    query = urlencode(pairs)
    at = app(query, page=None if page == "explorer" else f"app_pages/{page}.py", timeout=120)
    assert not at.exception, [e.value for e in at.exception]
    for w in at.warning:
        assert not unescaped_punctuation(w.value), w.value
    assert not any("evil.example" in m.value and "\\" not in m.value for m in at.markdown)


# --- the CLI ------------------------------------------------------------------------

FLAGS = st.sampled_from(["--text", "--heads", "--d-model", "--mask", "--window", "--pad-to", "--seed", "--dropout",
                         "--tokenize", "--device", "--view", "--head", "--query", "--seq", "--colors", "--page",
                         "--source", "--masks", "--grad-of", "--width", "--height", "--scale", "--theme",
                         "--from-url"])


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(FLAGS, NASTY | GARBAGE | st.integers(-5, 600).map(str)), max_size=5))
def test_cli_exits_0_or_2_without_a_traceback(tmp_path, capsys, flags):
    argv = ["render", "--text", "I love AI", "--heads", "2", "--d-model", "16"]
    for flag, value in flags:
        argv += [flag, value]
    argv += ["--out", str(tmp_path / "fig.json")]
    code = cli.main(argv)
    err = capsys.readouterr().err
    assert code in (0, 2) and "Traceback" not in err
    if code == 2:
        assert len(err.strip().splitlines()) == 1 and err.startswith("attnviz: ")


TOML_VALUES = st.one_of(st.integers(-10**6, 10**6), st.floats(allow_nan=False, allow_infinity=False),
                        st.booleans(), st.text(max_size=20), st.lists(st.integers(), max_size=2))
SPEC_KEYS = st.sampled_from(["heads", "d_model", "mask", "window", "seed", "view", "head", "query", "scale", "width",
                             "height", "theme", "out", "page", "from_url", "masks", "colors", "bogus"])


def toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return '"' + v.encode("unicode_escape").decode("ascii").replace('"', '\\"') + '"'
    if isinstance(v, list):
        return "[" + ", ".join(map(str, v)) + "]"
    return repr(v)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.dictionaries(SPEC_KEYS, TOML_VALUES, max_size=3), min_size=1, max_size=4))
def test_a_batch_writes_its_good_entries_whatever_the_bad_ones_hold(tmp_path, capsys, bad_entries):
    import shutil

    shutil.rmtree(tmp_path / "docs", ignore_errors=True)
    folder = tmp_path / "docs"
    folder.mkdir()
    lines = ['[defaults]', 'text = "I love AI"', "heads = 2", "d_model = 16"]
    lines += ["[[figure]]", 'out = "good-0.json"']
    for entry in bad_entries:
        lines.append("[[figure]]")
        lines += [f"{k} = {toml_value(v)}" for k, v in entry.items()]
    lines += ["[[figure]]", 'out = "good-1.csv"']
    spec = folder / "spec.toml"
    spec.write_text("\n".join(lines), encoding="utf-8")
    try:
        tomllib.loads(spec.read_text())
    except tomllib.TOMLDecodeError:
        return  # not a spec at all; covered by test_cli
    code = cli.run_spec(spec)
    err = capsys.readouterr().err
    assert code in (0, 2) and "Traceback" not in err
    assert (folder / "good-0.json").exists() and (folder / "good-1.csv").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["docs"]  # nothing written outside the spec's folder


@pytest.mark.parametrize("out", ["/tmp/attnviz-escape.json", "../escape.json", "a/../../escape.json", 5, ""])
def test_spec_out_must_stay_inside_the_folder(tmp_path, capsys, out):
    inner = tmp_path / "docs"
    inner.mkdir()
    spec = inner / "spec.toml"
    spec.write_text(f'[[figure]]\ntext = "a b"\nout = {toml_value(out)}\n[[figure]]\ntext = "a b"\nout = "ok.json"\n')
    assert cli.run_spec(spec) == 2
    err = capsys.readouterr().err
    assert re.search(r"`out`", err) and "Traceback" not in err
    assert (inner / "ok.json").exists() and not (tmp_path / "escape.json").exists()
    assert not (tmp_path.parent / "escape.json").exists()
