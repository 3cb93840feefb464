"""A token holds at most ``MAX_LIVE_RUNS`` live run tokens (issue 60: every table a caller can
add rows to is capped): the next is refused with 429 and when the first expires; a revoked or
expired one frees its place; another token's count is its own. Both catalogs (the count is the
catalog's, through its index on the opener)."""

from __future__ import annotations

import pytest

from server.errors import TooManyRequests
from server.spaces.tokens import MAX_LIVE_RUNS


def test_a_token_holds_a_bounded_number_of_live_run_tokens(fake_service, clock):
    op = fake_service.operator
    opener, _ = op.create_token(ai="claude-code")
    other, _ = op.create_token(ai="cursor")
    opened = [fake_service.open_run(opener, ttl="1h")[0] for _ in range(MAX_LIVE_RUNS - 1)]
    clock.advance(minutes=10)
    opened.append(fake_service.open_run(opener, ttl="1h")[0])
    with pytest.raises(TooManyRequests) as refused:
        fake_service.open_run(opener, ttl="1h")
    assert str(MAX_LIVE_RUNS) in refused.value.message
    assert 49 * 60 <= refused.value.retry_after <= 50 * 60 + 1  # the first of them expires in 50 minutes
    assert fake_service.open_run(other)[0].parent == other.id  # another opener counts its own
    op.revoke_token(opened[-1].id)
    fake_service.open_run(opener, ttl="1h")  # a revoked one frees its place
    with pytest.raises(TooManyRequests):
        fake_service.open_run(opener, ttl="1h")
    clock.advance(minutes=51)  # the first 999 expired
    fake_service.open_run(opener, ttl="1h")
