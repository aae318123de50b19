"""The house's own rules, and the bugs its rebuild fixed (each would fail before the fix)."""

from __future__ import annotations

import ast
import functools
import json
import re
import sys
import tomllib
from pathlib import Path

import pytest

from attnviz import limits
from attnviz.models import registry as M
from attnviz.views.state import SETTINGS, ViewState, parse

ROOT = Path(__file__).resolve().parent.parent


def _imports(folder: Path) -> dict[str, set[str]]:
    """Every module imported anywhere in ``folder``'s Python files (nested imports too)."""
    out: dict[str, set[str]] = {}
    for path in folder.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                out.setdefault(name, set()).add(str(path.relative_to(ROOT)))
    return out


def test_every_third_party_import_of_the_package_is_declared():
    """In the dependencies, or in an extra (an import that says how to install it when absent)."""
    from importlib.metadata import packages_distributions

    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    optional = [d for extra in meta["project"].get("optional-dependencies", {}).values() for d in extra]
    declared = {re.split(r"[<>=\[ ;]", d)[0].lower() for d in [*meta["project"]["dependencies"], *optional]}
    dists = packages_distributions()
    missing = {}
    for module, where in _imports(ROOT / "attnviz").items():
        top = module.split(".")[0]
        if top in sys.stdlib_module_names or top == "attnviz":
            continue
        names = {d.lower() for d in dists.get(top, [top])}
        if not names & declared:
            missing[top] = sorted(where)
    assert not missing, f"imported but not in pyproject.toml's dependencies: {missing}"


# --- the floors and the arrows between them ----------------------------------------------

PRODUCT = ("attnviz", "ui", "app_pages")  # the house; tests/, bench/, scripts/ and deploy/ stand beside it


def _product_files() -> list[Path]:
    return [p for base in PRODUCT for p in sorted((ROOT / base).rglob("*.py"))] + [ROOT / "app.py"]


