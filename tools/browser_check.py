#!/usr/bin/env python
"""Load every page of the built book in headless Chromium, offline, and check what a reader sees.

Usage: ``python tools/browser_check.py [_build/html] [--width 1400] [--browser chromium]``;
exits 1 listing every problem (``make book`` first; CI runs it after the book build).

The book is served from a local HTTP server on 127.0.0.1 and Chromium resolves no other host,
so a page that needs the network shows it as an error. For each page the check fails on

* **a console error**: an uncaught exception, ``console.error``, a resource that failed to load
  (a missing file, a blocked network request), a CSP or mixed-content error;
* **content wider than the text column**: any visible element of the article (a table, a
  figure, displayed math, a paragraph) whose right edge lies beyond the article's column at the
  given window width (1400 px by default). Code blocks and cell inputs scroll inside their own
  box and are not counted; what is inside them is not either;
* **TeX shown as text**: ``$...$`` or a TeX command outside code and typeset math, as happens
  when a glued Markdown value carries math (glued values are not typeset).

It speaks the Chrome DevTools Protocol over a websocket (``websocket-client``) with the
distribution's Chromium (Debian package ``chromium``); nothing is downloaded. MathJax's
typesetting is awaited before the widths are measured.
"""

from __future__ import annotations

import argparse
import functools
import http.server
import json
import shutil
import socketserver
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Measured in the page: the article's column and every visible element sticking out of it.
MEASURE = r"""
(async () => {
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
    try { await MathJax.startup.promise; } catch (e) {}
  }
  await new Promise(r => setTimeout(r, 50));
  const article = document.querySelector('article.bd-article') || document.querySelector('main') || document.body;
  const box = article.getBoundingClientRect();
  const style = getComputedStyle(article);
  const right = box.right - parseFloat(style.paddingRight || 0);
  const skip = 'pre, .highlight, .cell_input, .margin, aside, .sidebar, .headerlink, mjx-assistive-mml, .MathJax_Preview';
  const wide = [], reported = [];
  for (const el of article.querySelectorAll('*')) {
    if (el.closest(skip)) continue;
    if (reported.some(r => r.contains(el))) continue;   // the outermost offender only
    const r = el.getBoundingClientRect();
    if (r.width === 0 || r.height === 0) continue;
    const cs = getComputedStyle(el);
    if (cs.visibility === 'hidden' || cs.display === 'none') continue;
    if (r.right > right + 1) {
      const label = el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') +
        (typeof el.className === 'string' && el.className ? '.' + el.className.trim().split(/\s+/).join('.') : '');
      reported.push(el);
      wide.push({el: label, right: Math.round(r.right), width: Math.round(r.width),
                 text: (el.textContent || '').trim().slice(0, 60)});
    }
  }
  // TeX left as text: glued Markdown is not typeset, so "$n$" or "\\approx" in it reaches the reader raw
  const tex = [];
  const walker = document.createTreeWalker(article, NodeFilter.SHOW_TEXT);
  const rawTex = /\$[^\s$][^$]{0,80}\$|\\(approx|frac|mathrm|sqrt|le|ge|times)\b/;
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const parent = node.parentElement;
    if (!parent || parent.closest(skip + ', code, script, style, mjx-container, .math, .cell_output pre')) continue;
    const m = node.textContent.match(rawTex);
    if (m) tex.push({text: node.textContent.trim().slice(Math.max(0, m.index - 30), m.index + 50)});
  }
  return JSON.stringify({column: Math.round(right - (box.left + parseFloat(style.paddingLeft || 0))),
                         wide: wide.slice(0, 400), tex: tex.slice(0, 50)});
})()
"""


def find_browser(name: str | None = None) -> str:
    for candidate in [name] if name else ["chromium", "chromium-browser", "google-chrome", "chrome"]:
        path = shutil.which(candidate) if candidate else None
        if path:
            return path
    raise ValueError("no Chromium found: install the distribution's package (apt-get install -y chromium) "
                     "or pass --browser")


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


class _Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


