import re

from report_bundles import build_bundle

from sremarathon_env.report.view import write_html


def test_view_is_self_contained_and_complete(tmp_path):
    b = build_bundle(tmp_path / "b", "oracle", skill=3)
    out = write_html(b, tmp_path / "view.html")
    page = out.read_text()
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    # nothing loaded from anywhere: no scripts, no external links or images
    assert "<script" not in page and not re.search(r'(src|href)="(https?:)?//', page)
    assert "<svg" in page and page.count("<rect") == 2 + 2 + 1  # faults, alert spans, actions
    assert "ob-test-f0" in page and "ob-test-f1" in page
    assert "handled" in page and "missed" in page          # per-fault outcomes
    assert "INC-0001" in page and "cart &lt;errors&gt;" in page  # incidents, escaped
    assert page.count("<details>") >= 7 + 7                 # every invocation and its calls
    assert "set_config" in page and "Marathon-Score" in page and "oracle" in page
    assert len(page) > 5000


def test_view_default_path(tmp_path):
    b = build_bundle(tmp_path / "b", "noop", skill=0)
    out = write_html(b)
    assert out == b / "view.html" and out.stat().st_size > 2000
