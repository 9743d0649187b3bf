#!/usr/bin/env python3
"""check_layout.py finds each kind of breach in a small tree made for it,
and passes that tree once the breaches are mended."""

import os
import shutil
import subprocess
import sys
import tempfile
import unittest

CHECKER = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                       "check_layout.py")

GOOD_HEADER = """// A thing.
//
// Thread-safety: none needed.
#ifndef X_H_
#define X_H_
#endif
"""


def write(root, path, text):
    full = os.path.join(root, path)
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, "w", encoding="utf-8") as f:
        f.write(text)


def check(root):
    r = subprocess.run([sys.executable, CHECKER, root], capture_output=True,
                       text=True)
    return r.returncode, r.stdout


class CheckLayoutTest(unittest.TestCase):
    def test_each_breach_is_named(self):
        with tempfile.TemporaryDirectory() as root:
            write(root, "ps/base/a.h", GOOD_HEADER)
            # base may include nothing of the project; client is not base.
            write(root, "ps/client/c.h", GOOD_HEADER)
            write(root, "ps/base/a.cc",
                  '#include "ps/base/a.h"\n#include "ps/client/c.h"\n'
                  '#include "proto/shardps.pb.h"\n')
            write(root, "model/long.cc", "int x;\n" * 501)
            body = "  ++n;\n" * 85
            write(root, "loader/f.cc", f"int F(int n) {{\n{body}  return n;\n}}\n")
            write(root, "worker/train/bare.h", "#ifndef B_H_\n#endif\n")
            write(root, "worker/launch/quiet.h", "// Says what, not how.\n")
            code, out = check(root)
            self.assertEqual(code, 1, out)
            self.assertIn("ps/base/a.cc: ps/base may not include "
                          "ps/client/c.h (ps/client)", out)
            self.assertNotIn("proto/shardps.pb.h", out)
            self.assertIn("model/long.cc: 501 lines (at most 500)", out)
            self.assertIn("loader/f.cc:1: F has 88 lines (at most 80)", out)
            self.assertIn("worker/train/bare.h: does not open with a comment",
                          out)
            self.assertIn("worker/launch/quiet.h: its opening comment does not "
                          "state its thread-safety", out)

    def test_a_tree_that_keeps_the_rules_passes(self):
        with tempfile.TemporaryDirectory() as root:
            write(root, "ps/base/a.h", GOOD_HEADER)
            write(root, "ps/wire/w.cc", '#include "ps/base/a.h"\n')
            write(root, "worker/train/t.cc",
                  '#include "ps/wire/w.h"\n#include "loader/l.h"\n')
            code, out = check(root)
            self.assertEqual(code, 0, out)


if __name__ == "__main__":
    if shutil.which("ctags") is None:
        print("universal-ctags not found: nothing to test "
              "(deploy/install-deps.sh installs it)")
        sys.exit(77)  # ctest: skipped
    unittest.main()
