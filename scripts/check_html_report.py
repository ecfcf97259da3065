"""Open a ``pt2chakra report`` page in headless Chromium and check it.

    python scripts/check_html_report.py report.html [--screenshot shot.png]

Prints the page size, whether it refers to anything outside itself, the
console errors seen while it loaded, the time to load and draw it, and
whether the screenshot is blank. Exit status 1 when a check fails. The
tests import ``check_page`` and ``screenshot`` from here.

Console errors are caught by a script injected at the top of a copy of the
page (``window.onerror`` and ``console.error`` write into the DOM, which
``--dump-dom`` prints); Chromium's own console log (``--enable-logging``)
is scanned too. Host names resolve to nothing, so any fetch would fail
and show up as an error.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from typing import NamedTuple

# Chromium's name on Debian, then elsewhere.
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
# Attributes that make a browser fetch something (src, href, srcset, url()).
EXTERNAL = re.compile(r"""(?:src|href|srcset)\s*=\s*["']?\s*(?:https?:)?//|url\(\s*["']?(?:https?:)?//""",
                      re.IGNORECASE)
_INJECT = """<script>(function(){var E=window.__pt2c_errors=[];
window.addEventListener('error',function(e){E.push('error: '+(e.message||e.type))},true);
window.addEventListener('unhandledrejection',function(e){E.push('rejection: '+e.reason)});
var ce=console.error;console.error=function(){E.push('console.error: '+[].join.call(arguments,' '));
return ce.apply(console,arguments)};
window.addEventListener('load',function(){var d=document.documentElement;
var ms=String(Math.round(performance.now()));
try{EXERCISE}catch(x){E.push('exercise: '+x)}
setTimeout(function(){d.setAttribute('data-pt2c-errors',JSON.stringify(E));
d.setAttribute('data-pt2c-load-ms',ms)},300)})})();</script>"""
# What a reader does, run after the load event so that its errors are caught
# too: zoom, pan, toggle the checkboxes, sort a table, open every rank.
_EXERCISE = """var q=function(s){return document.querySelectorAll(s)};
q('button[data-zoom]').forEach(function(b){b.click()});
q('input[type=checkbox]').forEach(function(c){c.click()});
q('th').forEach(function(t,i){if(i<3)t.click()});
q('details').forEach(function(x){x.open=true});
var c=document.querySelector('canvas');if(c){var r=c.getBoundingClientRect(),
o={clientX:r.left+r.width/2,clientY:r.top+5,bubbles:true};
c.dispatchEvent(new MouseEvent('mousemove',o));c.dispatchEvent(new MouseEvent('mousedown',o));
o.clientX-=50;c.dispatchEvent(new MouseEvent('mousemove',o));window.dispatchEvent(new MouseEvent('mouseup',o));
c.dispatchEvent(new WheelEvent('wheel',{clientX:o.clientX,clientY:o.clientY,deltaY:-100,ctrlKey:true,bubbles:true,cancelable:true}));
c.dispatchEvent(new MouseEvent('dblclick',o))}"""
_FLAGS = ("--headless", "--disable-gpu", "--no-sandbox", "--no-first-run",
          "--disable-extensions", "--host-resolver-rules=MAP * ~NOTFOUND",
          "--enable-logging=stderr", "--v=0")
# Virtual time the page gets after loading (timers and animation frames run
# in it, so the exercise's redraws happen before the DOM is dumped).
VIRTUAL_MS = 2000
# A screenshot whose most common colour covers more than this share of it
# shows nothing but background.
BLANK_SHARE = 0.995


class PageCheck(NamedTuple):
    bytes: int
    external_refs: list[str]
    errors: list[str]  # console errors and uncaught exceptions
    drawn: bool  # the page's script ran to its end (it marks the root element)
    load_ms: float  # in the page: navigation start to the load event (parse + script)
    wall_s: float  # the whole headless run (browser start included)


def browser() -> str | None:
    for name in BROWSERS:
        path = shutil.which(name)
        if path:
            return path
    return None


