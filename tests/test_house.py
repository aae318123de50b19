"""The house's own rules, and the bugs its rebuild fixed (each would fail before the fix)."""

from __future__ import annotations

import ast
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
needs_minilm = pytest.mark.skipif(M._package_dir() is None, reason=f"the model's files are not installed: {M.INSTALL}")


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


def test_the_package_has_no_import_cycle_and_no_cross_module_private_import():
    graph: dict[str, set[str]] = {}
    private = []
    for path in (ROOT / "attnviz").rglob("*.py"):
        mod = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        deps = graph.setdefault(mod, set())
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("attnviz"):
                base = ROOT.joinpath(*node.module.split("."))
                # "from attnviz import limits" imports the module attnviz.limits
                subs = [a.name for a in node.names if (base / f"{a.name}.py").exists() or (base / a.name).is_dir()]
                deps.update(f"{node.module}.{n}" for n in subs)
                if len(subs) < len(node.names):
                    deps.add(node.module)
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


def test_no_module_of_the_package_is_over_400_lines():
    long = {str(p.relative_to(ROOT)): n for p in (ROOT / "attnviz").rglob("*.py")
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > 400}
    assert not long


def test_pages_do_no_tensor_math():
    for page in (ROOT / "app_pages").glob("*.py"):
        text = page.read_text(encoding="utf-8")
        assert not re.search(r"^\s*(import|from) torch", text, re.M), page
        assert not re.search(r"\.(numpy|sum|any|all|mean)\(\)|mask_matrix|\.steps\.attention", text), page


def test_a_setting_reaches_the_url_the_cli_the_sidebar_and_validation_from_its_declaration():
    from attnviz.cli import build_parser

    help_text = build_parser()._subparsers._group_actions[0].choices["render"].format_help()
    for url, entry in SETTINGS.items():
        assert entry.spec.flag in help_text, url
    state = ViewState.of(window=5, frame=512)
    assert parse(state.to_query()) == (state, [])
    with pytest.raises(ValueError, match=f"window must be between 0 and {limits.MAX_WINDOW}"):
        state.config.with_(window=limits.MAX_WINDOW + 1).validate()


@needs_minilm
def test_a_link_to_a_pretrained_head_past_the_random_models_count_opens_that_head():
    state, warnings = parse({"model": M.MINILM, "head": "7"})
    assert warnings == [] and state.head == 7
    from .apphelp import app, figures

    at = app(f"model={M.MINILM}&head=7&view=head", timeout=120)
    assert at.session_state["head"] == 7
    assert not [w.value for w in at.warning if "head" in w.value]
    title = figures(at)[-1]["layout"]["title"]["text"]
    assert "head 7" in title.lower() or "7" in title


@needs_minilm
def test_download_names_carry_the_models_own_heads_and_width():
    from attnviz import AttentionConfig, compute
    from attnviz.views.selection import file_stem

    result = compute(AttentionConfig(text="a cat", model=M.MINILM))
    stem = file_stem(ViewState.of(model=M.MINILM, head=7), "head", result)
    assert stem.endswith("-12h-384d") and "head7" in stem and "minilm-l6" in stem


def test_the_graph_json_names_what_the_adjacency_blocks():
    from attnviz.analysis.describe import describe_head
    from attnviz.views.files import run_json
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
