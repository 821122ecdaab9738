"""A page opened in headless Chromium (scripts/test.sh installs it): the DOM after the
page's script ran, and a screenshot.

``ARTIFACTS`` (``artifacts/`` at the repository's root, ignored by git) is where the
screenshots go, for CI to keep.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Final

ROOT: Final = Path(__file__).resolve().parents[2]
ARTIFACTS: Final = ROOT / "artifacts"
CHROMIUM_DEADLINE: Final = 60.0


@dataclass(frozen=True)
class Element:
    tag: str
    attrs: dict[str, str]
    text: str = ""

    @property
    def classes(self) -> set[str]:
        return set(self.attrs.get("class", "").split())


@dataclass
class _Collector(HTMLParser):
    elements: list[Element] = field(default_factory=list)
    _open: list[tuple[str, dict[str, str], list[str]]] = field(default_factory=list)

    def __post_init__(self) -> None:
        super().__init__(convert_charrefs=True)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._open.append((tag, {k: v or "" for k, v in attrs}, []))

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append(Element(tag, {k: v or "" for k, v in attrs}))

    def handle_data(self, data: str) -> None:
        for _, _, texts in self._open:
            texts.append(data)

    def handle_endtag(self, tag: str) -> None:
        while self._open:
            name, attrs, texts = self._open.pop()
            self.elements.append(Element(name, attrs, "".join(texts)))
            if name == tag:
                return


def elements(dom: str) -> list[Element]:
    """Every element of ``dom``, with its attributes and its text."""
    collector = _Collector()
    collector.feed(dom)
    collector.close()
    return collector.elements


def chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        raise AssertionError("chromium is not installed (scripts/test.sh installs it)")
    return path


def render(page: Path, screenshot: Path, profile: Path, *, width: int = 1400) -> str:
    """Open ``page`` (a file) in headless Chromium ``width`` pixels wide: the DOM once the
    page's scripts have run; its first screen is saved as ``screenshot`` (PNG). An error
    the page's scripts leave uncaught fails."""
    screenshot.parent.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [
            chromium(),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--no-first-run",
            f"--user-data-dir={profile}",
            f"--window-size={width},1000",
            "--virtual-time-budget=10000",
            "--enable-logging=stderr",  # the page's console, where a script error shows
            "--v=0",
            f"--screenshot={screenshot}",
            "--dump-dom",
            page.resolve().as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=CHROMIUM_DEADLINE,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert screenshot.is_file(), done.stderr[-2000:]
    errors = [line for line in done.stderr.splitlines() if "Uncaught" in line]
    assert errors == [], errors
    return done.stdout
