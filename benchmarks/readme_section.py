"""
The generated sections of benchmarks/README.md: each stands between two markers,

    <!-- KEY:begin (benchmarks/SCRIPT --readme writes this section) -->
    ...
    <!-- KEY:end -->

and the benchmark that measures it rewrites what is between them.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

README = Path(__file__).resolve().parent / "README.md"


def markers(key: str, script: str) -> tuple[str, str]:
    """The begin and end markers of the section `key` that `benchmarks/script` writes."""
    return (
        f"<!-- {key}:begin (benchmarks/{script} --readme writes this section) -->",
        f"<!-- {key}:end -->",
    )


def write_section(
    key: str, script: str, text: str, *, append: bool = False, readme: Path = README
) -> bool:
    """
    Puts `text` between the markers of the section `key` in `readme`. A README without
    that section gets it at its end with `append`; otherwise it is left as it is, the
    missing markers are named on stderr and the answer is False.
    """
    begin, end = markers(key, script)
    old = readme.read_text()
    block = f"{begin}\n{text}{end}"
    pattern = re.compile(re.escape(begin) + ".*?" + re.escape(end), re.S)
    if pattern.search(old):
        readme.write_text(pattern.sub(lambda _: block, old))
        return True
    if append:
        readme.write_text(old.rstrip("\n") + "\n\n" + block + "\n")
        return True
    print(f"no section {begin} ... {end} in {readme}", file=sys.stderr)
    return False


def read_section(key: str, script: str, *, readme: Path = README) -> str | None:
    """
    The text between the markers of the section `key` in `readme` (what `write_section`
    puts there), or None, the missing markers named on stderr.
    """
    begin, end = markers(key, script)
    found = re.search(
        re.escape(begin) + "\n?(.*?)" + re.escape(end), readme.read_text(), re.S
    )
    if found is None:
        print(f"no section {begin} ... {end} in {readme}", file=sys.stderr)
        return None
    return found.group(1)
