"""parse_retry_after: delay-seconds and HTTP dates (RFC 9110 10.2.3), as Go's ParseRetryAfter."""

import pytest

from delaystream import parse_retry_after


def test_seconds_and_dates():
    assert parse_retry_after("120") == 120.0
    assert parse_retry_after(" 0 ") == 0.0
    now = 784111777.0  # Sun, 06 Nov 1994 08:49:37 GMT
    assert parse_retry_after("Sun, 06 Nov 1994 08:49:47 GMT", now=now) == 10.0
    assert parse_retry_after("Sun, 06 Nov 1994 08:49:27 GMT", now=now) == 0.0  # past: now


@pytest.mark.parametrize("bad", ["", "-1", "1.5", "soon", "Sun, 06 Nov 1994"])
def test_refused(bad):
    with pytest.raises(ValueError):
        parse_retry_after(bad)
