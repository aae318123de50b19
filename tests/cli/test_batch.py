"""Spec files (python -m attnviz render --spec): a malformed file, and a batch with a broken entry."""

from tests.support.clirun import run_cli, run_process


def run(*args, cwd=None, process=False):
    return (run_process if process else run_cli)("render", *args, cwd=cwd)


def test_malformed_spec(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[[figure]\nout = ")
    code, _, err = run("--spec", str(bad), process=True)  # once as a process of its own
    assert code == 2 and "not valid TOML" in err and len(err.strip().splitlines()) == 1
    empty = tmp_path / "empty.toml"
    empty.write_text("[defaults]\nheads = 2\n")
    code, _, err = run("--spec", str(empty))
    assert code == 2 and "no [[figure]]" in err


def test_batch_with_a_broken_entry_writes_the_rest(tmp_path):
    spec = tmp_path / "s.toml"
    spec.write_text('[defaults]\ntext = "I love AI"\nheads = 2\nd_model = 16\n'
                    '[[figure]]\nout = "a.json"\n'
                    '[[figure]]\nout = "b.json"\nheads = 5\n'
                    '[[figure]]\nout = "c.csv"\n')
    code, _, err = run("--spec", str(spec))
    assert code == 2
    assert (tmp_path / "a.json").exists() and (tmp_path / "c.csv").exists() and not (tmp_path / "b.json").exists()
    assert 'b.json: Setting heads="5" does not divide' in err and "1 of 3 figures failed" in err


def test_a_page_is_named_by_its_file_or_by_a_setting_only_it_reads(tmp_path):
    """The page a render opens comes from the table: a file's key (``Page.file``) in a spec, and on the command
    line any setting that one page of other inputs alone reads (not a list of a few flags per page)."""
    import json

    from attnviz.views.catalogue import FILE_PAGES, PAGES
    from attnviz.views.state import own

    assert set(FILE_PAGES) == {"image", "audio", "attention", "text-file"}
    for entry in (p for p in PAGES if p.input):
        assert own(entry.name), entry.name  # it has settings of its own to be named by
    # --patch-at is the image page's own: it alone opens the image page, whose record holds patches
    code, _, err = run_cli("render", "--patch-at", "3", "--out", str(tmp_path / "i.json"))
    assert code == 0, err
    assert json.loads((tmp_path / "i.json").read_text())["tokens"][0][0] == "r0c0"  # a patch, not a word
    (tmp_path / "t.txt").write_text("a " * 40)
    spec = tmp_path / "s.toml"
    spec.write_text('[[figure]]\nout = "l.json"\ntext_file = "t.txt"\n')
    code, _, err = run("--spec", str(spec))
    assert code == 0, err
    record = json.loads((tmp_path / "l.json").read_text())
    assert len(record["tokens"]) == 40 and "sink" in record  # the Long context page's numbers, for the file's words
