"""Reading /metrics as Prometheus does: the text format parsed by prometheus-client's own parser."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

METRICS_URL = "/metrics"


def parse(text: str) -> dict[tuple[str, tuple], float]:
    """{(sample name, sorted labels): value} for every sample."""
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def scrape(client) -> dict[tuple[str, tuple], float]:
    """One scrape from loopback (the test client's REMOTE_ADDR is 127.0.0.1)."""
    response = client.get(METRICS_URL)
    assert response.status_code == 200, response.content
    return parse(response.content.decode())


def value(samples: dict, name: str, **labels) -> float | None:
    return samples.get((name, tuple(sorted(labels.items()))))


def family_names(text: str) -> set[str]:
    """Every family's name and every sample's name (`x_total`, `x_bucket`, ...) the scrape shows."""
    names = set()
    for family in text_string_to_metric_families(text):
        names.add(family.name)
        names.update(sample.name for sample in family.samples)
        if family.type == "counter":
            names.add(family.name + "_total")
    return names
