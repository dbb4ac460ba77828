#!/usr/bin/env python3
"""Prints how many tests a CTest JUnit file (ctest --output-junit) says were skipped, and why.

usage: skipped.py FILE.xml  ->  "N skipped" then one line per reason with the tests it covers.
The reason is what the test said: GoogleTest's message after "Skipped", or a script's "SKIP:" line."""
import sys
import xml.etree.ElementTree as ET
from collections import OrderedDict


def reason(tc):
    lines = [l.strip() for l in (tc.findtext("system-out") or "").splitlines()]
    for i, l in enumerate(lines):
        if l.endswith(": Skipped") and i + 1 < len(lines) and lines[i + 1]:
            return lines[i + 1]
    for l in lines:
        if l.upper().startswith("SKIP"):
            return l.split(":", 1)[1].strip() if ":" in l else l
    s = tc.find("skipped")
    return s.get("message", "no reason given") if s is not None else "no reason given"


def main():
    try:
        root = ET.parse(sys.argv[1]).getroot()
    except (OSError, ET.ParseError, IndexError) as e:
        print(f"skipped: unknown ({e})")
        return
    by_reason = OrderedDict()
    for tc in root.iter("testcase"):
        if tc.get("status") == "notrun" and tc.find("skipped") is not None:
            by_reason.setdefault(reason(tc), []).append(tc.get("name").split("  #")[0])  # no GetParam() notes
    print(f"{sum(len(v) for v in by_reason.values())} skipped")
    for why, names in by_reason.items():
        shown = ", ".join(names[:4]) + (f", ... ({len(names)} in all)" if len(names) > 4 else "")
        print(f"      {len(names)}: {why} [{shown}]")


if __name__ == "__main__":
    main()
