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
