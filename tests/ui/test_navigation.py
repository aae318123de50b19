"""ui.navigation: the st.Page objects are made once per language; each run gets its own copies."""


def test_each_run_gets_its_own_copies_of_pages_made_once():
    """``ui.navigation`` makes the st.Page objects once per language; each run's copies equal
    freshly made pages (a Streamlit upgrade that adds state to Page.__init__ fails here)."""
    from streamlit.testing.v1 import AppTest

    def script():
        import streamlit as st

        from ui.navigation import _make, app_pages

        first, second, fresh = app_pages(), app_pages(), _make()
        st.text(str(all(first[k] is not second[k] for k in first)))
        st.text(str(all(vars(first[k]) == vars(fresh[k]) for k in first)))
        st.text(str(sorted(first) == sorted(fresh)))

    at = AppTest.from_function(script).run()
    assert not at.exception
    assert [t.value for t in at.text] == ["True", "True", "True"]
