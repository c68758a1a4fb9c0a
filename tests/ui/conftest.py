"""What the page tests share beyond tests/conftest.py: each test's outcome on its item (`item.outcome_call`), so that a
browser fixture can keep a screenshot of a failed test (tests/ui/test_page_newcomer.py)."""

from __future__ import annotations

import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"outcome_{report.when}", report)
