"""attnviz.lazy: the one lazy seam; ``import attnviz`` stays light, the notebook API loads on first use."""

from __future__ import annotations

import sys

LAYERS, H, L = 2, 3, 4


def test_the_notebook_api_is_at_the_top_level_and_loaded_on_first_use():
    import subprocess

    code = ("import sys, attnviz; assert 'attnviz.notebook' not in sys.modules; "
            "f = attnviz.head_view; assert 'attnviz.notebook' in sys.modules; print(f.__module__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "attnviz.notebook.bertviz"
