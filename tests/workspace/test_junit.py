"""JUnit XML reports (tf_fsm.workspace.junit): the failing tests of the formats pytest, Jest,
go-junit-report and Maven surefire write, and nothing but None from hostile or broken input."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tf_fsm.workspace import junit
from tf_fsm.workspace.junit import failing_tests, read_report, stamp

#: the projects' pytest gates start without this venv's plugins (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("plain_pytest")

JEST = """<?xml version="1.0" encoding="UTF-8"?>
<testsuites name="jest tests" tests="3" failures="1" errors="0" time="1.2">
  <testsuite name="parser" errors="0" failures="1" skipped="0" timestamp="2024-01-01T00:00:00"
             time="0.5" tests="3">
    <testcase classname="parser parses numbers" name="parser parses numbers" time="0.01">
    </testcase>
    <testcase classname="parser rejects junk" name="parser rejects junk" time="0.02">
      <failure>Error: expect(received).toThrow()</failure>
    </testcase>
    <testcase classname="parser skips" name="parser skips" time="0">
      <skipped/>
    </testcase>
  </testsuite>
</testsuites>"""

GO = """<?xml version="1.0" encoding="UTF-8"?>
<testsuites tests="3" failures="1" errors="1">
\t<testsuite name="example.com/app/parse" tests="3" failures="1" errors="1" time="0.010">
\t\t<properties><property name="go.version" value="go1.22.0"></property></properties>
\t\t<testcase name="TestNumbers" classname="example.com/app/parse" time="0.000"></testcase>
\t\t<testcase name="TestJunk" classname="example.com/app/parse" time="0.000">
\t\t\t<failure message="Failed" type="">parse_test.go:12: got nil</failure>
\t\t</testcase>
\t\t<testcase name="TestPanics" classname="example.com/app/parse" time="0.000">
\t\t\t<error message="Runtime error" type="">panic: boom</error>
\t\t</testcase>
\t</testsuite>
</testsuites>"""

SUREFIRE = """<?xml version="1.0" encoding="UTF-8"?>
<testsuite xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"
 xsi:noNamespaceSchemaLocation="https://maven.apache.org/surefire/maven-surefire-plugin/xsd/surefire-test-report-3.0.xsd"
 version="3.0" name="com.example.ParserTest" time="0.05" tests="4" errors="1" skipped="0"
 failures="1">
  <properties><property name="java.version" value="21"/></properties>
  <testcase name="parsesNumbers" classname="com.example.ParserTest" time="0.001"/>
  <testcase name="rejectsJunk" classname="com.example.ParserTest" time="0.002">
    <failure message="expected: &lt;1&gt;" type="org.opentest4j.AssertionFailedError">
      <![CDATA[org.opentest4j.AssertionFailedError: expected: <1> but was: <2>]]></failure>
    <system-out><![CDATA[some output]]></system-out>
  </testcase>
  <testcase name="crashes" classname="com.example.ParserTest" time="0.001">
    <error message="boom" type="java.lang.IllegalStateException">stack</error>
  </testcase>
  <testcase name="flaky" classname="com.example.ParserTest" time="0.001">
    <flakyFailure message="once" type="java.lang.AssertionError">first run</flakyFailure>
  </testcase>
