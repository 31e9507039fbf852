"""The README's requirements name every tool `make test` needs (issue 38 item 8: it named Python, a
JDK and Maven, and the suite also needs Node.js/npm, Go and Chromium). The tools are read from the
code that looks for them, so a new one fails here until the README names it."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LOOKED_FOR = [REPO / "tests" / "emulators.py", REPO / "tests" / "integration" / "test_ui_browser.py"]


def _tools() -> set[str]:
    """The executables the test code checks for: `shutil.which("x")`, `for tool in ("x", "y")`, CHROMIUM."""
    found: set[str] = set()
    for path in LOOKED_FOR:
        text = path.read_text()
        found |= set(re.findall(r'shutil\.which\("([\w-]+)"\)', text))
        for group in re.findall(r"for tool in \(([^)]*)\)", text):
            found |= set(re.findall(r'"([\w-]+)"', group))
        found |= {Path(p).name for p in re.findall(r'^CHROMIUM = "([^"]+)"', text, re.M)}
    return found


def test_the_readme_names_every_tool_the_tests_look_for() -> None:
    tools = _tools()
    assert {"node", "npm", "go", "chromium"} <= tools, tools
    quick_start = (REPO / "README.md").read_text().split("## What's inside")[0].lower()
    names = {"node": "node.js", "npm": "npm", "go": "go 1.", "chromium": "chromium"}
    assert [t for t in sorted(tools) if names.get(t, t) not in quick_start] == []
