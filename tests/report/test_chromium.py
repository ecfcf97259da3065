"""The page in a real browser: headless Chromium (Debian's ``chromium``,
installed by ``.ci/run``) loads it with no console error, its script draws
the timeline, and the screenshot is not blank. Skips where no Chromium is
installed."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from pt2chakra.report.api import write_report

pytestmark = pytest.mark.slow  # processes of their own, or a browser, or torch


@pytest.fixture(scope="module")
def browser(page_check: ModuleType) -> ModuleType:
    if page_check.browser() is None:
        pytest.skip("no chromium installed (CI installs Debian's chromium)")
    pytest.importorskip("PIL")
    return page_check


def _assert_renders(check: ModuleType, page: Path, tmp_path: Path) -> None:
    result = check.check_page(str(page))
    assert result.errors == [], result.errors
    assert result.drawn
    assert result.external_refs == []
    png = tmp_path / "shot.png"
    check.screenshot(str(page), str(png))
    assert not check.blank(str(png))


def test_sample_page_renders(browser: ModuleType, sample_et: tuple[Path, Path],
                             tmp_path: Path) -> None:
    page = tmp_path / "sample.html"
    write_report([sample_et[0]], page, conversion=[sample_et[1]])
    _assert_renders(browser, page, tmp_path)


def test_dlrm_page_renders(browser: ModuleType, dlrm_ets: tuple[list[Path], list[Path]],
                           tmp_path: Path) -> None:
    page = tmp_path / "dlrm.html"
    write_report(dlrm_ets[0], page, conversion=dlrm_ets[1])
    _assert_renders(browser, page, tmp_path)


def test_the_check_sees_a_broken_script(browser: ModuleType, tmp_path: Path) -> None:
    """The checks can fail: an uncaught error and a page with nothing drawn."""
    page = tmp_path / "broken.html"
    page.write_text("<!DOCTYPE html><html><head></head><body>"
                    "<script>no_such_function();</script></body></html>")
    result = browser.check_page(str(page))
    assert any("no_such_function" in e for e in result.errors), result.errors
    assert not result.drawn
    png = tmp_path / "blank.png"
    browser.screenshot(str(page), str(png))
    assert browser.blank(str(png))


def test_external_references_are_found(page_check: ModuleType) -> None:
    assert page_check.external_refs('<img src="https://example.com/x.png">')
    assert page_check.external_refs("<link href='//cdn.example.com/a.css'>")
    assert page_check.external_refs("a { background: url(http://x/y.png) }")
    assert not page_check.external_refs('<a href="#summary">')


def test_64_rank_page_renders(browser: ModuleType, many_ranks: list[Path],
                              tmp_path: Path) -> None:
    page = tmp_path / "dp.html"
    write_report(many_ranks, page)
    _assert_renders(browser, page, tmp_path)