</testsuite>"""

NESTED = """<testsuites><testsuite name="outer"><testsuite name="inner">
<testcase name="deep" file="spec/deep_spec.rb"><failure/></testcase>
<testcase name="fine" classname="Inner"/>
</testsuite><testcase name="top" classname="Outer"><error/></testcase></testsuite></testsuites>"""


def test_jest_report() -> None:
    assert failing_tests(JEST) == {"parser rejects junk::parser rejects junk"}


def test_go_junit_report_counts_failures_and_errors() -> None:
    assert failing_tests(GO) == {
        "example.com/app/parse::TestJunk",
        "example.com/app/parse::TestPanics",
    }


def test_surefire_single_suite_root_and_flaky_failures_passed() -> None:
    assert failing_tests(SUREFIRE) == {
        "com.example.ParserTest::rejectsJunk",
        "com.example.ParserTest::crashes",
    }


def test_nested_suites_and_a_file_when_there_is_no_classname() -> None:
    assert failing_tests(NESTED) == {"spec/deep_spec.rb::deep", "Outer::top"}


def test_a_report_with_nothing_failing_is_an_empty_set_not_none() -> None:
    assert failing_tests("<testsuites/>") == frozenset()
    assert failing_tests('<testsuite name="x"><testcase name="a" classname="k"/></testsuite>') == (
        frozenset()
    )


def test_pytest_junitxml_written_by_pytest_itself(tmp_path: Path) -> None:
    (tmp_path / "test_sample.py").write_text(
        "import pytest\n"
        "def test_good():\n    assert True\n"
        "def test_bad():\n    assert 1 == 2\n"
        "@pytest.fixture\ndef broken():\n    raise RuntimeError('setup')\n"
        "def test_error(broken):\n    pass\n"
        "@pytest.mark.parametrize('n', [1, 2])\ndef test_param(n):\n    assert n == 1\n"
    )
    report = tmp_path / "report.xml"
    subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={report}"],
        cwd=tmp_path,
        capture_output=True,
        check=False,
    )
    assert failing_tests(report.read_text()) == {
        "test_sample::test_bad",
        "test_sample::test_error",
        "test_sample::test_param[2]",
    }


def test_pytest_collection_error_is_a_failing_test(tmp_path: Path) -> None:
    (tmp_path / "test_broken.py").write_text("import no_such_module_here\n")
    report = tmp_path / "report.xml"
    subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={report}"],
        cwd=tmp_path,
        capture_output=True,
        check=False,
    )
    failing = failing_tests(report.read_text())
    assert failing is not None and len(failing) == 1
    assert "test_broken" in next(iter(failing))


def _laughs() -> str:
    """The billion laughs: ten entities, each ten of the one before."""
    entities = ['<!ENTITY lol0 "lol">']
    entities += [f'<!ENTITY lol{i} "{f"&lol{i - 1};" * 10}">' for i in range(1, 10)]
    return (
        f'<?xml version="1.0"?><!DOCTYPE lolz [{"".join(entities)}]>'
        '<testsuites><testsuite><testcase name="&lol9;"><failure/></testcase></testsuite>'
        "</testsuites>"
    )


BILLION_LAUGHS = _laughs()


@pytest.mark.parametrize(
    "text",
    [
        BILLION_LAUGHS,
        '<!DOCTYPE x [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>'
        '<testsuite><testcase name="&xxe;"><failure/></testcase></testsuite>',
        "<!DOCTYPE testsuite><testsuite/>",
        '<?xml version="1.0" encoding="UTF-16"?><!DOCTYPE a [<!ENTITY e "x">]><testsuite/>',
        "",
        "not xml at all",
        "\x00\xff\xfe garbage",
        "<testsuites><testsuite><testcase name='a'>",  # cut short
        "<html><body><testcase name='a'><failure/></testcase></body></html>",  # another root
        "<testsuites></testsuites><testsuites/>",  # two roots
        "<testsuite>" * 300 + "</testsuite>" * 300,  # deeper than any report
        '{"tests": []}',
    ],
    ids=lambda t: repr(t[:30]),
)
def test_hostile_or_broken_input_is_none(text: str) -> None:
    started = time.monotonic()
    assert failing_tests(text) is None
    assert time.monotonic() - started < 10  # refused, not expanded (that takes milliseconds)


def test_a_doctype_is_refused_in_any_encoding() -> None:
    doc = '<?xml version="1.0" encoding="UTF-16"?><!DOCTYPE a [<!ENTITY e "x">]><testsuite/>'
    assert junit._parse(doc.encode("utf-16")) is None
    ok = (
        '<?xml version="1.0" encoding="UTF-16"?>'
        '<testsuite><testcase name="a"><error/></testcase></testsuite>'
    )
    assert junit._parse(ok.encode("utf-16")) == {"a"}


def test_huge_input_is_none(monkeypatch: pytest.MonkeyPatch) -> None:
    huge = "<testsuites>" + " " * junit.MAX_REPORT_BYTES + "</testsuites>"
    assert failing_tests(huge) is None
    monkeypatch.setattr(junit, "MAX_ELEMENTS", 100)  # the element limit, without 5M elements
    many = "<testsuite>" + '<testcase name="a"/>' * 100 + "</testsuite>"
    assert failing_tests(many) is None
    assert failing_tests("<testsuite>" + '<testcase name="a"/>' * 98 + "</testsuite>") == set()


# --- reading the report a gate run wrote ---------------------------------------------------


def test_read_report_only_when_the_run_wrote_it(tmp_path: Path) -> None:
    report = tmp_path / "out" / "report.xml"
    assert read_report(report, stamp(report), tmp_path) is None  # never written
    report.parent.mkdir()
    report.write_text(GO)
    before = stamp(report)
    assert read_report(report, before, tmp_path) is None  # an earlier run's report
    time.sleep(0.01)
    report.write_text(GO)  # rewritten in place, same size: its change time tells
    assert read_report(report, before, tmp_path) == failing_tests(GO)
    assert read_report(report, None, tmp_path) == failing_tests(GO)
    report.write_text("garbage")
    assert read_report(report, None, tmp_path) is None


def test_read_report_refuses_a_symlink_out_of_the_tree(tmp_path: Path) -> None:
    tree, outside = tmp_path / "tree", tmp_path / "outside.xml"
    tree.mkdir()
    outside.write_text(GO)
    (tree / "report.xml").symlink_to(outside)
    assert read_report(tree / "report.xml", None, tree) is None
    (tree / "real.xml").write_text(GO)
    (tree / "inside.xml").symlink_to(tree / "real.xml")
    assert read_report(tree / "inside.xml", None, tree) == failing_tests(GO)


def test_read_report_of_a_file_past_the_limit_is_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(junit, "MAX_REPORT_BYTES", 100)
    report = tmp_path / "report.xml"
    report.write_text(GO)
    assert os.path.getsize(report) > 100
    assert read_report(report, None, tmp_path) is None
