#!/usr/bin/env python3
"""arcflow's runner: plays GitHub's runner against the Actions simulator (ADR 0091).

The runner image's command, at the path of the upstream runner image's (so a runner-set
template that says ``command: ["/home/runner/run.sh"]`` works unchanged). It needs only its JIT
config, from ``ACTIONS_RUNNER_INPUT_JITCONFIG`` as a runner pod gets it: the config names the
service URL and holds the runner's credentials. It exchanges those for a token, opens a runner
session (the runner is online and takes a job), long-polls for its job message, "runs" the job
(it sleeps for the job's duration: the simulator's jobs carry no steps), reports it complete
and exits 0. It never prints the JIT config, the secret or the token.

Python's standard library only: the image is the Python base with this one file.

SIGTERM (a pod deleted or evicted): a runner waiting for its job leaves its session and exits
0; a runner running its job finishes and reports it first (as long as the pod's grace period
lasts), then exits 0.

Test-only fault modes (``ARCFLOW_RUNNER_FAULT``, never for real use):
  hang-after-job   report the job complete, then keep running (never exit by itself);
  oom-during-job   once the job runs, allocate memory until the container's limit kills it.
``ARCFLOW_RUNNER_JOB_SECONDS`` is how long a job without a duration runs (default 1).
"""

from __future__ import annotations

import base64
import json
import os
import signal
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

ENV_JIT = "ACTIONS_RUNNER_INPUT_JITCONFIG"
ENV_FAULT = "ARCFLOW_RUNNER_FAULT"
ENV_JOB_SECONDS = "ARCFLOW_RUNNER_JOB_SECONDS"
FAULTS = ("hang-after-job", "oom-during-job")
#: Consecutive failed attempts to reach the service (1 s apart) before the runner gives up.
CONNECT_ATTEMPTS = 60
#: The longest a message poll may stay open: the service answers 202 well before.
POLL_SECONDS = 120.0


class Refused(Exception):
    """The service answered with an error status (the message names no secret)."""

    def __init__(self, status: int, what: str) -> None:
        super().__init__(f"{what}: HTTP {status}")
        self.status = status


def log(message: str) -> None:
    print(f"runner: {message}", flush=True)


def _b64json(text: str) -> dict[str, Any]:
    value = json.loads(base64.b64decode(text, validate=True))
    if not isinstance(value, dict):
        raise ValueError("not a JSON object")
    return value


class Config:
    """What the JIT config says: who the runner is, where the service is, its credentials."""

    def __init__(self, encoded: str) -> None:
        files = _b64json(encoded)
        runner = _b64json(files[".runner"])
        data = _b64json(files[".credentials"])["data"]
        self.runner_id = int(runner["agentId"])
        self.name = str(runner["agentName"])
        self.pool_id = int(runner.get("poolId", 0))
        self.server_url = str(runner["serverUrl"]).rstrip("/") + "/"
        self.client_id = str(data.get("clientId") or self.runner_id)
        self.client_secret = str(data["clientSecret"])
        self.token_url = str(data.get("authorizationUrl") or self.url("_apis/oauth2/token"))

    def url(self, path: str, **query: str) -> str:
        tail = f"?{urllib.parse.urlencode(query)}" if query else ""
        return f"{self.server_url}{path}{tail}"

    def __repr__(self) -> str:  # never the secret
        return f"Config(runner={self.runner_id}, name={self.name!r})"


def call(
    method: str,
    url: str,
    what: str,
    *,
    token: str | None = None,
    body: Any = None,
    form: dict[str, str] | None = None,
    timeout: float = 30.0,
) -> tuple[int, Any]:
    data = None
    headers = {"Accept": "application/json"}
    if form is not None:
        data = urllib.parse.urlencode(form).encode()
        headers["Content-Type"] = "application/x-www-form-urlencoded"
    elif body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            raw = response.read()
            return response.status, json.loads(raw) if raw.strip() else None
    except urllib.error.HTTPError as error:
        raise Refused(error.code, what) from None


def patiently(what: str, action: Any) -> Any:
    """``action()``, again while the service cannot be reached (not on an error answer)."""
    for attempt in range(1, CONNECT_ATTEMPTS + 1):
        try:
            return action()
        except (urllib.error.URLError, OSError) as error:
            if isinstance(error, urllib.error.HTTPError) or attempt == CONNECT_ATTEMPTS:
                raise
            log(f"{what}: cannot reach the service ({error.__class__.__name__}), retrying")
            time.sleep(1.0)
    raise AssertionError("unreachable")


class Stop(Exception):
    """SIGTERM while no job runs: leave now."""