def external_refs(page: str) -> list[str]:
    return [m.group(0) for m in EXTERNAL.finditer(page)]


def _run(args: list[str], timeout: float) -> tuple[subprocess.CompletedProcess[str], float]:
    exe = browser()
    if exe is None:
        raise FileNotFoundError("no chromium found")
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as profile:
        proc = subprocess.run([exe, *_FLAGS, f"--user-data-dir={profile}", *args],
                              capture_output=True, text=True, timeout=timeout)
    return proc, time.perf_counter() - t0


def _console_errors(stderr: str) -> list[str]:
    """Chromium logs console messages as ``...:INFO:CONSOLE(line)] "msg"``;
    keep uncaught exceptions and errors."""
    return [line for line in stderr.splitlines()
            if "CONSOLE" in line and ("Uncaught" in line or "Error" in line)]


def check_page(path: str, timeout: float = 120, exercise: bool = True) -> PageCheck:
    """Load a copy of the page with the error catcher injected and read back
    what it caught (``exercise``: after using the page's controls)."""
    with open(path, encoding="utf-8") as f:
        page = f.read()
    inject = _INJECT.replace("EXERCISE", _EXERCISE if exercise else "")
    marked = page.replace("<head>", "<head>" + inject, 1)
    with tempfile.TemporaryDirectory() as tmp:
        copy = os.path.join(tmp, "page.html")
        with open(copy, "w", encoding="utf-8") as f:
            f.write(marked)
        proc, wall = _run([f"--virtual-time-budget={VIRTUAL_MS}", "--dump-dom",
                           "file://" + copy], timeout)
    dom = proc.stdout
    m = re.search(r'data-pt2c-errors="([^"]*)"', dom)
    caught = json.loads(m.group(1).replace("&quot;", '"').replace("&amp;", "&")) if m else \
        ["the page never reached its load event"]
    ms = re.search(r'data-pt2c-load-ms="(\d+)"', dom)
    return PageCheck(bytes=len(page.encode("utf-8")), external_refs=external_refs(page),
                     errors=list(caught) + _console_errors(proc.stderr),
                     drawn='data-drawn="1"' in dom, load_ms=float(ms.group(1)) if ms else -1.0,
                     wall_s=wall)


def screenshot(path: str, png: str, size: str = "1400,1000", timeout: float = 120) -> float:
    """Screenshot the page's first screen; returns the wall time."""
    proc, wall = _run([f"--screenshot={os.path.abspath(png)}", f"--window-size={size}",
                       "--hide-scrollbars", "file://" + os.path.abspath(path)], timeout)
    if not os.path.exists(png):
        raise RuntimeError(f"no screenshot written: {proc.stderr[-2000:]}")
    return wall


def blank(png: str) -> bool:
    """True when one colour covers (almost) the whole picture."""
    from PIL import Image

    with Image.open(png) as img:
        rgb = img.convert("RGB")
        colors = rgb.getcolors(maxcolors=1 << 20) or []
        total = rgb.width * rgb.height
    top = max((count for count, _ in colors), default=total)
    return top / total > BLANK_SHARE


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("page")
    ap.add_argument("--screenshot", metavar="PNG")
    ap.add_argument("--size", default="1400,1000", help="window size for the screenshot")
    args = ap.parse_args()
    c = check_page(args.page)
    print(f"{args.page}: {c.bytes:,} bytes, external refs: {len(c.external_refs)}, "
          f"console errors: {len(c.errors)}, drawn: {c.drawn}, load event at {c.load_ms:.0f} ms, "
          f"headless run {c.wall_s:.2f} s")
    for e in c.errors:
        print("  error:", e)
    ok = not c.external_refs and not c.errors and c.drawn
    if args.screenshot:
        wall = screenshot(args.page, args.screenshot, args.size)
        is_blank = blank(args.screenshot)
        print(f"screenshot {args.screenshot}: {wall:.2f} s, blank: {is_blank}")
        ok = ok and not is_blank
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
