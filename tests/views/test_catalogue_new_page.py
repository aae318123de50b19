"""A page is its entry: a throwaway page (a module with its settings class, its figure and its numbers, and
one line added to a copy of the table of pages) gets its sidebar, its link's round trip, the CLI's
``render --page`` and its JSON, with no other file touched. It runs in a process of its own, where the table
is extended before the state is composed from it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

MODULE = '''
from dataclasses import dataclass

import plotly.graph_objects as go

from attnviz.settings.spec import OWN, setting


@dataclass(frozen=True)
class Settings:
    tries: int = setting(3, lo=1, hi=9, pages=OWN, label="Tries", help="How many bars.")


def main_figure(state, style, data=None):
    return go.Figure(go.Bar(y=[state.seed + i for i in range(state.throwaway.tries)]))


def numbers(state, fmt, data=None):
    return json.dumps({"tries": state.throwaway.tries, "seed": state.seed}).encode() if fmt == "json" else None
'''

DRIVER = '''
import json, sys, types

from attnviz.views import catalogue

module = types.ModuleType("attnviz.views.throwaway")
exec("import json\\n" + MODULE, module.__dict__)
sys.modules["attnviz.views.throwaway"] = module
line = catalogue.Page("throwaway", "throwaway", "throwaway.py", "Throwaway", "science", module="throwaway",
                      reads=("d_model", "heads", "seed"), settings=(("throwaway", "Settings"),))
catalogue.PAGES = (*catalogue.PAGES, line)  # the one line of the table
catalogue.PAGE_NAMES = tuple(p.name for p in catalogue.PAGES)

from attnviz.views.state import ViewState, parse_url, reads  # composed from the table as it is now

out = {"reads": sorted(reads("throwaway"))}
state = ViewState.of(tries=5, seed=7)
out["link"] = state.query_string("throwaway")
out["round_trip"] = parse_url(out["link"])[0] == state and parse_url(out["link"])[1] == []

from attnviz import cli

out["json_code"] = cli.main(["render", "--page", "throwaway", "--tries", "5", "--seed", "7", "--out", sys.argv[1]])
out["html_code"] = cli.main(["render", "--page", "throwaway", "--tries", "4", "--out", sys.argv[2]])

from streamlit.testing.v1 import AppTest


def script():
    from attnviz.views.catalogue import page
    from ui import session
    from ui.sidebar import sidebar

    session.restore()
    session.keep("throwaway")
    sidebar(page("throwaway"))


at = AppTest.from_function(script, default_timeout=60).run()
out["exception"] = [e.message for e in at.exception]
out["sidebar"] = sorted(w.key for kind in ("number_input", "selectbox", "text_area", "slider", "segmented_control")
                        for w in getattr(at.sidebar, kind) if w.key)
print(json.dumps(out))
'''


def test_a_throwaway_page_is_one_module_and_one_line_of_the_table(tmp_path):
    driver = tmp_path / "driver.py"  # a file: AppTest reads its script's source
    driver.write_text("MODULE = " + repr(textwrap.dedent(MODULE)) + "\n" + DRIVER, encoding="utf-8")
    p = subprocess.run([sys.executable, str(driver), str(tmp_path / "x.json"), str(tmp_path / "x.html")],
                       capture_output=True, text=True, cwd=ROOT, timeout=300,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert p.returncode == 0, p.stderr[-3000:]
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert {"d_model", "heads", "seed", "tries"} <= set(out["reads"]) and "text" not in out["reads"]
    assert out["link"] == "seed=7&tries=5" and out["round_trip"]
    assert out["json_code"] == 0 and json.loads((tmp_path / "x.json").read_text()) == {"tries": 5, "seed": 7}
    assert out["html_code"] == 0 and "plotly" in (tmp_path / "x.html").read_text()
    assert out["exception"] == []
    assert {"d_model", "heads"} <= set(out["sidebar"]) and not {"text", "mask", "model"} & set(out["sidebar"])
