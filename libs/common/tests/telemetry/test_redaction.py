"""Secret redaction: by key and by shape, in text, mappings and log output."""

from __future__ import annotations

import io
import json
import logging

import pytest

from arcflow.common.telemetry import MASK, redact_text, redact_value, setup_logging

GHP = "ghp_" + "a1B2c3D4e5" * 4
GHS = "ghs_" + "Z9y8X7w6V5" * 4
PAT = "github_pat_11ABCDEFG0" + "x" * 60
JWT = "eyJhbGciOiJSUzI1NiJ9.eyJpc3MiOiIxMjMifQ.c2lnbmF0dXJlLXZhbHVl"
PEM = (
    "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo\n"
    "4lgOEePzNm0tRgeLezV6ffAt0gunVTLw7onLRnrq0\n-----END RSA PRIVATE KEY-----"
)
SECRETS = (GHP, GHS, PAT, JWT, "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo")


@pytest.mark.parametrize("secret", [GHP, GHS, PAT, JWT])
def test_token_shapes_are_masked_in_free_text(secret: str) -> None:
    out = redact_text(f"calling api with {secret} now")
    assert secret not in out
    assert MASK in out
    assert out.startswith("calling api with ")
    assert out.endswith(" now")


def test_pem_private_key_block_is_masked_whole() -> None:
    out = redact_text(f"key:\n{PEM}\nafter")
    assert "MIIEow" not in out
    assert "PRIVATE KEY" not in out
    assert out.endswith("after")
    truncated = redact_text(PEM[:80])  # a cut-off block (e.g. truncated payload) still goes
    assert "MIIEow" not in truncated


@pytest.mark.parametrize(
    "text",
    [
        "password=hunter2 user=bob",
        'password: "hunter2", user: bob',
        "{'github_token': 'hunter2'}",
        '{"client_secret":"hunter2"}',
        "Authorization: Bearer hunter2hunter2",
        "encoded_jit_config=hunter2",
    ],
)
def test_values_of_secret_keys_are_masked(text: str) -> None:
    out = redact_text(text)
    assert "hunter2" not in out
    assert MASK in out


def test_ordinary_text_is_untouched() -> None:
    text = "scale set 7 (arc/big, variant gpu) desired=3 key=linux ghp short ghp_x"
    assert redact_text(text) == text


def test_mappings_and_sequences_are_redacted_recursively() -> None:
    value = {
        "name": "big",
        "github_app_private_key": "anything at all",
        "nested": [{"note": f"use {GHS}"}, ("token", "plain")],
        "raw": PEM.encode(),
        "count": 3,
    }
    out = redact_value(value)
    dumped = json.dumps(out)
    assert "anything at all" not in dumped
    assert GHS not in dumped
    assert "MIIEow" not in dumped
    assert isinstance(out, dict)
    assert out["name"] == "big"
    assert out["count"] == 3


@pytest.mark.parametrize("json_output", [True, False])
def test_log_lines_never_carry_secrets(json_output: bool) -> None:
    stream = io.StringIO()
    handler = setup_logging("test-svc", json_output=json_output, level="DEBUG", stream=stream)
    try:
        logger = logging.getLogger("arcflow.test.redaction")
        logger.info("got token %s for %s", GHP, "arc/big")
        logger.warning("jit", extra={"jit_config": "W3siaWQiOjF9XQ==", "note": f"jwt {JWT}"})
        try:
            raise RuntimeError(f"auth failed with {PAT}")
        except RuntimeError:
            logger.exception("failure; password=hunter2")
        logger.error("pem %s", PEM)
    finally:
        logging.getLogger().removeHandler(handler)
    output = stream.getvalue()
    for secret in (*SECRETS, "W3siaWQiOjF9XQ==", "hunter2"):
        assert secret not in output, secret
    assert "arc/big" in output
    assert "RuntimeError" in output
    if json_output:
        lines = [json.loads(line) for line in output.splitlines() if line.startswith("{")]
        assert lines[0]["service"] == "test-svc"
        assert lines[0]["level"] == "INFO"
        assert lines[1]["jit_config"] == MASK
        assert "exc" in lines[2]


def test_setup_logging_is_idempotent() -> None:
    root = logging.getLogger()
    first = setup_logging("a", stream=io.StringIO())
    second = setup_logging("a", stream=io.StringIO())
    try:
        assert first not in root.handlers
        assert second in root.handlers
    finally:
        root.removeHandler(second)


@pytest.mark.parametrize("char", ["x", "9", "-"])
def test_long_runs_of_name_characters_are_redacted_in_linear_time(char: str) -> None:
    # A dead letter carries up to 8 KiB of an attacker's payload. The keyed-value pattern once
    # retried from every position of a run of name characters: quadratic, about 2 s for 8 KiB
    # (the event loop stalled). 256 KiB would have taken minutes; linear, it takes milliseconds.
    # The bound is far above either machine noise or a figure: it only catches the quadratic.
    import time

    text = char * 262_144 + " password=hunter2"
    started = time.process_time()
    redacted = redact_text(text)
    assert time.process_time() - started < 5.0
    assert redacted.endswith(f"password={MASK}")