class _Tab:
    """One page target over the DevTools websocket."""

    def __init__(self, ws_url: str):
        import websocket

        self.ws = websocket.create_connection(ws_url, timeout=60, suppress_origin=True)
        self.next_id = 0
        self.events: list[dict] = []

    def send(self, method: str, params: dict | None = None, timeout: float = 60) -> dict:
        self.next_id += 1
        my_id = self.next_id
        self.ws.send(json.dumps({"id": my_id, "method": method, "params": params or {}}))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == my_id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            if "method" in msg:
                self.events.append(msg)
        raise TimeoutError(f"{method}: no answer in {timeout} s")

    def wait_for(self, method: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(e["method"] == method for e in self.events):
                return
            self.ws.settimeout(max(0.1, deadline - time.monotonic()))
            msg = json.loads(self.ws.recv())
            if "method" in msg:
                self.events.append(msg)
        raise TimeoutError(f"{method} not seen in {timeout} s")

    def close(self):
        self.ws.close()


def _errors(events: list[dict]) -> list[str]:
    out = []
    for e in events:
        p = e.get("params", {})
        if e["method"] == "Runtime.exceptionThrown":
            d = p.get("exceptionDetails", {})
            desc = d.get("exception", {}).get("description") or d.get("text", "")
            out.append(f"uncaught exception: {desc.splitlines()[0] if desc else d}")
        elif e["method"] == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            args = " ".join(str(a.get("value", a.get("description", ""))) for a in p.get("args", []))
            out.append(f"console.{p['type']}: {args[:200]}")
        elif e["method"] == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
            entry = p["entry"]
            if entry.get("url", "").endswith("/favicon.ico"):
                continue   # the browser's own request, not the page's
            out.append(f"{entry.get('source', 'log')} error: {entry.get('text', '')[:200]} {entry.get('url', '')}".rstrip())
    return out


def check(html_dir: Path, width: int = 1400, browser: str | None = None, pages: list[str] | None = None,
          timeout: float = 60) -> tuple[list[str], int]:
    """``(problems, pages checked)`` for the built book in ``html_dir``."""
    html_dir = Path(html_dir).resolve()
    if not (html_dir / "index.html").is_file():
        raise ValueError(f"{html_dir} is not a built book (no index.html); run `make book` first")
    exe = find_browser(browser)
    if pages is None:
        # every page but the theme's own folders and redirect stubs (index.html -> book/intro.html)
        pages = sorted(str(p.relative_to(html_dir)) for p in html_dir.rglob("*.html")
                       if not p.relative_to(html_dir).parts[0].startswith("_")
                       and 'http-equiv="refresh"' not in p.read_text(errors="replace")[:2000].lower())
    handler = functools.partial(_Quiet, directory=str(html_dir))
    server = _Server(("127.0.0.1", 0), handler)
    port = server.server_address[1]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    profile = tempfile.mkdtemp(prefix="browser-check-")
    cmd = [exe, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
           "--no-first-run", "--no-default-browser-check", "--disable-extensions", "--disable-sync",
           "--disable-background-networking", "--disable-component-update", "--metrics-recording-only",
           "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
           "--remote-debugging-port=0", f"--user-data-dir={profile}", f"--window-size={width},1000",
           "about:blank"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    problems: list[str] = []
    try:
        port_file = Path(profile) / "DevToolsActivePort"
        deadline = time.monotonic() + timeout
        while not port_file.exists() or not port_file.read_text().strip():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{exe} did not start (exit status {proc.poll()})")
            time.sleep(0.1)
        devtools = int(port_file.read_text().split()[0])
        targets = json.load(urllib.request.urlopen(f"http://127.0.0.1:{devtools}/json/list", timeout=10))
        page = next(t for t in targets if t.get("type") == "page")
        tab = _Tab(page["webSocketDebuggerUrl"])
        for domain in ("Page", "Runtime", "Log"):
            tab.send(f"{domain}.enable")
        tab.send("Emulation.setDeviceMetricsOverride",
                 {"width": width, "height": 1000, "deviceScaleFactor": 1, "mobile": False})
        for rel in pages:
            tab.events.clear()
            tab.send("Page.navigate", {"url": f"http://127.0.0.1:{port}/{rel}"})
            tab.wait_for("Page.loadEventFired", timeout)
            result = tab.send("Runtime.evaluate", {"expression": MEASURE, "awaitPromise": True,
                                                   "returnByValue": True}, timeout)
            value = json.loads(result.get("result", {}).get("value") or "{}")
            time.sleep(0.05)
            for err in _errors(tab.events):
                problems.append(f"{rel}: {err}")
            for t in value.get("tex", []):
                problems.append(f"{rel}: TeX shown as plain text (glued Markdown is not typeset): {t['text']!r}")
            for w in value.get("wide", []):
                problems.append(f"{rel}: {w['el']} is {w['width']} px wide and ends at {w['right']} px, beyond "
                                f"the {value['column']} px text column: {w['text']!r}")
        tab.close()
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        server.shutdown()
        shutil.rmtree(profile, ignore_errors=True)
    return problems, len(pages)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("html", nargs="?", type=Path, default=ROOT / "_build" / "html",
                        help="the built book (default: _build/html)")
    parser.add_argument("--width", type=int, default=1400, help="window width in px (default 1400)")
    parser.add_argument("--browser", default=None, help="Chromium executable (default: chromium on PATH)")
    parser.add_argument("--page", action="append", default=None, help="check only this page (repeatable)")
    args = parser.parse_args(argv)
    if args.width < 320:
        parser.error(f"--width must be at least 320 px, got {args.width}")
    start = time.monotonic()
    try:
        problems, n = check(args.html, args.width, args.browser, args.page)
    except (ValueError, RuntimeError, TimeoutError) as err:
        print(f"browser_check: {err}", file=sys.stderr)
        return 1
    seconds = time.monotonic() - start
    if problems:
        print(f"browser_check: {len(problems)} problem(s) on {n} pages ({seconds:.0f} s):", file=sys.stderr)
        for p in problems:
            print(f"  {p}", file=sys.stderr)
        return 1
    print(f"browser_check: {n} pages load without console errors and fit the text column at {args.width} px "
          f"({seconds:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