def _module(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")


def _unit(module: str) -> str:
    """What a floor holds: a package of attnviz (attnviz.views), a module at its top (attnviz.limits),
    the front door (attnviz: its __init__), ui, app_pages (with app.py)."""
    parts = module.split(".")
    if parts[0] == "attnviz":
        return "attnviz" if len(parts) == 1 or parts[1] in ("__init__",) else f"attnviz.{parts[1]}"
    return "app_pages" if parts[0] in ("app_pages", "app") else parts[0]


@functools.cache  # several tests read every file's arrows: parsed and walked once per run
def _arrows(path: Path) -> tuple[tuple[str, int, bool], ...]:
    """(the project's module it imports, line, inside a function) for every import of ``path``:
    at its top, inside a function, and through the lazy seam (``lazy.imported("…")``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    inside = {id(n) for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
              for n in ast.walk(f) if n is not f}
    out = []
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            base = ROOT.joinpath(*node.module.split("."))
            subs = [a.name for a in node.names if (base / f"{a.name}.py").exists() or (base / a.name).is_dir()]
            names = [f"{node.module}.{n}" for n in subs] + ([node.module] if len(subs) < len(node.names) else [])
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "imported"
              and isinstance(node.func.value, ast.Name) and node.func.value.id == "lazy" and node.args
              and isinstance(node.args[0], ast.Constant)):
            out.append((node.args[0].value, node.lineno, False))  # the seam: at its top or not, the same arrow
            continue
        out += [(n, node.lineno, id(node) in inside) for n in names if n.split(".")[0] in ("attnviz", "ui")]
    return tuple(out)


def floors() -> list[set[str]]:
    """The package order the README gives, from the bottom up (its line "Floors, from the bottom up")."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    line = next(line for line in text.splitlines() if line.startswith("Floors, from the bottom up:"))
    order = line.split(":", 1)[1]
    out = []
    for floor in order.split("→"):
        names = set(re.findall(r"`([\w./]+)`", floor))
        out.append({("app_pages" if n in ("app.py", "app_pages") else n if n in ("ui", "attnviz") else f"attnviz.{n}")
                    for n in names})
    return out


def _stated(unit: str) -> set[str] | None:
    """What a unit's docstring says it may import ("May import: attnviz.a, attnviz.b.c"): its
    package's __init__ or its module's own docstring; None for ui and the pages (every floor below)."""
    if unit in ("ui", "app_pages"):
        return None
    path = ROOT.joinpath(*unit.split("."))
    path = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
    if unit == "attnviz":
        path = ROOT / "attnviz" / "__init__.py"
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    m = re.search(r"May import:(.*?)(?:\n\s*\n|$)", doc, re.S)
    assert m, f"{path.relative_to(ROOT)} does not say what it may import (a line 'May import: …')"
    return set(re.findall(r"\battnviz(?:\.\w+)+", m.group(1)))


def test_every_floor_says_what_it_may_import_and_the_code_keeps_to_it():
    """Each package's docstring (each ground module's) states what it may import; every import of
    the project's own modules, inside functions too, keeps to it."""
    wrong = []
    for path in _product_files():
        unit = _unit(_module(path))
        stated = _stated(unit)
        if stated is None:
            continue
        for name, line, _inner in _arrows(path):
            if _unit(name) == unit:
                continue
            if not any(name == s or name.startswith(s + ".") or _unit(name) == s for s in stated):
                wrong.append(f"{path.relative_to(ROOT)}:{line} imports {name}, which {unit} does not say it may")
    assert not wrong, "\n".join(wrong)


def test_no_import_runs_up_the_floors_the_readme_gives():
    order = floors()
    floor_of = {u: i for i, f in enumerate(order) for u in f}
    units = {_unit(_module(p)) for p in _product_files()}
    assert units <= set(floor_of), f"the README's floors leave out {sorted(units - set(floor_of))}"
    up = []
    for path in _product_files():
        unit = _unit(_module(path))
        for name, line, _inner in _arrows(path):
            target = _unit(name)
            if target != unit and floor_of[target] > floor_of[unit]:
                up.append(f"{path.relative_to(ROOT)}:{line} ({unit}, floor {floor_of[unit]}) imports {name} "
                          f"(floor {floor_of[target]})")
    assert not up, "\n".join(up)


def test_the_projects_own_modules_are_imported_at_the_top_but_through_the_one_lazy_seam():
    from attnviz import lazy

    inner = [f"{p.relative_to(ROOT)}:{line} imports {name} inside a function"
             for p in _product_files() for name, line, inside in _arrows(p) if inside and not name.startswith("ui.")
             and not (p.name == "lazy.py")]
    assert not inner, "\n".join(inner)
    seam = [(p, name) for p in _product_files() for name, _line, _inside in _arrows(p)
            if name in lazy.REASONS and "lazy" in p.read_text(encoding="utf-8")]
    assert 0 < len(lazy.REASONS) <= 20 and all(len(why) > 20 for why in lazy.REASONS.values())
    assert {name for _p, name in seam} <= set(lazy.REASONS)
    with pytest.raises(LookupError, match="import it at the top"):
        lazy.imported("attnviz.views")


def test_the_package_has_no_import_cycle_and_no_cross_module_private_import():
    graph: dict[str, set[str]] = {}
    private = []
    for path in _product_files():
        mod = _module(path)
        deps = graph.setdefault(mod, set())
        for name, _line, _inside in _arrows(path):
            deps.add(name)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in ("attnviz", "ui"):
                private += [f"{mod} imports {node.module}.{a.name}" for a in node.names
                            if a.name.startswith("_") and a.name != "_" and node.module != mod]
    assert not private

    def cycle_from(start, node, seen):
        for nxt in graph.get(node, ()):
            if nxt == start:
                return [node, nxt]
            if nxt not in seen:
                seen.add(nxt)
                found = cycle_from(start, nxt, seen)
                if found:
                    return [node, *found]
        return None

    cycles = [c for m in graph if (c := cycle_from(m, m, {m}))]
    assert not cycles, cycles[0]


# --- one meaning per name --------------------------------------------------------------------

# Names that mean one thing in each place they are defined.
SAME_MEANING = {
    "main": "a command's entry point (python -m attnviz, python -m ui.server)",
    "parse": "a link's parameters parsed into settings: settings.url's for any settings class, views.state's for "
             "ViewState",
    # A page module's parts (attnviz.views.<page>), which the table of pages reads (attnviz.views.pages).
    "Settings": "a page's own settings, nested in ViewState",
    "main_figure": "a page's figure for the CLI: what render --page writes as .png or .svg",
    "page_result": "the run a page's downloads hold, for a page that runs an input of its own (views.pages' is "
                   "any page's, through its module's)",
    "all_figures": "every figure of a page that draws several: what render --page writes as .html",
    "numbers": "a page's own record, every number it draws: what render --page writes as .json",
}
# Module names at several floors, one topic each: its numbers, its figures, its page's views.
TOPICS = {"contributions", "longseq", "modality", "qkmap", "roles", "learn", "patching", "longcontext", "circuit",
          "gradients", "verify", "lens",
          "attention_file"}


def test_one_meaning_per_name_across_the_packages():
    defined: dict[str, set[str]] = {}
    stems: dict[str, set[str]] = {}
    for path in _product_files():
        if not path.is_relative_to(ROOT / "attnviz") and not path.is_relative_to(ROOT / "ui"):
            continue
        mod = _module(path)
        if path.stem != "__init__":
            stems.setdefault(path.stem, set()).add(mod)
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and not node.name.startswith("_"):
                defined.setdefault(node.name, set()).add(mod)
    twice = {n: sorted(m) for n, m in defined.items() if len(m) > 1 and n not in SAME_MEANING}
    assert not twice, twice
    modules = {n: sorted(m) for n, m in stems.items() if len(m) > 1 and n not in TOPICS}
    assert not modules, modules


# --- tests a newcomer can find ----------------------------------------------------------------

def test_tests_mirror_the_packages():
    """The tests of ``attnviz/<package>/<module>.py`` are in ``tests/<package>/test_<module>.py``
    (``test_<module>_<topic>.py`` for a part of them); of ``attnviz/<module>.py`` in
    ``tests/test_<module>.py``; of ``ui/<module>.py`` in ``tests/ui/``, of a page in
    ``tests/app_pages/``, of ``deploy/serve.py`` in ``tests/deploy/``. Tests of the whole app (AppTest
    across pages, Chromium, the websocket, fuzzing every door) are in ``tests/app/``; helpers in
    ``tests/support/``. The house's own rules are here."""
    orphans = []
    for path in sorted((ROOT / "tests").rglob("test_*.py")):
        rel = path.relative_to(ROOT / "tests")
        if rel.parts[0] in ("app", "support") or rel.name == "test_house.py":
            continue
        folder = rel.parent.parts
        base = {"ui": ROOT / "ui", "app_pages": ROOT / "app_pages", "deploy": ROOT / "deploy"}.get(
            folder[0] if folder else "", ROOT / "attnviz" / Path(*folder) if folder else ROOT / "attnviz")
        stem = rel.stem.removeprefix("test_")
        candidates = [stem[:i] for i in range(len(stem), 0, -1) if i == len(stem) or stem[i] == "_"]
        if not any((base / f"{c}.py").is_file() for c in candidates):
            orphans.append(str(rel))
    assert not orphans, f"test files named for no module (see this test's docstring for the rule): {orphans}"


def test_the_tests_leave_the_tree_as_they_found_it():
    """Screenshots go to browserkit's folder, ignored by git unless ``make screenshots`` names
    docs/screenshots; no test builds a path into docs/ to write there."""
    import subprocess

    from tests.support import browserkit

    default = browserkit.ROOT / "build" / "screenshots"
    assert browserkit.SHOTS == default or browserkit.SCREENSHOTS_ENV in __import__("os").environ
    ignored = subprocess.run(["git", "check-ignore", "-q", str(default)], cwd=ROOT).returncode == 0
    assert ignored, "build/screenshots is not ignored by git"
    into_docs = re.compile(r"""["']docs["']\s*/\s*["']screenshots["']|docs/screenshots""")
    writers = [str(p.relative_to(ROOT)) for p in (ROOT / "tests").rglob("*.py")
               if into_docs.search(p.read_text(encoding="utf-8")) and p.name != "test_house.py"]
    assert not writers, writers
    make = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert "ATTNVIZ_SCREENSHOTS=$(CURDIR)/docs/screenshots" in make  # make screenshots writes the docs' ones


def _marked_minilm(node: ast.AST) -> bool:
    return any("mark.minilm" in ast.unparse(d) for d in getattr(node, "decorator_list", []))


# Tests that name MiniLM without running it: what happens when its files are missing, and this check.
MINILM_NOT_RUN = {"test_missing_model_files_say_how_to_install",
                  "test_every_test_that_runs_minilm_carries_the_one_marker"}


def test_every_test_that_runs_minilm_carries_the_one_marker():
    """``@pytest.mark.minilm`` (conftest.py skips them, saying how to install the files, where the
    files are missing): none of them fails without it, and none defines a skip of its own."""
    unmarked, own = [], []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        tree = ast.parse(text)
        module_marked = re.search(r"^pytestmark\s*=.*mark\.minilm", text, re.M) is not None
        if re.search(r"skipif\([^)]*package_dir", text) and path.name != "conftest.py":
            own.append(str(path.relative_to(ROOT)))
        for node in tree.body:
            if not (isinstance(node, ast.FunctionDef) and node.name.startswith("test_")):
                continue
            source = ast.get_source_segment(text, node) or ""
            if re.search(r"minilm|MINILM", source) and not (module_marked or _marked_minilm(node)) \
                    and node.name not in MINILM_NOT_RUN:
                unmarked.append(f"{path.relative_to(ROOT)}::{node.name}")
    assert not own, f"a MiniLM skip of their own: {own}"
    assert not unmarked, f"tests that run MiniLM without @pytest.mark.minilm: {unmarked}"


def test_no_module_of_the_package_is_over_400_lines():
    long = {str(p.relative_to(ROOT)): n for p in (ROOT / "attnviz").rglob("*.py")
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > 400}
    assert not long


def test_pages_do_no_tensor_math():
    for page in (ROOT / "app_pages").glob("*.py"):
        text = page.read_text(encoding="utf-8")
        assert not re.search(r"^\s*(import|from) torch", text, re.M), page
        assert not re.search(r"\.(numpy|sum|any|all|mean)\(\)|mask_matrix|\.steps\.attention", text), page


# What a page may import of attnviz: the views (its entry, its figures, its settings), the words and the bounds.
PAGE_MAY_IMPORT = ("attnviz.views", "attnviz.i18n", "attnviz.limits")


def test_a_page_reaches_the_library_through_the_views_only():
    """No file in app_pages/ imports attnviz.analysis, core, models, inputs, learn, plots or run (or any other
    floor below the views): a page reaches the library through its entry in attnviz.views."""
    wrong = {}
    for page in sorted((ROOT / "app_pages").glob("*.py")):
        for node in ast.walk(ast.parse(page.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module] if node.module != "attnviz" else [f"attnviz.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            for name in names:
                if name.split(".")[0] == "attnviz" and not name.startswith(PAGE_MAY_IMPORT):
                    wrong.setdefault(page.name, []).append(name)
    assert not wrong, wrong


def test_ui_is_glue_that_names_no_page():
    """ui/ holds what every page shares: no string in it is a page's name (a page's difference is a flag of
    its entry in the table, like ``Page.stack``; the home page is ``catalogue.HOME``)."""
    from attnviz.views.catalogue import PAGE_NAMES

    named = {}
    for path in sorted((ROOT / "ui").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in PAGE_NAMES:
                named.setdefault(path.name, []).append((node.lineno, node.value))
    assert not named, named


def test_every_page_is_an_entry_of_the_table_and_every_entry_a_page():
    from attnviz.views.catalogue import PAGES

    assert sorted(p.script for p in PAGES) == sorted(f.name for f in (ROOT / "app_pages").glob("*.py"))


def test_a_setting_reaches_the_url_the_cli_the_sidebar_and_validation_from_its_declaration():
    from attnviz.cli import build_parser

    help_text = build_parser()._subparsers._group_actions[0].choices["render"].format_help()
    for url, entry in SETTINGS.items():
        assert entry.spec.flag in help_text, url
    state = ViewState.of(window=5, frame=512)
    assert parse(state.to_query()) == (state, [])
    with pytest.raises(ValueError, match=f"window must be between 0 and {limits.MAX_WINDOW}"):
        state.config.with_(window=limits.MAX_WINDOW + 1).validate()


@pytest.mark.minilm
def test_a_link_to_a_pretrained_head_past_the_random_models_count_opens_that_head():
    state, warnings = parse({"model": M.MINILM, "head": "7"})
    assert warnings == [] and state.head == 7
    from tests.support.apphelp import app, figures

    at = app(f"model={M.MINILM}&head=7&view=head", timeout=120)
    assert at.session_state["head"] == 7
    assert not [w.value for w in at.warning if "head" in w.value]
    title = figures(at)[-1]["layout"]["title"]["text"]
    assert "head 7" in title.lower() or "7" in title


@pytest.mark.minilm
def test_download_names_carry_the_models_own_heads_and_width():
    from attnviz import AttentionConfig, compute
    from attnviz.views.selection import file_stem

    result = compute(AttentionConfig(text="a cat", model=M.MINILM))
    stem = file_stem(ViewState.of(model=M.MINILM, head=7), "head", result)
    assert stem.endswith("-12h-384d") and "head7" in stem and "minilm-l6" in stem


def test_the_graph_json_names_what_the_adjacency_blocks():
    from attnviz.analysis.describe import describe_head
    from attnviz.views.exports import run_json
    from attnviz.views.modality import graph_run

    inp, result = graph_run(ViewState.of(graph="path", graph_mask="adjacency"))
    data = json.loads(run_json(result))
    assert data["config"]["mask"] == "adjacency" and data["config"]["kind"] == "graph"
    text = " ".join(d for seq in data["descriptions"] for d in seq["heads"])
    assert "adjacency mask" in text and "none mask" not in text
    assert "adjacency" in describe_head(result, 0, 0)


def test_the_docs_state_the_token_cap_that_the_code_enforces():
    docs = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    for path in docs:
        text = path.read_text(encoding="utf-8")
        for m in re.finditer(r"(?:cap|limit)[^.]{0,40}?\((\d[\d,]*) by default", text):
            assert int(m.group(1).replace(",", "")) == limits.MAX_TOKENS, (path.name, m.group(0))
        assert "512 by default" not in text, path.name


def test_no_pages_folder_beside_the_app():
    """A folder named pages/ beside app.py, even an empty one, sends a fresh process's first
    run through Streamlit's legacy folder router: "Page not found" (streamlit#8860)."""
    assert not (ROOT / "pages").exists()
    assert (ROOT / "app_pages" / "explorer.py").is_file()
