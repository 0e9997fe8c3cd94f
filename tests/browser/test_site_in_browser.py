"""The built book as a reader meets it: every page opened in headless Chromium, served over
HTTP on the loopback address, with every request to another host refused (no network).

For each page: no JavaScript error, no raw TeX left once MathJax has rendered, every image
loaded, every internal link and anchor resolving; on each notebook page the Colab, JupyterHub
and Binder launch links point at this repository, branch and notebook. Screenshots of the
introduction, the ledger and the first notebook page of each chapter go to
``_build/screenshots/``.

Run by ``make test`` (and so by CI) after the book is built. The site defaults to the source
build that ``make test`` makes; ``REPROBOOK_SITE`` points at another (``_build/site/_build/html``
after ``make book``). Without Chromium (Debian's ``chromium``) or playwright the tests skip and
say why.
"""

from __future__ import annotations

import functools
import html.parser
import http.server
import os
import re
import shutil
import threading
import urllib.parse
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
SITE = Path(os.environ.get("REPROBOOK_SITE", ROOT / "_build" / "site-check" / "_build" / "html"))
SHOTS = ROOT / "_build" / "screenshots"
CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text())
CHROMIUM = (
    os.environ.get("REPROBOOK_CHROMIUM")
    or shutil.which("chromium")
    or shutil.which("chromium-browser")
)
SKIP_PAGES = {"genindex.html", "search.html"}


def _why_skip() -> str | None:
    if not CHROMIUM:
        return "no Chromium on this machine (apt-get install chromium): the browser test is skipped"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed: the browser test is skipped"
    if not (SITE / "index.html").exists():
        return (
            f"no built book at {SITE}: run `reprobook book --source-only` (make test does) "
            "or `make book`"
        )
    return None


pytestmark = pytest.mark.skipif(_why_skip() is not None, reason=_why_skip() or "")


def pages() -> list[Path]:
    if not SITE.exists():
        return []
    return sorted(
        p
        for p in SITE.rglob("*.html")
        if "_static" not in p.parts and "_sources" not in p.parts and p.name not in SKIP_PAGES
    )


class _Ids(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()

    def handle_starttag(self, tag, attrs):
        for k, v in attrs:
            if k in ("id", "name") and v:
                self.ids.add(v)


@functools.cache
def anchors_of(path: Path) -> frozenset[str]:
    parser = _Ids()
    parser.feed(path.read_text(encoding="utf-8", errors="replace"))
    return frozenset(parser.ids)


@pytest.fixture(scope="module")
def server():
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(SITE))

    class Quiet(handler.func):  # type: ignore[misc]
        def log_message(self, *args):
            pass

    httpd = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(Quiet, directory=str(SITE))
    )
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        yield b
        b.close()


class Tab:
    """One browser tab reused for every page: each visit clears what the last one saw. A fresh
    context per page (a new renderer process each time) took about a third more CPU."""

    def __init__(self, browser, base: str) -> None:
        self.context = browser.new_context(viewport={"width": 1280, "height": 900})
        self.page = self.context.new_page()
        self.base = base
        self.errors: list[str] = []
        self.refused: list[str] = []
        self.page.route("**/*", self._route)
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))

    def _route(self, r) -> None:
        if r.request.url.startswith(self.base):
            r.continue_()
        else:
            self.refused.append(r.request.url)
            r.abort()


@pytest.fixture(scope="module")
def tab(browser, server):
    t = Tab(browser, server)
    yield t
    t.context.close()


def visit(tab: Tab, rel: str, screenshot: Path | None = None) -> dict:
    """Open one page offline; return what the checks need."""
    page = tab.page
    page.goto("about:blank")  # nothing of the last page is left to report
    tab.errors.clear()
    tab.refused.clear()
    page.goto(f"{tab.base}/{rel}", wait_until="load")
    if rel == "index.html":  # the root page only redirects to the introduction: wait for it,
        page.wait_for_url("**/intro.html", wait_until="load")  # however slow the machine
    page.wait_for_load_state("load")
    has_math = page.evaluate("() => !!(window.MathJax && MathJax.startup)")
    if has_math:
        page.evaluate("() => MathJax.startup.promise")
    text = page.evaluate("() => document.body.innerText")
    images = page.evaluate(
        "() => Array.from(document.images)"
        ".map(i => [i.currentSrc || i.src, i.complete && i.naturalWidth > 0])"
    )
    links = page.evaluate("() => Array.from(document.querySelectorAll('a[href]')).map(a => a.href)")
    if screenshot is not None:
        screenshot.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(screenshot), full_page=False)
    # a refused request to another host is what the reader without a network would see fail
    errors = [e for e in tab.errors if "favicon" not in e]
    return {
        "errors": errors,
        "refused": list(tab.refused),
        "text": text,
        "images": images,
        "links": links,
        "math": has_math,
    }


RAW_TEX = re.compile(r"\\\(|\\\)|\$\$|\\\[|\\begin\{")


