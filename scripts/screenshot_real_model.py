"""The docs' screenshots of the pages that open on the real model (SmolLM2-135M), taken in Chromium against a server
that offers it (``make screenshots`` runs this after the browser tests, whose own runs keep the real model out:
the suite loads it once, in its own module). Each page at 1366 × 768 as it first opens, its first screen, the
Logit lens in presenter mode at 1024 × 768, and the explorer's answer to a question.

    .venv/bin/python scripts/screenshot_real_model.py [--out docs/screenshots]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.browserkit import Profile, chromium_path, streamlit_server, wait_idle  # noqa: E402

QUESTION = "?model=smollm2-135m&text=What+is+the+capital+of+France%3F&generate=8&chat=1"
SHOTS = (  # (file, link, width, height, the text scrolled to the window's top, if any)
    ("logit-lens-smollm2.png", "logit-lens", 1366, 768, None),
    ("presenter-logit-lens-smollm2.png", "logit-lens?present=1", 1024, 768, None),
    ("patching-smollm2.png", "patching", 1366, 768, None),
    ("long-context-smollm2.png", "long-context", 1366, 768, None),
    ("qk-map-smollm2.png", "qk-map?model=smollm2-135m&layer=5", 1366, 768, None),
    ("generate-smollm2.png", QUESTION, 1366, 768, "wrote"),
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots")
    args = ap.parse_args()
    if chromium_path() is None:
        sys.exit("screenshot_real_model: no Chromium here (sudo apt-get install -y chromium)")
    from playwright.sync_api import sync_playwright

    env = {"ATTNVIZ_PACKAGED": "minilm-l6 smollm2-135m"}  # offered, whatever the environment says
    with streamlit_server(timeout=120, env=env) as base, sync_playwright() as pw, \
            tempfile.TemporaryDirectory() as profile:
        browser = Profile(pw, Path(profile))
        try:
            for name, link, width, height, scroll_to in SHOTS:
                with browser.tab(width, height) as page:
                    page.goto(f"{base}/{link}")
                    wait_idle(page, timeout=180_000)  # the model's first load, then the page's first reading
                    page.wait_for_function("() => !document.querySelector('[data-testid=stProgress]')",
                                           timeout=180_000)
                    wait_idle(page, timeout=180_000)
                    if scroll_to:
                        page.get_by_text(scroll_to).first.evaluate("e => e.scrollIntoView({block: 'start'})")
                        page.wait_for_timeout(500)
                    args.out.mkdir(parents=True, exist_ok=True)
                    page.screenshot(path=str(args.out / name))
                    print(args.out / name)
        finally:
            browser.close()


if __name__ == "__main__":
    main()
