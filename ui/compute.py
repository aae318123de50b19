"""Cached computation and error display shared by the pages."""

from __future__ import annotations

from dataclasses import asdict

import streamlit as st

from attnviz import AttentionConfig, AttentionResult, compute


@st.cache_resource(max_entries=24, show_spinner=False)
def _cached(**config) -> AttentionResult:
    # Keyed on plain values; the result is shared read-only between reruns and pages,
    # so changing only a view (head, query, colours) never recomputes.
    return compute(AttentionConfig(**config))


def run(config: AttentionConfig) -> AttentionResult:
    """The result for ``config``, or a clear message on the page and a stop."""
    try:
        return _cached(**asdict(config))
    except ValueError as e:
        st.error(str(e), icon="⚠️")
    except Exception as e:  # noqa: BLE001 - never a traceback in the browser
        st.error(f"The computation failed: {type(e).__name__}: {e}", icon="⚠️")
    st.stop()
    raise AssertionError("unreachable")  # st.stop() raises


def chart(fig, *, key: str, filename: str) -> None:
    """A Plotly chart whose toolbar saves a PNG under a meaningful name."""
    st.plotly_chart(
        fig, key=key, theme=None, width="stretch",
        config={"displaylogo": False,
                "toImageButtonOptions": {"format": "png", "filename": filename, "scale": 2}},
    )
