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


# A page that runs a background job with progress, on a model kind of its own, reading an uploaded file. The kind
# is registered the way a real kind is (attnviz.models.register); the job is declared in the page's module with
# its share of the workers; the script only lays out what the module gives.
JOB_MODULE = '''
import hashlib
import json
import time
from dataclasses import dataclass

import plotly.graph_objects as go

from attnviz import jobs
from attnviz.models import Cap, Kind, register
from attnviz.settings.spec import OWN, setting


class Echo(Kind):
    """Models named echo-…: they read text, patch and have two stacks, a set no other offered model has."""

    name, what = "echo", "an echo"

    def claims(self, model):
        return model.startswith("echo-")

    def caps(self, model):
        return frozenset({Cap.TEXT, Cap.PATCHABLE, Cap.STACKS})

    def key(self, model):
        return ("echo", model)

    def offered(self):
        return ["echo-one"]


register(Echo())
NEEDS = frozenset({Cap.TEXT, Cap.PATCHABLE, Cap.STACKS})
JOBS = jobs.Jobs("throwaway-count", share=(1, 2, 4))  # its share of the workers: one running, two waiting


@dataclass(frozen=True)
class Settings:
    tries: int = setting(3, lo=1, hi=9, pages=OWN, label="Tries", help="How many bars.")


def count_job(model, tries, data):
    """The page's job: (model, tries, the file) -> a bar per try, reported as it goes."""
    key = ("count", model, tries, hashlib.sha256(data).hexdigest())

    def work(job):
        out = []
        for i in range(tries):
            job.report((i + 1) / tries, "counting")
            time.sleep(0.05)
            out.append(len(data) * (i + 1))
        return out

    return JOBS.ask(key, work)


def bars(state, data):
    job = count_job(state.model, state.throwaway.tries, data or b"")
    job.done.wait(30)
    return job.value


def main_figure(state, style, data=None):
    return go.Figure(go.Bar(y=bars(state, data)))


def numbers(state, fmt, data=None):
    return json.dumps({"model": state.model, "bars": bars(state, data)}).encode() if fmt == "json" else None
'''

JOB_DRIVER = '''
import json, sys, types

from attnviz.views import catalogue

module = types.ModuleType("attnviz.views.throwaway")
exec(MODULE, module.__dict__)
sys.modules["attnviz.views.throwaway"] = module
line = catalogue.Page("throwaway", "throwaway", "throwaway.py", "Throwaway", "science", random=False,
                      needs=module.NEEDS, file="notes", module="throwaway", reads=("model",),
                      settings=(("throwaway", "Settings"),))
catalogue.PAGES = (*catalogue.PAGES, line)  # the one line of the table
catalogue.PAGE_NAMES = tuple(p.name for p in catalogue.PAGES)
catalogue.FILE_PAGES = {p.file: p.name for p in catalogue.PAGES if p.file}

from attnviz.views.state import ViewState, parse_url  # composed from the table as it is now

out = {"models": catalogue.models_for(line), "why_random": catalogue.why_not(line, "random"),
       "why_tiny": catalogue.why_not(line, "watch-it-learn")}
state = ViewState.of(model="echo-one", tries=4)
out["link"] = state.query_string("throwaway")
out["round_trip"] = parse_url(out["link"])[0] == state and parse_url(out["link"])[1] == []

from attnviz import cli

notes = sys.argv[3]
out["json_code"] = cli.main(["render", "--page", "throwaway", "--notes", notes, "--tries", "4", "--out", sys.argv[1]])
out["html_code"] = cli.main(["render", "--notes", notes, "--tries", "2", "--out", sys.argv[2]])
out["bad_model"] = cli.main(["render", "--page", "throwaway", "--model", "random", "--notes", notes,
                             "--out", sys.argv[1] + ".x"])

from streamlit.testing.v1 import AppTest


def script():
    import streamlit as st

    from attnviz.views import throwaway as T
    from attnviz.views.catalogue import page
    from ui import session, widgets
    from ui.sidebar import sidebar

    session.restore()
    session.keep("throwaway")
    sidebar(page("throwaway"))
    s = session.current()
    data = b"four"  # the upload, as the file uploader hands it over
    job = T.count_job(s.model, s.throwaway.tries, data)
    widgets.job_value(job, "Counting: {:.0%}".format(job.fraction))
    st.plotly_chart(T.main_figure(s, None, data), key="bars")


at = AppTest.from_function(script, default_timeout=60)
at.query_params["model"] = "echo-one"
at.query_params["tries"] = "4"
at.run()
out["first_progress"] = [p.proto.text for p in at.get("progress")]
for job in module.JOBS.jobs():  # the page's job (the CLI's finished before)
    job.done.wait(30)
at.run()
out["exception"] = [e.message for e in at.exception]
out["charts"] = len(at.get("plotly_chart"))
out["sidebar_models"] = list(at.sidebar.selectbox(key="model").options)
out["query"] = dict(at.query_params)
print(json.dumps(out))
'''


def test_a_throwaway_job_page_on_a_model_kind_of_its_own_reading_a_file(tmp_path):
    """The page contract for a page that runs a background job with progress, on a model kind registered as a
    real one is, reading a file: its sidebar offers only the models with its capabilities (the kind's own name
    among them, no other file touched), every other model is refused in its kind's words, its link round-trips,
    its job shows its progress and then its chart, and ``render --page`` (with the file's flag, which the table
    line declares) writes its JSON and its figure, refusing a model it cannot run in one line."""
    driver = tmp_path / "driver.py"
    driver.write_text("MODULE = " + repr(textwrap.dedent(JOB_MODULE)) + "\n" + JOB_DRIVER, encoding="utf-8")
    notes = tmp_path / "notes.txt"
    notes.write_bytes(b"seven b")
    p = subprocess.run([sys.executable, str(driver), str(tmp_path / "x.json"), str(tmp_path / "x.html"), str(notes)],
                       capture_output=True, text=True, cwd=ROOT, timeout=300,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert p.returncode == 0, p.stderr[-3000:]
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert out["models"] == ["echo-one"]  # only the kind whose capabilities hold the page's needs
    assert out["why_random"] == "has no tokenizer of its own to read a text with"  # the first need it lacks
    assert out["why_tiny"].startswith("reads its own numbered tokens, not a text")  # the tiny model's own words
    assert out["link"] == "model=echo-one&tries=4" and out["round_trip"]
    assert out["json_code"] == 0, p.stderr
    assert json.loads((tmp_path / "x.json").read_text()) == {"model": "echo-one", "bars": [7, 14, 21, 28]}
    assert out["html_code"] == 0 and "plotly" in (tmp_path / "x.html").read_text()  # --notes alone opens the page
    assert out["bad_model"] == 2 and "Model random has no tokenizer of its own to read a text with" in p.stderr
    assert out["first_progress"] and out["first_progress"][0].startswith("Counting")  # its job's progress first
    assert out["exception"] == [] and out["charts"] == 1  # then its chart
    assert out["sidebar_models"] == ["echo-one"] and out["query"] == {"model": "echo-one", "tries": "4"}
