#!/usr/bin/python3
"""tests/ci/check_skips.py over JUnit files shaped as ctest writes them
(status "run", "fail", or "notrun" for a skip)."""

import os
import subprocess
import sys
import tempfile
import unittest

CHECK = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                     "check_skips.py")


def junit(cases):
    body = "".join(f'<testcase name="{n}" classname="{n}" status="{s}"/>'
                   for n, s in cases)
    return f'<?xml version="1.0"?><testsuite name="t">{body}</testsuite>'


class CheckSkipsTest(unittest.TestCase):
    def run_on(self, text):
        with tempfile.NamedTemporaryFile("w", suffix=".xml") as f:
            f.write(text)
            f.flush()
            return subprocess.run([sys.executable, CHECK, f.name],
                                  capture_output=True, text=True, check=False)

    def test_a_skip_fails_the_run_naming_the_test(self):
        r = self.run_on(junit([("A.Runs", "run"), ("B.NeedsRoot", "notrun"),
                               ("C.Fails", "fail")]))
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("B.NeedsRoot was skipped in CI", r.stdout)
        self.assertNotIn("A.Runs", r.stdout)
        self.assertNotIn("C.Fails", r.stdout)  # ctest reports failures

    def test_no_skip_passes(self):
        r = self.run_on(junit([("A.Runs", "run"), ("C.Fails", "fail")]))
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def test_a_missing_or_empty_report_is_an_error_not_a_pass(self):
        r = subprocess.run([sys.executable, CHECK, "/nonexistent/junit.xml"],
                           capture_output=True, text=True, check=False)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("cannot read ctest's JUnit output /nonexistent/junit.xml",
                      r.stderr)
        r = self.run_on(junit([]))
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("lists no tests", r.stderr)
        r = self.run_on("<testsuite")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("cannot read", r.stderr)


if __name__ == "__main__":
    unittest.main()
