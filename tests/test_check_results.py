"""doc/check_results.py's check of the numbers in prose, on made-up pages and
files: a number found (as written, and as the rounding of a JSON value), not
found, rounded twice, a paper number, an uncited paragraph, and what is not
a number to check; and its check of absence words (gone, flat, level with,
...): allowed only where the cited row's verdict is equivalent.

usage: test_check_results.py PATH/TO/check_results.py
"""
import importlib.util
import json
import os
import sys
import tempfile
import unittest

CHECKER = None

REPORT = """# Reproduction

| finding | ours |
|---|---|
| interaction | -0.0835 ± 0.0640 |
| jump | share lost: post 85% ± 10%; recovery 2.8x |

Wall time 5981 s (teacher 1 s). One pass is 1744 batches.
"""

RESULTS = {"interaction": -0.08347123, "share": 0.8512, "seconds": [1330.4972945379996],
           "tied": 0.0835, "about": "phases of 1,736 steps"}

PAPER_TABLE = """## The paper's numbers

<!-- the paper's numbers -->
| figure | value | where in the paper |
|---|---|---|
| post-grow's smallest block removal dCE | 2.38 | Controls, block removal |
| loss jump after an append, post | 0.25-0.28 | Controls, loss jump |
"""


def load():
    spec = importlib.util.spec_from_file_location("check_results", CHECKER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Numbers(unittest.TestCase):
    def setUp(self):
        self.cr = load()
        self.tmp = tempfile.TemporaryDirectory()
        self.root = self.tmp.name
        os.makedirs(os.path.join(self.root, "doc", "results", "s"))
        with open(os.path.join(self.root, "meson.build"), "w") as f:
            f.write("project('x', 'c', version: '0.4.0')\n")
        self.write("doc/results/s/report.md", REPORT)
        self.write("doc/results/s/results.json", json.dumps(RESULTS))

    def tearDown(self):
        self.tmp.cleanup()

    def write(self, path, text):
        with open(os.path.join(self.root, path), "w") as f:
            f.write(text)

    def check(self, page):
        """(numbers checked, problems) of a page, and the listing."""
        doc = os.path.join(self.root, "doc", "PAGE.md")
        self.write("doc/PAGE.md", page)
        listing = []
        _, checked, problems = self.cr.check(self.root, doc, listing=listing)
        return checked, problems, listing

    def assertClean(self, page, checked):
        n, problems, listing = self.check(page)
        self.assertEqual(problems, [], "\n".join(listing))
        self.assertEqual(n, checked, "\n".join(listing))

    def assertFlags(self, page, *numbers):
        """Each of numbers is flagged, and nothing else."""
        _, problems, listing = self.check(page)
        flagged = [p.split(": ", 1)[1].split(" ")[0].rstrip(":") for p in problems]
        self.assertEqual(sorted(flagged), sorted(numbers), "\n".join(problems + listing))
        return problems

    MARK = "<!-- numbers from: doc/results/s/report.md doc/results/s/results.json -->\n"

    def test_found_as_written(self):
        # the minus sign, a leading + and thousands commas are normalised; units x and s dropped
        self.assertClean(self.MARK + "I = \u22120.0835 \u00b1 0.0640, and 5,981 s for the round;\n"
                         "one pass is 1,744 batches, recovery 2.8x, share +85% (\u00b1 10%).\n", 7)

    def test_found_by_rounding_json(self):
        # -0.08347 rounds to -0.083 and -0.08; 0.8512 is 85.1%; 1330.497 s is 1,330 s; a
        # number in a JSON string is read as written
        self.assertClean(self.MARK + "I is -0.083 (-0.08), 85.1% lost, 1,330 s,\n"
                         "phases of 1,736 steps.\n", 5)

    def test_not_found(self):
        problems = self.assertFlags(self.MARK + "The round took 4,042 s; I = -0.0836.\n",
                                    "4,042", "-0.0836")
        self.assertIn("none of the files cited at line 1", problems[0])

    def test_precision_is_part_of_a_number(self):
        # report.md has 10%, not 10.0%, and 85%, not the bare 85
        self.assertFlags(self.MARK.replace(" doc/results/s/results.json", "")
                         + "post 85 and 10.0% of it.\n", "85", "10.0%")

    def test_rounded_twice(self):
        # report.md's -0.0835 rounds to -0.084, but the precise value rounds to -0.083
        problems = self.assertFlags(self.MARK + "I = -0.084.\n", "-0.084")
        self.assertIn("writes -0.0835", problems[0])
        # with no precise value, a 4-decimal markdown number is not rounded again either
        only_report = "<!-- numbers from: doc/results/s/report.md -->\n"
        self.assertFlags(only_report + "I = -0.083 or -0.084.\n", "-0.083", "-0.084")

    def test_a_tie_is_not_accepted(self):
        # results.json's 0.0835 may itself be rounded: 0.084 is not taken from it
        only_json = "<!-- numbers from: doc/results/s/results.json -->\n"
        problems = self.assertFlags(only_json + "tied at 0.084, or 0.0835 as written.\n",
                                    "0.084")
        self.assertIn("tie", problems[0])

    def test_paper_number(self):
        page = (PAPER_TABLE + "\n## Reading\n\n"
                "<!-- numbers from: paper doc/results/s/report.md -->\n"
                "Post's jump is 0.25-0.28 in the paper, its smallest block 2.38; ours\n"
                "-0.0835.\n\n"
                "<!-- numbers from: doc/results/s/report.md -->\n"
                "Here 2.38 is not taken from the paper: the marker does not name it.\n")
        self.assertFlags(page, "2.38")
        self.assertClean(page.rsplit("<!--", 1)[0], 4)

    def test_paper_table_rows_say_where(self):
        page = PAPER_TABLE.replace("| Controls, loss jump |", "| |")
        _, problems, _ = self.check(page)
        self.assertEqual(len(problems), 1)
        self.assertIn("does not say where in the paper", problems[0])

    def test_uncited(self):
        # a paragraph before any marker, and one after a heading, cite nothing
        page = ("I = -0.0835 here.\n\n" + self.MARK + "I = -0.0835.\n\n"
                "## Next\n\nand 5,981 s.\n")
        problems = self.assertFlags(page, "-0.0835", "5,981")
        self.assertIn("no 'numbers from:' marker", problems[0])

    def test_a_page_that_is_not_there(self):
        import contextlib, io
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            rc = self.cr.main([self.root, os.path.join(self.root, "doc", "NOPE.md")])
        self.assertEqual(rc, 2)
        self.assertIn("NOPE.md: No such file or directory", err.getvalue())

    def test_missing_source(self):
        _, problems, _ = self.check("<!-- numbers from: doc/results/s/gone.md -->\nok.\n")
        self.assertEqual(len(problems), 1)
        self.assertIn("not in the repository", problems[0])

    def test_unreadable_sources(self):
        # a JSON file that does not parse, and a path outside the repository: a message each
        self.write("doc/results/s/bad.json", "{\"a\": 1.5,")
        page = ("<!-- numbers from: doc/results/s/bad.json ../outside.md /etc/hostname -->\n"
                "I = -0.0835.\n")
        _, problems, _ = self.check(page)
        self.assertEqual(len(problems), 4, "\n".join(problems))
        self.assertIn("bad.json, which cannot be read", problems[0])
        self.assertIn("outside.md, which is outside the repository", problems[1])
        self.assertIn("hostname, which is outside the repository", problems[2])
        self.assertIn("-0.0835 is in none of the files", problems[3])

    def test_not_numbers_to_check(self):
        page = ("3 seeds, phase 2 and layer 1 of a 9-layer student at d64 (Qwen3-8B), 2 jobs x 1\n"
                "thread, commit 8cd7369, OpenBLAS 0.3.21, arXiv 2608.13156, Gu et al., ICLR\n"
                "2025; in 0.2 and at 0.4, 0.1's iterator. (0.3 called it so.)\n"
                "`-0.084 in code` and [a link](results/s/9.99.md).\n\n"
                "    ./reproduce --steps 4042 --lr 0.0123\n\n"
                "```\n1.2345\n```\n\n"
                "<!-- table from: doc/results/s/report.md, after: # Reproduction -->\n"
                "| finding | ours |\n|---|---|\n| interaction | -0.0835 ± 0.0640 |\n"
                "| jump | share lost: post 85% ± 10%; recovery 2.8x |\n"
                "<!-- end table -->\n")
        n, problems, listing = self.check(page)
        self.assertEqual(n, 0, "\n".join(listing))
        self.assertEqual([p for p in problems if "links" not in p], [])

    def test_what_is_checked(self):
        # a release number where it reads as a measure, two digits, signs, ranges, intervals
        page = ("The mass is above 0.3 and 80 steps; 5 s, +4 and \u00b1 3;\n"
                "0.25-0.28 and 2-6; 2025 without a venue.\n")
        _, problems, listing = self.check(page)
        flagged = [p.split(": ", 1)[1].split(":")[0] for p in problems]
        self.assertEqual(flagged, ["0.3", "80", "5", "+4", "3", "0.25", "0.28", "2025"],
                         "\n".join(listing))

    def test_reading_signs_and_units(self):
        cr = self.cr
        nums, _ = cr.read_numbers("0.039-+0.072, (-0.010 +-0.030), 1.76 -> 1.41, 3e-3, 20k, 50%")
        self.assertEqual([n.text for n in nums],
                         ["0.039", "+0.072", "-0.010", "0.030", "1.76", "1.41", "3e-3", "20k",
                          "50%"])
        self.assertTrue(nums[3].interval)
        self.assertEqual(nums[6].key(), cr.read_numbers("0.003")[0][0].key())


ROWS = """# Reproduction

## Comparisons

| arm | reference | arm - reference | seeds | verdict |
|---|---|---|---|---|
| a | b | -0.0019 ± 0.0075 | 3 | equivalent (90% CI [-0.0070, +0.0032] inside ±0.0082) |
| c | d | +0.0029 ± 0.0098 | 3 | inconclusive: 90% CI [-0.0037, +0.0096] not inside ±0.0082; allows effects from -0.0068 to +0.0127, up to 1.5x the margin |
| e | f | -0.0019 ± 0.0300 | 3 | inconclusive: 90% CI [-0.0300, +0.0262] not inside ±0.0082; allows effects from -0.0319 to +0.0281, up to 3.9x the margin |
| g | h | +0.0008 ± 0.0164 | 3 | below 0 |
"""


class Absence(unittest.TestCase):
    """A sentence that calls a result absent cites a row whose verdict is
    equivalent, and only such rows."""

    MARK = "<!-- numbers from: doc/results/s/report.md -->\n"

    def setUp(self):
        self.cr = load()
        self.tmp = tempfile.TemporaryDirectory()
        self.root = self.tmp.name
        os.makedirs(os.path.join(self.root, "doc", "results", "s"))
        with open(os.path.join(self.root, "meson.build"), "w") as f:
            f.write("project('x', 'c', version: '0.4.0')\n")
        with open(os.path.join(self.root, "doc", "results", "s", "report.md"), "w") as f:
            f.write(ROWS)

    def tearDown(self):
        self.tmp.cleanup()

    def problems(self, page):
        doc = os.path.join(self.root, "doc", "PAGE.md")
        with open(doc, "w") as f:
            f.write(page)
        return [p for p in self.cr.check(self.root, doc)[2] if "absence" in p]

    def test_equivalent_row_allows_the_word(self):
        self.assertEqual(self.problems(self.MARK + "The rescale changes nothing in joint: "
                                       "90% CI [-0.0070, +0.0032].\n"), [])
        # the 95% interval's words are the row's too
        self.assertEqual(self.problems(self.MARK + "It is level with b\n(+0.0032 at most).\n"),
                         [])

    def test_inconclusive_row_refuses_it(self):
        for word in ("is gone", "does not survive", "changes nothing", "is flat",
                     "is level with d", "has no effect", "did not survive", "is Gone"):
            problems = self.problems(self.MARK + "The gap %s: +0.0029 ± 0.0098.\n" % word)
            self.assertEqual(len(problems), 1, word)
            self.assertIn("PAGE.md:2:", problems[0])
        # a shown direction is not an absence either
        self.assertEqual(len(self.problems(self.MARK + "I is flat, +0.0008 ± 0.0164.\n")), 1)

    def test_a_number_of_other_rows_too_proves_nothing(self):
        # -0.0019 is in an equivalent row and an inconclusive one; the margin in all
        self.assertEqual(len(self.problems(self.MARK + "It is gone (-0.0019).\n")), 1)
        self.assertEqual(len(self.problems(self.MARK + "It is gone within ±0.0082.\n")), 1)

    def test_no_number_or_no_marker(self):
        self.assertEqual(len(self.problems(self.MARK + "The effect is gone.\n")), 1)
        self.assertEqual(len(self.problems("The effect is gone.\n")), 1)
        # the paper's table is not a report: nothing in it is equivalent
        self.assertEqual(len(self.problems("<!-- numbers from: paper -->\nIt is gone.\n")), 1)

    def test_the_sentence_is_the_unit(self):
        # the equivalent number in the next sentence does not cover this one
        page = self.MARK + "The gap is gone. The rescale: 90% CI [-0.0070, +0.0032].\n"
        self.assertEqual(len(self.problems(page)), 1)
        # a list item is a sentence of its own
        page = self.MARK + "- the gap is flat\n- [-0.0070, +0.0032]\n"
        self.assertEqual(len(self.problems(page)), 1)
        # a sentence across lines is one sentence; decimals do not end it
        page = self.MARK + "The joint gap\nchanges nothing (-0.0070 to\n+0.0032).\n"
        self.assertEqual(self.problems(page), [])

    def test_mentions_and_negations_are_not_claims(self):
        page = self.MARK + ('The earlier "gone" was withdrawn; the gap is not flat, never '
                            'level with d, nor gone, and \u201cdoes not survive\u201d '
                            'said more than +0.0029 ± 0.0098 allows.\n')
        self.assertEqual(self.problems(page), [])

    def test_words_inside_other_words_are_not_claims(self):
        page = self.MARK + "Flatten it; the flats undergone, a flatter curve: +0.0029.\n"
        self.assertEqual(self.problems(page), [])


    def test_closes_and_level_are_absence_words(self):
        for word in ("closes", "closed", "is level", "close"):
            problems = self.problems(self.MARK + "The gap %s: +0.0029 ± 0.0098.\n" % word)
            self.assertEqual(len(problems), 1, word)
        self.assertEqual(self.problems(self.MARK + "It closes: [-0.0070, +0.0032].\n"), [])
        # a confidence level, a level of something, a difference in level: no claim
        page = self.MARK + ("At the 95% confidence level, a level of noise, not comparable "
                            "in level: +0.0029 ± 0.0098.\n")
        self.assertEqual(self.problems(page), [])


VERDICT_ROWS = """# Reproduction

| finding | ours | verdict | p (Holm) |
|---|---|---|---|
| block removal: pre's last block a near no-op | ratio 0.175 ± 0.053 | reproduced | p 0.01, Holm 0.02 |
| block removal: pre's last block a near no-op | ratio 0.236 ± 0.038 | inconclusive | p 0.2, Holm 0.4 |
| grow | +0.0049 ± 0.0037 | above 0 | p 0.0158, Holm 0.0865 |
| I_total | -0.0107 ± 0.0080 | fails Holm: not decided | |
| joint | +0.1043 ± 0.0249 | holds | |
"""


class VerdictWords(unittest.TestCase):
    """"near no-op", "decided" and "not decided" need the cited row's verdict."""

    MARK = "<!-- numbers from: doc/results/s/report.md -->\n"

    def setUp(self):
        self.cr = load()
        self.tmp = tempfile.TemporaryDirectory()
        self.root = self.tmp.name
        os.makedirs(os.path.join(self.root, "doc", "results", "s"))
        with open(os.path.join(self.root, "meson.build"), "w") as f:
            f.write("project('x', 'c', version: '0.4.0')\n")
        with open(os.path.join(self.root, "doc", "results", "s", "report.md"), "w") as f:
            f.write(VERDICT_ROWS)

    def tearDown(self):
        self.tmp.cleanup()

    def problems(self, page):
        doc = os.path.join(self.root, "doc", "PAGE.md")
        with open(doc, "w") as f:
            f.write(page)
        return [p for p in self.cr.check(self.root, doc)[2] if "needs a number" in p]

    def test_no_op(self):
        self.assertEqual(self.problems(self.MARK + "A near no-op: 0.175 ± 0.053.\n"), [])
        self.assertEqual(len(self.problems(self.MARK + "A near no-op: 0.236 ± 0.038.\n")), 1)
        self.assertEqual(len(self.problems(self.MARK + "It stays a no-op.\n")), 1)
        self.assertEqual(len(self.problems(self.MARK + "A no-op, +0.1043 ± 0.0249.\n")), 1)

    def test_decided(self):
        self.assertEqual(self.problems(self.MARK + "Decided: +0.1043 ± 0.0249.\n"), [])
        self.assertEqual(len(self.problems(self.MARK + "Decided: -0.0107 ± 0.0080.\n")), 1)
        self.assertEqual(self.problems(self.MARK + "Not decided: -0.0107 ± 0.0080.\n"), [])
        self.assertEqual(len(self.problems(self.MARK + "Not decided: +0.1043 ± 0.0249.\n")), 1)
        # a label in bold names a list, it claims nothing
        self.assertEqual(self.problems(self.MARK + "**Not decided.** Below.\n"), [])


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    CHECKER = sys.argv.pop(1)
    unittest.main()
