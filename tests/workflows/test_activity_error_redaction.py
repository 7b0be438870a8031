"""An activity failure never carries a credential into the workflow history, whatever raised it."""

from __future__ import annotations

import pytest
from temporalio.exceptions import ApplicationError

from sleuth.activities.errors import mapped_errors
from sleuth.models.base import NonRetryableModelError, RetryableModelError


async def _raise(exc: BaseException) -> None:
    raise exc


async def test_an_unmapped_error_naming_a_key_is_masked_and_stays_retryable() -> None:
    wrapped = mapped_errors(_raise)
    with pytest.raises(ApplicationError) as info:
        await wrapped(RuntimeError("gateway said: invalid key sk-abcdefghijklmnop0123"))
    error = info.value
    assert "sk-abcdefghijklmnop0123" not in str(error) and "[REDACTED]" in str(error)
    assert error.type == "RuntimeError" and not error.non_retryable
    assert error.__cause__ is None


async def test_a_mapped_error_keeps_its_retry_semantics_with_the_key_masked() -> None:
    wrapped = mapped_errors(_raise)
    with pytest.raises(ApplicationError) as info:
        await wrapped(NonRetryableModelError("401 from https://u:pa55word-x@api.example/v1"))
    assert info.value.type == "NonRetryableModelError" and info.value.non_retryable
    assert "pa55word-x" not in str(info.value)
    with pytest.raises(ApplicationError) as retry:
        await wrapped(RetryableModelError("429 Bearer abcdefghijklmnopqrst", retry_after=3))
    assert retry.value.next_retry_delay is not None and retry.value.next_retry_delay.seconds == 3
    assert "abcdefghijklmnopqrst" not in str(retry.value)


async def test_a_key_in_the_cause_chain_is_masked_too() -> None:
    async def chained() -> None:
        try:
            raise ValueError("password=hunter2-hunter2")
        except ValueError as inner:
            raise RuntimeError("model call failed") from inner

    with pytest.raises(ApplicationError) as info:
        await mapped_errors(chained)()
    assert info.value.__cause__ is None and "hunter2-hunter2" not in repr(info.value)


async def test_a_clean_error_is_left_alone() -> None:
    with pytest.raises(RuntimeError, match="plain failure"):
        await mapped_errors(_raise)(RuntimeError("plain failure"))
