"""Who creates and registers runners when two reconciler replicas run (ADR 0033,
docs/reconciler.md "Two replicas"): the ERS runner-name claim and creation lease, and the
ER's JIT claim. Pure functions and constants only."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

# Which replica asked the registrar for this runner's JIT config, and when: a conditional
# patch (resourceVersion) makes exactly one of two racing replicas the one that asks; the
# replica that creates a runner writes it at creation.
ANNOTATION_JIT_CLAIM = "arcflow.io/jit-claim"

# The API server's generateName alphabet (no vowels, no look-alikes): our names look the same.
_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
# The ERS's runner-name claim: a counter of names handed out, the last batch, who and when.
ANNOTATION_RUNNER_CLAIM = "arcflow.io/runner-claim"
RUNNER_CLAIM_TTL_SECONDS = 10.0
# A claim is also a short lease on creating the set's runners (ADR 0033): its holder reserves a
# block of names and creates from it without a new claim until the block is used up or the
# lease is about to end; another replica creates nothing for the set while the lease lives.
RUNNER_LEASE_SECONDS = 10.0
RUNNER_LEASE_RENEW_SECONDS = 4.0
RUNNER_NAME_BLOCK = 16
# A JIT claim older than this is taken over by another replica.
JIT_CLAIM_TTL_SECONDS = 30.0


def runner_name(generate_name: str, ers_uid: str, index: int) -> str:
    """The ``index``-th runner name of one ERS (pure): ``<ers>-runner-xxxxx``.

    Names come from a counter that only grows (kept on the ERS, bumped by a conditional
    patch), so a name is never reused and two replicas never invent different names for the
    same missing runner: the one whose claim lost gets 409 and re-reads.
    """
    digest = hashlib.sha256(f"{ers_uid}/{index}".encode()).digest()
    return generate_name + "".join(_NAME_ALPHABET[b % len(_NAME_ALPHABET)] for b in digest[:5])


@dataclass(frozen=True, slots=True)
class RunnerClaim:
    next_index: int = 0
    names: tuple[str, ...] = ()
    by: str = ""
    at: float = 0.0
    # The patchID these names were created for: a scale request is served once, even after
    # its runners finished and were deleted before the listener lowered the replicas.
    patch_id: int = 0
    # End of the creation lease of ``by`` (wall-clock seconds; 0: no lease). ``next_index`` is
    # then the end of the block of names it reserved.
    until: float = 0.0

    def encode(self) -> str:
        return json.dumps(
            {
                "next": self.next_index,
                "names": list(self.names),
                "by": self.by,
                "at": self.at,
                "patch": self.patch_id,
                "until": self.until,
            }
        )

    def leased_to_another(self, me: str, now: float) -> bool:
        """Another replica holds a live creation lease on the set (pure)."""
        return bool(self.by) and self.by != me and now < self.until


def parse_runner_claim(annotations: Mapping[str, str]) -> RunnerClaim:
    """The runner-name claim in a set's ``annotations`` (pure); an unreadable one is empty."""
    raw = annotations.get(ANNOTATION_RUNNER_CLAIM)
    try:
        value = json.loads(raw) if raw else {}
        return RunnerClaim(
            int(value.get("next", 0)),
            tuple(str(n) for n in value.get("names", [])),
            str(value.get("by", "")),
            float(value.get("at", 0.0)),
            int(value.get("patch", 0)),
            float(value.get("until", 0.0)),
        )
    except (ValueError, TypeError, AttributeError):
        return RunnerClaim()


# A scale request the set's shared capacity held back (ADR 0110): the runners it still owes,
# created as room frees up without a new patchID. Kept with the set so that a restarted or
# second replica goes on with the same count instead of topping up finished runners.
ANNOTATION_REQUEST_OWED = "arcflow.io/request-owed"


@dataclass(frozen=True, slots=True)
class OwedRunners:
    """The runners a capacity-short scale request (``patch_id``, ``replicas``) still owes."""

    patch_id: int
    replicas: int
    owed: int

    def encode(self) -> str:
        return json.dumps({"patch": self.patch_id, "replicas": self.replicas, "owed": self.owed})

    def of(self, patch_id: int, replicas: int) -> int | None:
        """The runners still owed when this is the request (``patch_id``, ``replicas``), else
        ``None`` (pure): a new request replaces what an old one owed."""
        if patch_id == 0 or (self.patch_id, self.replicas) != (patch_id, replicas):
            return None
        return self.owed if self.owed > 0 else None


def parse_owed_runners(annotations: Mapping[str, str]) -> OwedRunners | None:
    """What a set's ``annotations`` say its current short request owes (pure); an unreadable
    value owes nothing."""
    raw = annotations.get(ANNOTATION_REQUEST_OWED)
    try:
        value = json.loads(raw) if raw else None
        if not isinstance(value, dict):
            return None
        return OwedRunners(int(value["patch"]), int(value["replicas"]), int(value["owed"]))
    except (ValueError, TypeError, KeyError):
        return None


def in_flight_runners(claim: RunnerClaim, live_names: set[str], me: str, now: float) -> int:
    """Runners another replica claimed moments ago and is still creating (pure)."""
    if claim.by == me or now - claim.at >= RUNNER_CLAIM_TTL_SECONDS:
        return 0
    return sum(1 for name in claim.names if name not in live_names)


def jit_claim_holder(annotations: Mapping[str, str], now: datetime) -> str | None:
    """The replica holding a fresh JIT claim on a runner with ``annotations`` (pure), or
    ``None``."""
    claim = annotations.get(ANNOTATION_JIT_CLAIM, "")
    instance, _, stamp = claim.rpartition("@")
    if not instance or not stamp:
        return None
    try:
        age = now.timestamp() - float(stamp)
    except ValueError:
        return None
    return instance if age < JIT_CLAIM_TTL_SECONDS else None
