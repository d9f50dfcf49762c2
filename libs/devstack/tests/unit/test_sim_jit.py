"""The simulator's JIT configs: what is issued reads back as the same runner's id and secret,
shaped like the real service's, and anything else is refused without echoing a secret."""

from __future__ import annotations

import base64
import json

import pytest

from arcflow.devstack.actions_sim.jit import JitConfigError, decode_jit_config, encode_jit_config
from arcflow.devstack.actions_sim.model import Runner

URL = "https://sim.example/tenant/"


def _runner() -> Runner:
    return Runner(id=7, name="r-7", scale_set_id=3, work_folder="", secret="s3cr3t-value")


def test_an_issued_config_reads_back_as_its_runner() -> None:
    encoded = encode_jit_config(_runner(), URL)
    assert decode_jit_config(encoded) == (7, "s3cr3t-value")
    files = json.loads(base64.b64decode(encoded))
    runner = json.loads(base64.b64decode(files[".runner"]))
    assert (runner["agentName"], runner["scaleSetId"], runner["serverUrl"]) == ("r-7", 3, URL)
    assert runner["workFolder"] == "_work"
    credentials = json.loads(base64.b64decode(files[".credentials"]))
    assert credentials["data"]["authorizationUrl"] == f"{URL}_apis/oauth2/token"


@pytest.mark.parametrize(
    "encoded",
    [
        "not base64!",
        base64.b64encode(b"[]").decode(),
        base64.b64encode(json.dumps({".runner": "e30="}).encode()).decode(),
    ],
)
def test_anything_else_is_refused_by_name(encoded: str) -> None:
    with pytest.raises(JitConfigError, match="not one this simulator issued") as raised:
        decode_jit_config(encoded)
    assert "s3cr3t" not in str(raised.value)
