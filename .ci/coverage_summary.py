"""`make coverage`'s last lines: line and branch coverage of the whole package and of core/ (pure logic), from
the JSON report coverage.py wrote (the path is the only argument). Standard library only."""

from __future__ import annotations

import json
import sys
from typing import Any


def figures(totals: dict[str, Any]) -> str:
    return (
        f"lines {totals['covered_lines']}/{totals['num_statements']} ({totals['percent_statements_covered']:.1f}%), "
        f"branches {totals['covered_branches']}/{totals['num_branches']} ({totals['percent_branches_covered']:.1f}%), "
        f"combined {totals['percent_covered']:.1f}%"
    )


def main(path: str) -> int:
    report = json.load(open(path, encoding="utf-8"))
    core = {"covered_lines": 0, "num_statements": 0, "covered_branches": 0, "num_branches": 0}
    for name, data in report["files"].items():
        if "/ctxbus/core/" in name.replace("\\", "/"):
            for key in core:
                core[key] += data["summary"][key]
    lines, branches = core["num_statements"], core["num_branches"]
    core["percent_statements_covered"] = 100.0 * core["covered_lines"] / lines if lines else 100.0
    core["percent_branches_covered"] = 100.0 * core["covered_branches"] / branches if branches else 100.0
    both = lines + branches
    core["percent_covered"] = 100.0 * (core["covered_lines"] + core["covered_branches"]) / both if both else 100.0
    print(f"ctxbus: {figures(report['totals'])}")
    print(f"core/:  {figures(core)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
