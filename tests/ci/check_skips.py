#!/usr/bin/env python3
"""In CI a skipped test is a failure: a package missing from
deploy/install-deps.sh would otherwise shrink coverage unseen.

  check_skips.py JUNIT_XML    (ctest --output-junit)

Exits 1 naming every test that did not run, unless ALLOWED_SKIPS lists it
(with the reason it may skip in CI).
"""

import sys
import xml.etree.ElementTree as ET

# Tests allowed to skip in CI, each with why. Keep this list short.
ALLOWED_SKIPS = {
    # (none: CI runs as root with every package of deploy/install-deps.sh)
}


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    try:
        root = ET.parse(sys.argv[1]).getroot()
    except (OSError, ET.ParseError) as e:
        sys.exit(f"check_skips: cannot read ctest's JUnit output "
                 f"{sys.argv[1]}: {e}")
    cases = list(root.iter("testcase"))
    if not cases:
        sys.exit(f"check_skips: {sys.argv[1]} lists no tests")
    skipped = [c.get("name") for c in cases if c.get("status") != "run" and
               c.get("status") != "fail"]
    unexpected = [name for name in skipped if name not in ALLOWED_SKIPS]
    for name in unexpected:
        print(f"check_skips: {name} was skipped in CI (see its output in "
              "build/Testing/Temporary/LastTest.log)")
    if unexpected:
        print(f"check_skips: {len(unexpected)} tests skipped that CI must "
              "run; install what they need in deploy/install-deps.sh or, "
              "with a reason, list them in tests/ci/check_skips.py")
        sys.exit(1)
    print(f"check_skips: no unexpected skips ({len(skipped)} allowed)")


if __name__ == "__main__":
    main()
