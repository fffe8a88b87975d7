import pytest
from hypothesis import given, settings, strategies as st

from sremarathon_env.pipeline import PatchError, apply_diff, make_diff, parse_diff

BASE = {"src/a.py": "".join(f"line{i} = {i}\n" for i in range(40)), "README": "hello\nworld\n"}


def test_modify_with_git_prefixes_and_headers():
    diff = ("diff --git a/src/a.py b/src/a.py\nindex 1..2 100644\n--- a/src/a.py\n+++ b/src/a.py\n"
            "@@ -2,3 +2,3 @@\n line1 = 1\n-line2 = 2\n+line2 = 22\n line3 = 3\n")
    out = apply_diff(BASE, diff)
    assert "line2 = 22\n" in out["src/a.py"] and "line2 = 2\n" not in out["src/a.py"]
    assert out["README"] == BASE["README"]
    assert BASE["src/a.py"].count("\n") == out["src/a.py"].count("\n")


def test_hunk_found_at_offset():
    diff = "--- a/src/a.py\n+++ b/src/a.py\n@@ -10,2 +10,2 @@\n line20 = 20\n-line21 = 21\n+line21 = 0\n"
    assert "line21 = 0\n" in apply_diff(BASE, diff)["src/a.py"]


def test_context_mismatch_rejected_with_hunk_number():
    diff = "--- a/src/a.py\n+++ b/src/a.py\n@@ -2,2 +2,2 @@\n line1 = 1\n-line2 = 3\n+line2 = 4\n"
    with pytest.raises(PatchError, match=r"src/a.py: hunk #1 does not apply"):
        apply_diff(BASE, diff)


def test_create_and_delete_files():
    create = "--- /dev/null\n+++ b/src/new.py\n@@ -0,0 +1,2 @@\n+x = 1\n+y = 2\n"
    out = apply_diff(BASE, create)
    assert out["src/new.py"] == "x = 1\ny = 2\n"
    with pytest.raises(PatchError, match="already exists"):
        apply_diff(out, create)
    delete = "--- a/README\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-hello\n-world\n"
    assert "README" not in apply_diff(BASE, delete)
    with pytest.raises(PatchError, match="no such file"):
        apply_diff(BASE, delete.replace("README", "MISSING"))


def test_no_newline_at_end_of_file_markers():
    diff = "--- a/README\n+++ b/README\n@@ -1,2 +1,2 @@\n hello\n-world\n+there\n\\ No newline at end of file\n"
    assert apply_diff(BASE, diff)["README"] == "hello\nthere"
    back = make_diff({"README": "hello\nthere"}, BASE)
    assert apply_diff({"README": "hello\nthere"}, back) == BASE


@pytest.mark.parametrize("diff,msg", [
    ("", "empty diff"),
    ("just prose\n", "no file headers"),
    ("--- a/README\nhello\n", "without a following"),
    ("--- a/README\n+++ b/README\n", "without any hunk"),
    ("--- a/README\n+++ b/README\n@@ -1,2 +1,2 @@\n hello\n", "truncated or miscounted"),
    ("--- a/README\n+++ b/README\n@@ bogus @@\n", "malformed hunk header"),
    ("--- a/../etc/passwd\n+++ b/../etc/passwd\n@@ -1 +1 @@\n-a\n+b\n", "unsafe path"),
    ("--- /etc/passwd\n+++ /etc/passwd\n@@ -1 +1 @@\n-a\n+b\n", "unsafe path"),
    ("--- /dev/null\n+++ /dev/null\n@@ -0,0 +1 @@\n+a\n", "both sides"),
])
def test_malformed_diffs(diff, msg):
    with pytest.raises(PatchError, match=msg):
        apply_diff(BASE, diff)


def test_huge_line_numbers_do_not_hang():
    diff = "--- a/README\n+++ b/README\n@@ -999999999,1 +999999999,1 @@\n-world\n+x\n"
    assert apply_diff(BASE, diff)["README"] == "hello\nx\n"


_line = st.text(alphabet=st.sampled_from("abc =()\t{}"), max_size=6)


@settings(max_examples=300, deadline=None)
@given(before=st.lists(_line, max_size=25), after=st.lists(_line, max_size=25),
       eol_a=st.booleans(), eol_b=st.booleans(), ctx=st.integers(0, 3))
def test_roundtrip_with_difflib(before, after, eol_a, eol_b, ctx):
    a = "\n".join(before) + ("\n" if eol_a and before else "")
    b = "\n".join(after) + ("\n" if eol_b and after else "")
    if a == b:
        return
    diff = make_diff({"f.txt": a}, {"f.txt": b}, context=ctx)
    assert apply_diff({"f.txt": a}, diff)["f.txt"] == b
    assert len(parse_diff(diff)) == 1
