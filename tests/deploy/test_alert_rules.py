"""deploy/prometheus/alerts.yml: it parses, it has a rule for each thing an operator must hear of, every
expression names only families a real scrape of /metrics shows, and `promtool check rules` accepts it where
promtool is installed."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest
import yaml

from tests.metrics_scrape import METRICS_URL, family_names
from tests.servers import ROOT, server_missing

ALERTS_FILE = ROOT / "deploy" / "prometheus" / "alerts.yml"
# What the issue asks an alert for, by the rule that covers it.
REQUIRED = {
    "PaymentScanBehind",  # scan lag past its network's budget
    "PaymentVerifierDown",  # a network whose verifier is down
    "PaymentScanStalled",  # ... or whose scan no longer completes
    "PaymentWaitingForReview",  # payments in review for more than N hours
    "PaidOrderNotPrepared",  # a paid order not prepared within N minutes
    "NodeFailed",
    "NodeDegraded",  # a rented node's health probe fails
    "NodeHealthProbesStale",  # ... or no probe ran for three intervals
    "PreparationFailed",
    "OutboxBacklog",
    "UnexpectedOutflow",
}
PROMQL_WORDS = {"and", "or", "unless", "by", "without", "on", "ignoring", "group_left", "group_right", "bool", "offset"}


def rules() -> list[dict]:
    loaded = yaml.safe_load(ALERTS_FILE.read_text())
    return [rule for group in loaded["groups"] for rule in group["rules"]]


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression reads: identifiers that are not functions, keywords, label names
    (inside {} or after by/on/...), strings or durations."""
    expr = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    expr = re.sub(r"\{[^}]*\}", "", expr)
    expr = re.sub(r"\[[^\]]*\]", "", expr)
    expr = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", expr)
    names = set()
    for match in re.finditer(r"(?<![\w.])[A-Za-z_:][A-Za-z0-9_:]*", expr):
        if expr[match.end() :].lstrip().startswith("(") or match.group() in PROMQL_WORDS:
            continue
        names.add(match.group())
    return names


def test_the_reader_of_expressions_finds_names_and_skips_functions_labels_and_keywords():
    expr = 'increase(a_total{result=~"x|y"}[1h]) > on(network) b_blocks and time() - c > 4 * 3600'
    assert metric_names(expr) == {"a_total", "b_blocks", "c"}


def test_the_rules_parse_and_cover_everything_an_operator_must_hear_of():
    loaded = rules()
    names = [rule["alert"] for rule in loaded]

    assert len(names) == len(set(names)), names
    assert set(names) >= REQUIRED
    for rule in loaded:
        assert rule["expr"].strip(), rule["alert"]
        assert rule["labels"]["severity"] in {"warning", "critical"}, rule["alert"]
        assert rule["annotations"]["summary"], rule["alert"]


@pytest.mark.django_db
def test_every_expression_names_only_families_that_metrics_exposes(client, settings):
    settings.METRICS_TOKEN = ""
    exposed = family_names(client.get(METRICS_URL).content.decode())

    for rule in rules():
        named = metric_names(rule["expr"])
        assert named, f"{rule['alert']}: no metric found in {rule['expr']!r}"
        assert named <= exposed, f"{rule['alert']} names {sorted(named - exposed)}, which /metrics does not expose"


def test_every_alert_is_documented_in_the_operating_docs():
    docs = (ROOT / "docs" / "operating.md").read_text()  # its "Alerts" table
    assert [rule["alert"] for rule in rules() if f"`{rule['alert']}`" not in docs] == []


def test_promtool_accepts_the_rules():
    if shutil.which("promtool") is None:
        server_missing("promtool (Debian's prometheus package)")
    checked = subprocess.run(
        ["promtool", "check", "rules", str(ALERTS_FILE)], capture_output=True, text=True, timeout=60
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
