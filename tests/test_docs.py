"""The documentation site: every memory has a page, every page is in the nav, nothing cited
lives outside the repository, and the site builds strictly with no remote resources."""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from memory_lab.memories import memory_factories

from .chromium import CHROMIUM, DRIVER, chromium_driver

ROOT = Path(__file__).parent.parent
DOCS = ROOT / "docs"


def nav_pages(entries) -> list[str]:
    out = []
    for entry in entries:
        value = next(iter(entry.values())) if isinstance(entry, dict) else entry
        out.extend(nav_pages(value) if isinstance(value, list) else [value])
    return out


def config() -> dict:
    """mkdocs.yml with the navigation as the site builds it (the systems' pages added from
    their declarations by docs/hooks.py)."""
    return hooks().on_config(yaml.safe_load((ROOT / "mkdocs.yml").read_text("utf-8")))


def hooks():
    spec = importlib.util.spec_from_file_location("docs_hooks", DOCS / "hooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_registered_memory_has_a_page_in_the_nav():
    """Every built-in memory (what `memory-lab list` shows in a fresh process; memories other
    tests name as ``module:factory`` are registered with their source and left out)."""
    nav = set(nav_pages(config()["nav"]))
    builtins = [name for name, f in memory_factories().items() if f.source is None]
    assert len(builtins) >= 18
    for name in builtins:
        page = DOCS / "memories" / f"{name}.md"
        assert page.is_file(), f"memory {name!r} has no docs page (docs/memories/{name}.md)"
        assert f"memories/{name}.md" in nav, f"docs/memories/{name}.md is not in mkdocs.yml nav"
        assert f"<!-- memory-parameters {name} -->" in page.read_text("utf-8"), (
            f"docs/memories/{name}.md lacks its generated parameter table"
        )


def test_every_page_is_in_the_nav_and_every_nav_entry_exists():
    nav = nav_pages(config()["nav"])
    pages = sorted(str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md"))
    assert sorted(set(pages) - set(nav)) == [], "pages missing from mkdocs.yml nav"
    assert sorted(set(nav) - set(pages)) == [], "nav entries with no page"
    assert len(nav) == len(set(nav)), "a page is in the nav twice"


def test_nothing_cites_a_file_outside_the_repository():
    files = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    banned = re.compile("DESIGN" + r"\.md|\.\./" + "shared")
    hits = [
        f
        for f in files
        if (ROOT / f).is_file()
        and not f.endswith((".png", ".npz", ".ipynb"))
        and banned.search((ROOT / f).read_text("utf-8", errors="replace"))
    ]
    assert hits == [], f"files citing design notes outside the repository: {hits}"


def test_readme_is_a_front_door():
    readme = (ROOT / "README.md").read_text("utf-8")
    assert len(readme.splitlines()) <= 250
    assert "make bench" in readme and "make test" in readme
    for link in re.findall(r"\]\((docs/[^)#]+)", readme):
        assert (ROOT / link).is_file(), f"README links a missing docs page: {link}"
    # the README's Python example is the one Getting started explains, word for word
    example = re.search(r"```python\n(.*?)```", readme, re.S).group(1)
    assert example in (DOCS / "getting-started.md").read_text("utf-8")
    assert "run_benchmark(" in example


def test_generated_pages_come_from_the_code():
    h = hooks()
    cli = h.cli_reference()
    for command in ("run", "import", "export", "list", "validate", "report", "inspect", "view"):
        assert f"## memory-lab {command}" in cli
    assert "--concurrency" in cli and "--executor" in cli
    table = h.memory_parameters("window")
    assert "| `k` | `int` | `5` | min 1 |" in table
    with pytest.raises(ValueError, match="no registered memory 'nope'"):
        h.memory_parameters("nope")


@pytest.mark.skipif(
    shutil.which("mkdocs") is None and importlib.util.find_spec("mkdocs") is None,
    reason="mkdocs not installed (pip install -e '.[dev]')",
)
def test_site_builds_strictly_and_loads_nothing_remote(tmp_path):
    site = tmp_path / "site"
    build = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "--site-dir", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert build.returncode == 0, build.stderr
    remote = re.compile(r"<(?:script|link|img|iframe)[^>]+(?:src|href)=\"(?:https?:)?//", re.I)
    for page in site.rglob("*.html"):
        assert not remote.search(page.read_text("utf-8")), f"{page} loads a remote resource"
    assert (site / "memories" / "window.html").is_file()
    assert "memory-lab inspect" in (site / "cli.html").read_text("utf-8")
    _browse_from_file_url(site)


def _browse_from_file_url(site: Path) -> None:
    """The site as the README says to open it (``build/site/index.html`` from the disk): three
    pages reached by their navigation links, and a word found by the search box."""
    if not (CHROMIUM and DRIVER and importlib.util.find_spec("selenium")):
        pytest.skip("no chromium/chromedriver/selenium to open the site with")
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    with chromium_driver() as driver:
        driver.get((site / "index.html").as_uri())
        for title in ("Getting started", "Metrics", "Command line"):
            link = driver.find_element(By.XPATH, f"//nav//a[normalize-space()='{title}']")
            driver.execute_script("arguments[0].click()", link)
            WebDriverWait(driver, 10).until(lambda d, t=title: t in d.title)
            assert driver.current_url.startswith("file://") and driver.current_url.endswith(".html")
            assert driver.find_element(By.TAG_NAME, "h1").text  # a page, not a folder listing
        # long commands and printed tables wrap: nothing to scroll sideways
        for page in ("results.html", "cli.html", "index.html"):
            driver.get((site / page).as_uri())
            wide = driver.execute_script(
                "return [...document.querySelectorAll('.md-typeset pre > code')]"
                ".filter(c => c.scrollWidth > c.clientWidth + 1).map(c => c.textContent)"
            )
            assert wide == [], f"{page}: code blocks scroll sideways: {wide}"
        driver.execute_script("document.querySelector('label[for=__search]').click()")
        box = driver.find_element(By.CSS_SELECTOR, "input[data-md-component=search-query]")
        box.send_keys("concurrency")
        WebDriverWait(driver, 20).until(
            lambda d: d.find_elements(By.CSS_SELECTOR, ".md-search-result__item")
        )


def test_the_api_page_reads_as_it_is():
    """docs/api.md is mkdocstrings directives for the site; read raw (as the README's links
    show it) each section names its objects with their first lines."""
    page = (DOCS / "api.md").read_text("utf-8")
    for section in page.split("\n## ")[1:]:
        named = re.findall(r"^- `([\w.]+)`: \S", section, re.M)
        assert named == re.findall(r"^::: ([\w.]+)$", section, re.M), section.splitlines()[0]
