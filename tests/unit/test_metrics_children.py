"""``ctxbus up``'s ``/metrics`` also serves its child processes' series (issue 21: on two cores the injection
counters were only on the child's port, not at the documented address)."""

from __future__ import annotations

import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from ctxbus.adapters.broker_embedded import free_port
from ctxbus.observability import Metrics


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        return response.read().decode()


def test_up_serves_its_own_series_and_its_childrens_each_family_once() -> None:
    up, child = Metrics(), Metrics()
    up.consumed.labels(service="retriever", topic="t", outcome="processed").inc()
    child.consumed.labels(service="injector", topic="t", outcome="processed").inc(3)
    child.consumed.labels(service="recorder", topic="t", outcome="processed").inc()
    child.end_to_end.labels(trigger="user_prompt").observe(0.05)
    child_port = child.serve("127.0.0.1", 0)
    up_port = up.serve("127.0.0.1", 0)
    assert 'service="injector"' not in scrape(up_port)  # no children known yet: its own only
    up.child_ports = lambda: [child_port]
    text = scrape(up_port)
    families = list(text_string_to_metric_families(text))  # valid exposition text
    names = [f.name for f in families]
    assert len(names) == len(set(names))  # one family per name: its samples merged, one TYPE line
    (consumed,) = [f for f in families if f.name == "ctxbus_events_consumed"]
    values = {s.labels["service"]: s.value for s in consumed.samples if s.name == "ctxbus_events_consumed_total"}
    assert values == {"retriever": 1.0, "injector": 3.0, "recorder": 1.0}
    assert 'ctxbus_end_to_end_seconds_count{trigger="user_prompt"} 1.0' in text
    assert text.count("# TYPE ctxbus_events_consumed_total counter") == 1
    assert scrape(child_port).count('service="retriever"') == 0  # the child's own endpoint is unchanged


def test_a_child_that_does_not_answer_leaves_up_s_own_series() -> None:
    up = Metrics()
    up.consumed.labels(service="retriever", topic="t", outcome="processed").inc()
    up.child_ports = lambda: [free_port()]  # nothing listens there (a child restarting)
    port = up.serve("127.0.0.1", 0)
    text = scrape(port)
    assert 'ctxbus_events_consumed_total{outcome="processed",service="retriever",topic="t"} 1.0' in text
