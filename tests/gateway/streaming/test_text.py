from gateway.streaming.text import CumulativeToDelta, StopMatcher, StrippedDeltas


def feed_all(matcher: StopMatcher, pieces: list[str]) -> str:
    out = "".join(matcher.feed(p) for p in pieces)
    return out + matcher.flush()


def test_no_stops_passes_text_through_unchanged() -> None:
    assert feed_all(StopMatcher([]), ["a", "b", "c"]) == "abc"


def test_stop_split_across_deltas_is_cut_before_the_stop() -> None:
    matcher = StopMatcher(["STOP"])
    assert feed_all(matcher, ["hello S", "TO", "P and more"]) == "hello "
    assert matcher.stopped


def test_partial_stop_prefix_is_released_when_it_does_not_complete() -> None:
    matcher = StopMatcher(["STOP"])
    assert matcher.feed("abc ST") == "abc "
    assert matcher.feed("ART") == "START"
    assert not matcher.stopped


def test_earliest_of_several_stops_wins() -> None:
    matcher = StopMatcher(["world", "lo"])
    assert feed_all(matcher, ["hello world"]) == "hel"


def test_held_tail_is_flushed_at_end_of_stream() -> None:
    matcher = StopMatcher(["\n\n"])
    assert matcher.feed("line\n") == "line"
    assert matcher.flush() == "\n"


def test_cumulative_to_delta() -> None:
    to_delta = CumulativeToDelta()
    assert [to_delta(t) for t in ["sing", "singapore", "singapore!"]] == ["sing", "apore", "!"]


def test_stripped_deltas_join_to_the_stripped_windows() -> None:
    deltas = StrippedDeltas()
    out: list[str] = []
    for window in ([" Hel", "lo  ", " world ", "\n"], ["   "], [" Next", " one. "]):
        deltas.separate()
        out.extend(deltas.feed(piece) for piece in window)
    assert "".join(out) == "Hello   world Next one."
