"""The contract the code implements is in the repository (docs/contract.md), and everything cites it
(issue 17 item 4: docs cited ../shared/SPEC.md, which is not in the repository)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CONTRACT = REPO / "docs" / "contract.md"


def tracked() -> list[Path]:
    listed = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    return [REPO / name for name in listed.split() if (REPO / name).is_file()]


def sections() -> set[int]:
    return {int(n) for n in re.findall(r"^## §(\d+) ", CONTRACT.read_text(), re.MULTILINE)}


def test_the_contract_has_its_sections() -> None:
    assert sections() == set(range(1, 11))
    text = CONTRACT.read_text()
    for rule in (
        "unsafe_storage_root",
        "nested_checkpoint_path",
        "validation_without_checkpoint",
        "internal_error",
        "deletion_completed.v3",
        "implicit restart",
        "pages",
        "EventRejected",
    ):
        assert rule in text, rule


def test_nothing_cites_a_spec_outside_the_repository() -> None:
    offenders = []
    for path in tracked():
        if path.suffix not in {".py", ".md", ".json", ".yml", ".toml"} or path == Path(__file__):
            continue
        text = path.read_text(errors="replace")
        if "SPEC.md" in text or re.search(r"\bSPEC (§|\\u00a7)", text):
            offenders.append(str(path.relative_to(REPO)))
    assert offenders == []


def test_every_contract_citation_names_a_section_that_exists() -> None:
    known = sections()
    for path in tracked():
        if path.suffix not in {".py", ".md"}:
            continue
        for first, rest in re.findall(r"contract(?:\.md)?\)? §(\d+)((?:[–-]§?\d+|, §\d+)*)", path.read_text()):
            cited = [int(first), *(int(n) for n in re.findall(r"\d+", rest))]
            assert set(cited) <= known, f"{path.relative_to(REPO)} cites contract §{cited}"