def broken_links(base: str, page_rel: str, links: list[str]) -> list[str]:
    bad = []
    for href in links:
        if not href.startswith(base):
            continue
        parsed = urllib.parse.urlparse(href)
        path = SITE / urllib.parse.unquote(parsed.path).lstrip("/")
        if path.is_dir():
            path = path / "index.html"
        if not path.exists():
            bad.append(f"{href} (no such file)")
            continue
        if (
            parsed.fragment
            and path.suffix == ".html"
            and urllib.parse.unquote(parsed.fragment) not in anchors_of(path)
        ):
            bad.append(f"{href} (no anchor #{parsed.fragment})")
    return bad


PAGES = pages()


@pytest.mark.parametrize("rel", [str(p.relative_to(SITE)) for p in PAGES] or ["index.html"])
def test_page_reads_right_offline(tab, rel: str) -> None:
    shot = None
    name = rel.replace("/", "__").removesuffix(".html")
    if rel in ("book/intro.html", "book/ledger.html") or re.search(
        r"notebooks/\d\d_[a-z0-9_]+/01_", rel
    ):
        shot = SHOTS / f"{name}.png"
    got = visit(tab, rel, shot)
    problems = []
    if got["errors"]:
        problems.append(f"JavaScript errors: {got['errors'][:5]}")
    if got["refused"]:
        problems.append(
            f"requests to other hosts (the page needs a network): {sorted(set(got['refused']))[:5]}"
        )
    raw = RAW_TEX.findall(got["text"])
    if raw:
        problems.append(f"raw TeX left after MathJax: {raw[:5]}")
    missing = [src for src, ok in got["images"] if not ok]
    if missing:
        problems.append(f"images that did not load: {missing}")
    problems += [f"broken link: {b}" for b in broken_links(tab.base, rel, got["links"])]
    if rel.startswith("notebooks/") and not rel.endswith("index.html"):
        problems += launch_link_problems(rel, got["links"])
    assert not problems, f"{rel}:\n" + "\n".join(problems)


def launch_link_problems(rel: str, links: list[str]) -> list[str]:
    """What is missing among a notebook page's launch links: Colab and Binder at this
    repository, branch and notebook, and a JupyterHub nbgitpuller link with the same."""
    repo = CONFIG["repository"]["url"].rstrip("/")
    owner_name = repo.split("github.com/")[1]
    branch = CONFIG["repository"]["branch"]
    nb = rel.removesuffix(".html") + ".ipynb"
    lb = CONFIG["launch_buttons"]
    want = {
        "Colab": f"{lb['colab_url']}/github/{owner_name}/blob/{branch}/{nb}",
        "Binder": f"{lb['binderhub_url']}/v2/gh/{owner_name}/{branch}?urlpath=lab/tree/{nb}",
    }
    out = [f"no {k} launch link {v}" for k, v in want.items() if v not in links]
    hubs = [
        urllib.parse.parse_qs(urllib.parse.urlparse(h).query)
        for h in links
        if h.startswith(lb["jupyterhub_url"])
    ]
    if not any(
        q.get("repo") == [repo]
        and q.get("branch") == [branch]
        and q.get("urlpath", [""])[0].endswith(f"/{nb}")
        for q in hubs
    ):
        out.append(f"no JupyterHub launch link for {repo} at {branch} and {nb}")
    return out


def test_every_page_was_visited_and_screenshots_written() -> None:
    assert len(PAGES) >= 10, f"only {len(PAGES)} pages under {SITE}"
    # one notebook page per chapter, the introduction and the ledger (written by the tests above)
    chapters = sorted(
        {p.relative_to(SITE).parts[1] for p in PAGES if p.relative_to(SITE).parts[0] == "notebooks"}
    )
    expected = {"book__intro.png", "book__ledger.png"} | {
        f"notebooks__{c}__{p.stem}.png"
        for c in chapters
        for p in [sorted((SITE / "notebooks" / c).glob("01_*.html"))[0]]
    }
    have = {p.name for p in SHOTS.glob("*.png")}
    assert expected <= have, f"missing screenshots: {sorted(expected - have)}"


def test_launch_link_check_can_fail() -> None:
    rel = "notebooks/18_spr_ldp/01_lp_check.html"
    good = [
        "https://colab.research.google.com/github/reprobook/reprobook/blob/main/notebooks/18_spr_ldp/01_lp_check.ipynb",
        "https://mybinder.org/v2/gh/reprobook/reprobook/main?urlpath=lab/tree/notebooks/18_spr_ldp/01_lp_check.ipynb",
        "https://hub.reprobook.org/hub/user-redirect/git-pull?repo=https%3A//github.com/reprobook/reprobook"
        "&urlpath=lab/tree/reprobook/notebooks/18_spr_ldp/01_lp_check.ipynb&branch=main",
    ]
    assert launch_link_problems(rel, good) == []
    assert len(launch_link_problems(rel, [h.replace("main", "dev") for h in good])) == 3
    assert launch_link_problems(rel, good[:2]) == [
        "no JupyterHub launch link for https://github.com/reprobook/reprobook at main and "
        "notebooks/18_spr_ldp/01_lp_check.ipynb"
    ]
