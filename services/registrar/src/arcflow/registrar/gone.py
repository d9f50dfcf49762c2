"""Scale sets GitHub deleted behind our back (ADR 0064,
docs/upstream-behaviour.md#scale-sets-deleted-on-github): marked when a JIT request or the
sweep's check gets 404; the next pass takes their records out of its plan, so the variant is
registered again under the same name."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from typing import Final

from arcflow.common.actions.errors import ActionsClientError, ScaleSetNotFoundError
from arcflow.common.actions.retry import retry_deadline
from arcflow.common.models import AutoscalingRunnerSet
from arcflow.common.scaleset_records import ScaleSetRecord
from arcflow.registrar.ars_clients import ArsClients
from arcflow.registrar.credentials import CredentialsUnavailableError
from arcflow.registrar.reporting import reason_of

log = logging.getLogger(__name__)

#: How often the sweep asks GitHub whether each registered scale set still exists (one GET
#: per scale set). 0 turns it off.
VERIFY_INTERVAL_SECONDS: Final = 300.0
#: Least time between two checks that the ARS's sessions condition asks for (a listener got 404
#: for a scale set's session; ``planning.sessions_say_not_found``).
SESSION_CUE_SECONDS: Final = 30.0


class GoneScaleSets:
    """(namespace, ars, variant) -> the id of its scale set that GitHub no longer has."""

    def __init__(self, verify_interval: float = VERIFY_INTERVAL_SECONDS) -> None:
        self.gone: dict[tuple[str, str, str], int] = {}
        #: (namespace, ars) -> monotonic time its scale sets were last checked on GitHub.
        self._verified: dict[tuple[str, str], float] = {}
        self.verify_interval = verify_interval
        #: Scale sets registered again after GitHub deleted them (tests read it).
        self.reregistered = 0

    def mark(self, namespace: str, ars: str, variant: str, scale_set_id: int) -> bool:
        """GitHub answered 404 for a registered scale set. True when this is news (the caller
        then enqueues the ARS)."""
        key = (namespace, ars, variant)
        if self.gone.get(key) == scale_set_id:
            return False
        self.gone[key] = scale_set_id
        log.warning(
            "scale set deleted on the GitHub side; registering it again",
            extra={"namespace": namespace, "ars": ars, "variant": variant, "id": scale_set_id},
        )
        return True

    def registered(self, namespace: str, ars: str, variant: str) -> None:
        """The variant has a scale set again."""
        if self.gone.pop((namespace, ars, variant), None) is not None:
            self.reregistered += 1

    def forget(self, namespace: str, ars: str, variant: str) -> None:
        """The variant's scale set was deleted on purpose."""
        self.gone.pop((namespace, ars, variant), None)

    def marked(self, namespace: str, ars: str) -> bool:
        """Whether a scale set of this ARS is marked gone (its next pass registers it again)."""
        return any(key[0] == namespace and key[1] == ars for key in self.gone)

    def _checked_within(self, namespace: str, name: str, seconds: float) -> bool:
        last = self._verified.get((namespace, name))
        return last is not None and time.monotonic() - last < seconds

    def cue_due(self, namespace: str, name: str) -> bool:
        """A check asked for by the sessions condition: at most every ``SESSION_CUE_SECONDS``."""
        return not self._checked_within(namespace, name, SESSION_CUE_SECONDS)

    def verify_due(self, namespace: str, name: str) -> bool:
        if self.verify_interval <= 0:
            return False
        return not self._checked_within(namespace, name, self.verify_interval)

    async def verify(
        self,
        clients: ArsClients,
        namespace: str,
        name: str,
        ars: AutoscalingRunnerSet,
        records: Mapping[str, ScaleSetRecord],
    ) -> None:
        """Ask GitHub for each registered scale set by id; a missing one is marked gone."""
        self._verified[(namespace, name)] = time.monotonic()
        spec = ars.spec
        try:
            client = await clients.client_for(
                namespace, spec.github_config_url, spec.github_config_secret, spec
            )
            for variant, record in records.items():
                if record.github_config_url != ars.spec.github_config_url:
                    continue  # the plan registers it at the new URL anyway
                with retry_deadline(asyncio.get_running_loop().time() + 10.0):
                    try:
                        found = await client.get_runner_scale_set_by_id(record.scale_set_id)
                    except ScaleSetNotFoundError:  # GitHub's 404 (a null body is None)
                        found = None
                if found is None:
                    self.mark(namespace, name, variant, record.scale_set_id)
        except (CredentialsUnavailableError, ActionsClientError) as exc:
            # Not a verdict on the scale sets; the next pass that needs GitHub reports it.
            log.info(
                "could not check the scale sets on GitHub",
                extra={"namespace": namespace, "ars": name, "error": reason_of(exc)},
            )

    def drop(
        self, namespace: str, name: str, records: dict[str, ScaleSetRecord], wanted: set[str]
    ) -> list[ScaleSetRecord]:
        """Records of wanted variants whose scale set GitHub no longer has, taken out of
        ``records`` so the plan registers them again (the KV record is overwritten)."""
        dropped = []
        for variant, record in list(records.items()):
            if variant in wanted and self.gone.get((namespace, name, variant)) == (
                record.scale_set_id
            ):
                dropped.append(records.pop(variant))
        return dropped