class Runner:
    def __init__(self, config: Config) -> None:
        self.config = config
        self.token = ""
        self.session_id = ""
        self.in_job = False
        self.stopping = False

    def on_sigterm(self, signum: int, frame: Any) -> None:
        self.stopping = True
        if not self.in_job:
            raise Stop()
        # Not log(): a signal landing while the main path prints would make print() re-enter
        # stdout's buffer and raise RuntimeError there (exit 1 with the job complete). os.write
        # takes no lock; log() flushes every line, so the order holds.
        os.write(sys.stdout.fileno(), b"runner: SIGTERM: finishing the job first\n")

    def authenticate(self) -> None:
        form = {
            "grant_type": "client_credentials",
            "client_id": self.config.client_id,
            "client_secret": self.config.client_secret,
        }
        _, answer = call("POST", self.config.token_url, "token", form=form)
        self.token = str(answer["access_token"])

    def connect(self) -> None:
        path = f"_apis/distributedtask/pools/{self.config.pool_id}/sessions"
        body = {"agent": {"id": self.config.runner_id, "name": self.config.name}}
        _, answer = call("POST", self.config.url(path), "session", token=self.token, body=body)
        self.session_id = str(answer["sessionId"])

    def next_job(self) -> dict[str, Any]:
        """Long-poll until the job message comes (an ephemeral runner takes exactly one)."""
        path = f"_apis/distributedtask/pools/{self.config.pool_id}/messages"
        url = self.config.url(path, sessionId=self.session_id)
        while True:
            status, message = patiently(
                "poll",
                lambda: call("GET", url, "message poll", token=self.token, timeout=POLL_SECONDS),
            )
            if status == 200 and message:
                self.in_job = True  # from here on SIGTERM lets the job finish
                ack = self.config.url(
                    f"{path}/{message['messageId']}", sessionId=self.session_id
                )
                call("DELETE", ack, "message ack", token=self.token)
                return dict(json.loads(message["body"]))

    def complete(self, job_id: str, result: str) -> None:
        path = f"_apis/runner/jobs/{urllib.parse.quote(job_id)}/complete"
        call("POST", self.config.url(path), "complete", token=self.token, body={"result": result})

    def leave(self) -> None:
        path = f"_apis/distributedtask/pools/{self.config.pool_id}/sessions/{self.session_id}"
        try:  # the service may have dropped the ephemeral runner with its job already
            call("DELETE", self.config.url(path), "session delete", token=self.token)
        except (Refused, OSError):
            pass


def run_job(job: dict[str, Any], fault: str) -> None:
    seconds = job.get("duration")
    if seconds is None:
        seconds = float(os.environ.get(ENV_JOB_SECONDS) or 1.0)
    if fault == "oom-during-job":
        log("fault oom-during-job: allocating memory until the limit kills this container")
        hog = []
        while True:  # written bytes, so every page is resident
            hog.append(b"\x01" * (8 << 20))
            time.sleep(0.01)
    time.sleep(float(seconds))


def main() -> int:
    encoded = os.environ.get(ENV_JIT, "")
    fault = os.environ.get(ENV_FAULT, "")
    if fault and fault not in FAULTS:
        log(f"unknown {ENV_FAULT}={fault!r} (test-only; one of {', '.join(FAULTS)})")
        return 2
    if not encoded:
        log(f"no JIT config: {ENV_JIT} is empty")
        return 2
    try:
        config = Config(encoded)
    except (ValueError, KeyError, TypeError):
        log(f"{ENV_JIT} is not a JIT config this runner understands")
        return 2
    runner = Runner(config)
    signal.signal(signal.SIGTERM, runner.on_sigterm)
    try:
        patiently("token", runner.authenticate)
        patiently("session", runner.connect)
        log(f"{config.name} (runner {config.runner_id}) is online, waiting for its job")
        job = runner.next_job()
        job_id = str(job["jobId"])
        log(f"running job {job_id} ({job.get('jobDisplayName', '')})")
        run_job(job, fault)
        result = str(job.get("result") or "succeeded")
        patiently("complete", lambda: runner.complete(job_id, result))
        log(f"job {job_id} completed: {result}")
        runner.leave()
    except Stop:
        log("SIGTERM while waiting for a job: leaving")
        runner.leave()
        return 0
    except Refused as error:
        log(f"the service refused: {error}")
        return 1
    except (urllib.error.URLError, OSError) as error:
        log(f"cannot reach the service: {error.__class__.__name__}")
        return 1
    if fault == "hang-after-job":
        log("fault hang-after-job: the job is complete, this runner keeps running")
        while True:
            time.sleep(3600)
    return 0


if __name__ == "__main__":
    sys.exit(main())
