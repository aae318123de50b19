"""URL state: one parser for the app's links and the CLI's --from-url."""

import pytest

from attnviz.views.state import DEFAULTS, ViewState, parse, parse_url, query_dict


def test_round_trip_through_the_query_string():
    s = ViewState.of(text="I love AI\n<b>我</b>", heads=8, d_model=128, mask="causal+window", window=3, pad_to=9,
                  seed=42, positional=False, tokenize="char", dropout=0.25, colors="Cividis", head=7, query=2,
                  seq=1, view="mask", present=True, masks="padding,window", float64=True, grad_of="norm",
                  additive=True)
    back, warnings = parse_url("http://localhost:8501/mask-lab?" + s.query_string())
    assert back == s and warnings == []


def test_missing_parameters_take_defaults_silently():
    assert parse({}) == (DEFAULTS, [])


@pytest.mark.parametrize(
    "query, name, reason",
    [
        ("heads=3", "heads", "does not divide d_model=64"),
        ("d_model=7", "d_model", "must be one of"),
        ("mask=diag", "mask", "must be one of"),
        ("seed=-1", "seed", "must be between"),
        ("seed=x", "seed", "is not a number"),
        ("dropout=nan", "dropout", "must be between"),
        ("present=maybe", "present", "must be 1 or 0"),
        ("text=%20%20", "text", "is empty"),
        ("masks=causal,diag", "masks", "comma-separated"),
        ("device=tpu", "device", "not available"),
    ],
)
def test_invalid_values_fall_back_and_name_the_parameter(query, name, reason):
    state, warnings = parse_url(query)
    (w,) = warnings
    assert w.name == name and w.value == query_dict(query)[name] and f"{name}=" in w.text and reason in w.text
    assert state.value(name) == DEFAULTS.value(name)


def test_a_warning_is_its_values_and_the_apps_sentence_made_of_them():
    _state, (w,) = parse_url("seed=x")
    assert (w.name, w.value, w.reason, w.offered) == ("seed", "x", "is not a number", None)
    assert w.text == f'URL parameter seed="x" is not a number; using the default ({DEFAULTS.seed}).'
    _state, (w,) = parse_url("device=tpu")  # a value this machine does not offer: its own sentence
    offered = ", ".join(w.offered)
    assert w.name == "device" and w.value == "tpu" and "cpu" in w.offered and "tpu" not in w.offered
    assert w.reason == f"must be one of {offered}"
    assert w.text == (f'URL parameter device="tpu" is not available on this machine (available: {offered}); '
                      "running on cpu.")


def test_heads_follow_d_model_and_head_stays_in_range():
    state, warnings = parse_url("d_model=8&heads=16")
    assert state.d_model == 8 and state.heads == 4 and warnings  # 16 heads do not divide 8
    # A head past this run's count is the run's to bound (a pretrained model has more):
    # the link keeps it, and the views clamp it against the run (attnviz.views.selection).
    state, warnings = parse_url("heads=2&head=5")
    assert state.head == 5 and warnings == []


def test_query_dict_accepts_urls_and_bare_strings():
    assert query_dict("?a=1&b=") == {"a": "1", "b": ""}
    assert query_dict("https://x/y?a=2") == {"a": "2"} == query_dict("/y?a=2") == query_dict("a=2")
    assert parse({"heads": ["2", "8"]})[0].heads == 8  # repeated parameters: the last wins


def test_two_settings_under_one_link_name_are_refused():
    from dataclasses import dataclass

    from attnviz.settings.spec import setting
    from attnviz.settings.url import table

    @dataclass(frozen=True)
    class A:
        step: int = setting(0, lo=0, hi=3)

    @dataclass(frozen=True)
    class B:
        step: int = setting(1, lo=1, hi=9)

    @dataclass(frozen=True)
    class Both:
        a: A = A()
        b: B = B()

    with pytest.raises(TypeError, match="'step'"):
        table(Both)
    assert set(table(A)) == {"step"}  # one alone is fine
