"""The diagnosis parts of ``bench gpu-goals``: the profile's grouping by room and the trace's
client rows (pure functions over py-spy's collapsed stacks and OTLP spans)."""

from __future__ import annotations

import pytest

from bench.profile import by_part
from bench.trace import ClientTimes, timeline


def test_profile_samples_are_grouped_by_the_room_of_their_innermost_frame() -> None:
    collapsed = "\n".join(
        [
            "process 1;Thread._bootstrap (threading.py:1002);Thread.run (threading.py:982) 30",
            "Task;_StreamResponseMixin._read (grpc/aio/_call.py:384) 20",
            "Task;RequestResponseCycle.send (uvicorn/protocols/http/httptools_impl.py:544) 25",
            "main (gateway/cli.py:124);Runner.run (asyncio/runners.py:118) 5",
            "Task;text_response (gateway/triton/outputs.py:50) 10",
            "Task;JSONEncoder.iterencode (json/encoder.py:258) 10",
        ]
    )
    lines = by_part(collapsed).splitlines()
    assert (
        lines[1] == "  30.0  grpc poller thread (C core: Triton's socket, HTTP/2, completion queue)"
    )
    shares = {line[8:]: float(line[:6]) for line in lines[1:]}
    assert shares["HTTP write (uvicorn's send: a write per body)"] == 25.0
    assert shares["grpc.aio per response (completion -> loop, next read started)"] == 20.0
    assert shares["the gateway's own Python"] == 10.0
    assert shares["frameworks and the rest"] == 10.0
    assert shares["event loop (uvloop: epoll, C callbacks)"] == 5.0


def test_trace_timeline_places_the_client_before_and_after_the_gateway() -> None:
    trace_pb2 = pytest.importorskip("opentelemetry.proto.trace.v1.trace_pb2")
    ms = 1_000_000
    root = trace_pb2.Span(trace_id=b"t" * 16, span_id=b"r" * 8, name="POST /v1/chat/completions",
                          start_time_unix_nano=100 * ms, end_time_unix_nano=200 * ms)  # fmt: skip
    root.attributes.add(key="mmgw.request_id").value.string_value = "bench-0"
    first = trace_pb2.Span(trace_id=b"t" * 16, span_id=b"f" * 8, parent_span_id=b"r" * 8,
                           name="first_token", start_time_unix_nano=104 * ms,
                           end_time_unix_nano=110 * ms)  # fmt: skip
    times = ClientTimes(sent={"bench-0": 98 * ms}, first_token={"bench-0": 111 * ms})
    rows = {
        line.split(" | ")[0].lstrip("| "): line.split(" | ")[1:]
        for line in timeline([root, first], client=times).splitlines()[2:]
    }
    assert rows["client: send -> request start"][1:3] == ["-2.000", "2.000"]
    assert rows["client: first token relayed -> read"][1:3] == ["10.000", "1.000"]
    assert rows["client: TTFT (send -> first token read)"][2] == "13.000"
    assert rows["first_token"][1:3] == ["4.000", "6.000"]


def test_strace_counts_become_calls_per_token() -> None:
    from bench.profile import per_token

    summary = """% time     seconds  usecs/call     calls    errors syscall
------ ----------- ----------- --------- --------- -------------------
 78.28    9.576118        6844      1399       365 futex
  6.96    0.851678          35     2000           write
  0.78    0.096001           8      1000         1 recvfrom
------ ----------- ----------- --------- --------- -------------------
100.00   12.232955         217      4399       366 total"""
    lines = per_token(summary, 1000).splitlines()
    assert lines[0] == "1000 tokens relayed"
    assert [line.split() for line in lines[3:]] == [
        ["4.399", "total"], ["2.000", "write"], ["1.399", "futex"], ["1.000", "recvfrom"]
    ]  # fmt: skip
