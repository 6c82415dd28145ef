"""`tf-fsm ui --temporal` in a real browser: a clone that never ran the ticket shows its card
moving as the cluster's workflow runs it, from running to closed, without a reload."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("temporalio", reason="the temporal extra is not installed")

from tests.browser import needs_chromium, until
from tests.temporal.cluster import Cluster, wait_until
from tests.temporal.test_many_hosts import pause_in
from tests.ui_server import ui_server

pytestmark = needs_chromium


def test_the_board_of_a_clone_follows_the_cluster(cluster: Cluster, page: Any) -> None:
    cluster.create(["pt-1"])
    reached = pause_in(cluster, "review")
    cluster.worker("host-a")
    viewer = cluster.clone("viewer")
    with ui_server(viewer, "--temporal", cluster.address) as server:
        page.goto(server.base + "/")
        until(page, "document.getElementById('live').textContent === 'live'")
        page.evaluate("window.__sameDocument = 42")
        assert page.locator("#col-ready #card-pt-1").count() == 1
        dispatcher = cluster.dispatcher("run", "pt-1")
        wait_until("the reviewer", reached.exists, seconds=60)
        until(page, "document.querySelector('#col-running #card-pt-1') !== null", 30)
        cluster.seed.go()
        until(page, "document.querySelector('#col-closed #card-pt-1') !== null", 90)
        assert "closed by its workflow" in page.inner_text("#card-pt-1")
        assert page.evaluate("window.__sameDocument") == 42, "the page was reloaded"
        cluster.finish(dispatcher)
    # the viewer's clone holds the ticket's files as the history has them
    events = (viewer / ".tf/knowledge/tickets/pt-1/events.jsonl").read_text()
    assert events.count('"TicketClosed"') == 1
