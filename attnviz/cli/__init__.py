"""The command line: ``python -m attnviz render ...`` (figures for documentation) and
``python -m attnviz learn ...`` (train the tiny model of Watch it learn).

    python -m attnviz render --text "I love AI" --heads 4 --mask causal --view grid --out fig.png
    python -m attnviz render --from-url "http://localhost:8501/?text=...&heads=2&view=head" --out fig.svg
    python -m attnviz render --from-url "http://localhost:8501/mask-lab?masks=causal,window" --out masks.png
    python -m attnviz render --spec docs/figures.toml

Every flag is a setting of the app's links, made from its one declaration
(``attnviz.views.state``), so a link and a build give the same figure. Bad input: one line on
stderr and exit code 2, no traceback, no partial file.

- ``render``: one figure or its numbers (``attnviz.cli.render``);
- ``spec``: a batch of them from a TOML file (``attnviz.cli.batch``);
- ``learn``: a training's record and figures (``attnviz.cli.learn``).

May import: attnviz.atomic, attnviz.i18n, attnviz.inputs (the attention file format), attnviz.learn,
attnviz.limits, attnviz.models (the registry: a model's name to its folder, as the run finds it),
attnviz.notebook, attnviz.plots, attnviz.settings, attnviz.views. Never ``ui`` or Streamlit.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from attnviz.cli.batch import run_spec
from attnviz.cli.learn import learn_command
from attnviz.cli.render import DEFAULT_WIDTH, RenderJob, UsageError, one_line, read_input, run_job, state_from
from attnviz.learn.train import LearnSettings
from attnviz.plots.export import ExportError, ImageExporter
from attnviz.settings.flags import add_flags
from attnviz.settings.url import table
from attnviz.views.catalogue import FIGURE_VIEWS, FILE_PAGES, HOME, PAGE_NAMES, PAGES, page_of
from attnviz.views.state import SETTINGS, own


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2 (argparse prints usage otherwise)
        raise UsageError(message[0].upper() + message[1:] + ". See --help.")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="attnviz", description="See multi-head attention work: figures from the command line.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    r = sub.add_parser("render", help="render one figure (or a batch from a spec file)",
                       description="Render a view of an attention run to .png, .svg, .html, .json or .csv.")
    add_flags(r, SETTINGS, _FLAG_NOTES)
    r.add_argument("--page", choices=PAGE_NAMES, help="whose main figure to render (default: from --from-url, "
                                                       "else the explorer)")
    for flag, page in FILE_PAGES.items():  # the file each page reads, as its entry of the table names it
        r.add_argument(f"--{flag}", dest=flag.replace("-", "_"), help=FILE_HELP.get(flag, f"the {page} page's file"))
    r.add_argument("--from-url", dest="from_url", help="a link (or query string) of the app to reproduce")
    r.add_argument("--out", help="output file; the extension picks the format")
    r.add_argument("--width", type=int, default=DEFAULT_WIDTH)
    r.add_argument("--height", type=int)
    r.add_argument("--scale", type=float, default=1.0)
    r.add_argument("--theme", default="light", help="light | dark")
    r.add_argument("--spec", help="a TOML file with a [[figure]] table per figure")
    lr = sub.add_parser("learn", help="train the tiny model of 'Watch it learn' and write its record and figures",
                        description="Train an attention-only model deterministically; write the checkpoints as JSON "
                                    "and the loss, scores and heads as figures.")
    add_flags(lr, table(LearnSettings), name=lambda url, entry: entry.path[-1])  # --layers, --d-model, …
    lr.add_argument("--json", help="write the record here: config, checkpoints, probe")
    lr.add_argument("--out", help="a folder for loss.png, scores-*.png, heads-step*.png and heads.html")
    return p


# The words of the file flags of the pages that ship (a page's entry names its file: ``Page.file``).
FILE_HELP = {"image": "image patches: a PNG or JPEG file (or --image-sample NAME)",
             "audio": "audio frames: a WAV file (or --audio-sample NAME)",
             "attention": "an attention file (.safetensors or .npz, from attnviz.save_attention)",
             "text-file": "long-context: a UTF-8 text file (the model reads it whole)"}

# Flags whose meaning in the CLI goes beyond the link's setting.
_FLAG_NOTES = {
    "model": "; or (the CLI and the API only) a model folder: BERT in attnviz's layout, "
             "or any folder "
             "transformers loads (GPT-2, LLaMA, BERT, RoBERTa, T5, BART, ViT), or a Hugging Face id "
             "(org/name) in the local hub cache",
    "projections": "; --no-projections also turns them off for image, audio and graph inputs",
    "view": f" (default grid; the figure views: {' | '.join(FIGURE_VIEWS)})",
}


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        if args.command == "learn":
            try:
                return learn_command(args)
            except ValueError as e:
                raise UsageError(str(e)) from None
        if args.spec:
            return run_spec(Path(args.spec))
        if not args.out:
            raise UsageError("Give --out FILE (its extension picks the format) or --spec FILE.")
        if args.input_projections is None:  # one flag for text and other inputs alike
            args.input_projections = args.projections
        settings = {k: getattr(args, k) for k in SETTINGS}
        page, data = _input_page(args)
        page = args.page or page or (page_of(args.from_url) if args.from_url else HOME)
        job = RenderJob(state_from(settings, args.from_url, page), Path(args.out), args.width, args.height,
                  args.scale, args.theme, page, data)
        with ImageExporter() as exporter:
            run_job(job, exporter)
        return 0
    except (UsageError, ExportError, OSError, ValueError) as e:
        print(f"attnviz: {one_line(e)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except Exception as e:  # noqa: BLE001 - a build log gets one line, never a traceback
        print(f"attnviz: {one_line(e)}", file=sys.stderr)
        return 2


def _input_page(args) -> tuple[str | None, bytes | None]:
    """The page a render's flags name, and the file it reads: a file's flag (``Page.file``: --image, --audio,
    --attention, --text-file), or a setting that only a page of other inputs reads (--patch, --hop, --edges…)."""
    for flag, page in FILE_PAGES.items():
        path = getattr(args, flag.replace("-", "_"))
        if path:
            return page, read_input(path, "--" + flag)
    for entry in PAGES:
        if entry.input and any(getattr(args, k, None) is not None for k in own(entry.name)):
            return entry.name, None
    return None, None


if __name__ == "__main__":
    sys.exit(main())
