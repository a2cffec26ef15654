"""The shipped alert rules and Grafana dashboard name only metrics that /metrics serves."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.support.inbox import make_config, running_inbox
from tests.support.signing import delivery

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
METRIC = re.compile(r"\b(?:hookinbox|process)_[a-z_]+\b")


def expressions(node: Any) -> Iterator[str]:
    """Every PromQL expression: ``expr`` in rules and panel targets, template queries."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in {"expr", "query", "definition"} and isinstance(value, str):
                yield value
            else:
                yield from expressions(value)
    elif isinstance(node, list):
        for item in node:
            yield from expressions(item)


def named_metrics(document: Any) -> set[str]:
    return {name for expr in expressions(document) for name in METRIC.findall(expr)}


def served_names(text: str) -> set[str]:
    names = set()
    for family in text_string_to_metric_families(text):
        names.add(family.name)
        suffixes = {
            "counter": ["_total"],
            "histogram": ["_bucket", "_count", "_sum"],
        }.get(family.type, [])
        names.update(family.name + suffix for suffix in suffixes)
        names.update(sample.name for sample in family.samples)
    return names


async def test_alerts_and_dashboard_name_only_served_metrics(
    sqlite_url: str, client: httpx.AsyncClient
) -> None:
    rules = yaml.safe_load((DEPLOY / "prometheus" / "alerts.yml").read_text())
    dashboard = json.loads((DEPLOY / "grafana" / "hookinbox.json").read_text())
    alert_names = {rule["alert"] for group in rules["groups"] for rule in group["rules"]}
    assert {
        "HookinboxDeadLettersGrowing",
        "HookinboxQueueLagHigh",
        "HookinboxInvalidSignatureSpike",
        "HookinboxSourcePausedTooLong",
        "HookinboxForwardTargetDown",
    } <= alert_names
    # Failures are alerted on by cause.
    by_cause = [
        rule for group in rules["groups"] for rule in group["rules"] if "reason" in rule["expr"]
    ]
    assert len(by_cause) >= 2
    assert all(rule.get("expr") for group in rules["groups"] for rule in group["rules"])
    named = named_metrics(rules) | named_metrics(dashboard)
    assert len(named) >= 12, named

    async with running_inbox(make_config(sqlite_url)) as inbox:
        body, headers = delivery("evt_deploy")
        await client.post(inbox.url(), content=body, headers=headers)
        served = served_names((await client.get(f"{inbox.base_url}/metrics")).text)
    assert named <= served, f"named but not served: {sorted(named - served)}"


def test_dashboard_panels_have_a_target_each() -> None:
    dashboard = json.loads((DEPLOY / "grafana" / "hookinbox.json").read_text())
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    assert all(panel["targets"] and panel["title"] for panel in dashboard["panels"])
