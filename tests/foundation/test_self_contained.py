"""The repository is self-contained: no tracked file cites a document outside the clone (the
team's direction doc, the seeds' conformance folder) or a path on the machine it was written
on. The design of record is docs/architecture.md; the seed's tier config has its copy in
tests/tuning/data/seed_tiers.json."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Spelled in pieces so that this file does not cite them itself.
OUTSIDE = (
    "DESIGN" + ".md",  # the direction doc, not in the clone
    "shared/" + "conformance",  # the seeds' conformance data, not in the clone
    "/" + "work/",  # an absolute path on the machine the clone was worked on
)


def citations(root: Path, paths: list[str]) -> list[str]:
    """`path:line: text` for every line of a text file under `root` naming something outside
    the clone. Binary files (not UTF-8, or holding a NUL) are skipped."""
    found = []
    for name in paths:
        path = root / name
        if not path.is_file():  # deleted in the working tree, not yet in a commit
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        if "\0" in text:
            continue
        for number, line in enumerate(text.splitlines(), 1):
            if any(outside in line for outside in OUTSIDE):
                found.append(f"{name}:{number}: {line.strip()[:120]}")
    return found


def tracked_files() -> list[str]:
    listing = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.decode()
    return [name for name in listing.split("\0") if name]


def test_no_tracked_file_cites_a_document_outside_the_clone() -> None:
    files = tracked_files()
    assert len(files) > 100, "git ls-files listed too little to be this repository"
    found = citations(ROOT, files)
    assert not found, (
        "cite the repository's own docs (docs/architecture.md and the others) instead:\n"
        + "\n".join(found)
    )


def test_the_check_finds_each_kind_of_citation(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text(f'"""Rule ({OUTSIDE[0]} 3.2)."""\n')
    (tmp_path / "b.md").write_text(f"ok\nthe seed ({OUTSIDE[1]}/data/seed_tiers.json)\n")
    (tmp_path / "c.yaml").write_text(f"path: {OUTSIDE[2]}main/data\n")
    (tmp_path / "clean.md").write_text("docs/architecture.md#tier-config\n")
    (tmp_path / "blob.bin").write_bytes(b"\xff\xfe" + OUTSIDE[0].encode())
    found = citations(tmp_path, ["a.py", "b.md", "c.yaml", "clean.md", "blob.bin", "gone.md"])
    where = [line.split(":")[:2] for line in found]
    assert where == [["a.py", "1"], ["b.md", "2"], ["c.yaml", "1"]]
