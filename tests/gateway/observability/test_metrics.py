"""GatewayMetrics: a registry per instance, hooks that move the right series."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from gateway.observability.metrics import GatewayMetrics


def samples(metrics: GatewayMetrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    body, content_type = metrics.render()
    assert content_type.startswith("text/plain")
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(body.decode())
        for s in family.samples
    }


def test_two_instances_do_not_share_series() -> None:
    first, second = GatewayMetrics(), GatewayMetrics()
    first.triton_restarted()
    assert samples(first)[("mmgw_triton_restarts_total", ())] == 1
    assert samples(second)[("mmgw_triton_restarts_total", ())] == 0


def test_media_hooks_fill_histograms_bytes_and_pixels() -> None:
    metrics = GatewayMetrics()
    metrics.media_fetched("image", 0.02, 1000)
    metrics.media_decoded("image", 0.01, 640 * 480)
    metrics.media_preprocessed("image", 0.005)
    metrics.media_prepared("m", 0.04)
    metrics.queued("decode", 0.001)
    got = samples(metrics)
    for stage in ("fetch", "decode", "preprocess"):
        key = ("mmgw_media_seconds_count", (("kind", "image"), ("stage", stage)))
        assert got[key] == 1
    assert got[("mmgw_media_bytes_total", (("kind", "image"),))] == 1000
    assert got[("mmgw_media_pixels_total", (("kind", "image"),))] == 640 * 480
    assert got[("mmgw_media_prepare_seconds_sum", (("model", "m"),))] == 0.04
    assert got[("mmgw_queue_seconds_count", (("queue", "decode"),))] == 1


def test_collisions_are_read_from_the_registry_at_scrape_time() -> None:
    metrics = GatewayMetrics()
    assert samples(metrics)[("mmgw_kv_reuse_id_collisions_total", ())] == 0
    count = {"n": 0}
    metrics.watch_collisions(lambda: count["n"])
    count["n"] = 3
    assert samples(metrics)[("mmgw_kv_reuse_id_collisions_total", ())] == 3


def test_kv_reuse_ids_and_in_flight() -> None:
    metrics = GatewayMetrics()
    metrics.kv_reuse_id_sent("m")
    metrics.in_flight.inc()
    got = samples(metrics)
    assert got[("mmgw_kv_reuse_ids_sent_total", (("model", "m"),))] == 1
    assert got[("mmgw_in_flight_requests", ())] == 1
