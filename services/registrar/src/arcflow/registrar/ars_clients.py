"""The Actions client of an ARS: its ``githubConfigUrl``, the credentials its
``githubConfigSecret`` holds and the CA and proxy its spec names, from the client cache."""

from __future__ import annotations

from arcflow.common.actions.client import ActionsClient
from arcflow.common.models import AutoscalingRunnerSetSpec
from arcflow.registrar.ars_reads import ClusterReads
from arcflow.registrar.connection import read_server_connection
from arcflow.registrar.credentials import ActionsClientCache, read_secret_data
from arcflow.registrar.planning import ars_of, github_config_of
from arcflow.registrar.records import ScaleSetRecords


class ArsClients:
    """Actions clients for the converge pass and the RPC server."""

    def __init__(
        self, reads: ClusterReads, records: ScaleSetRecords, cache: ActionsClientCache
    ) -> None:
        self.reads = reads
        self.records = records
        self.cache = cache

    async def client_for(
        self,
        namespace: str,
        config_url: str,
        secret_name: str,
        spec: AutoscalingRunnerSetSpec | None = None,
    ) -> ActionsClient:
        """The cached Actions client for these credentials and the CA and proxy the ARS
        ``spec`` names; raises :class:`CredentialsUnavailableError` when the Secret is missing
        or malformed (:class:`ServerConnectionError` for the CA ConfigMap or a proxy
        Secret)."""
        data = await read_secret_data(self.reads.kube, namespace, secret_name)
        connection = await read_server_connection(self.reads.get_or_none, namespace, spec)
        return await self.cache.client_for(
            config_url, data, f"{namespace}/{secret_name}", connection
        )

    async def client_for_ars(self, namespace: str, name: str) -> tuple[ActionsClient, int]:
        """Client of an ARS (from its spec, or from a registration when the ARS is gone) and
        its registration count; raises ``LookupError`` when neither exists."""
        doc = await self.reads.ars(namespace, name)
        records = await self.records.load(namespace, name)
        spec, url, secret = github_config_of(ars_of(doc, namespace, name), records, namespace, name)
        return await self.client_for(namespace, url, secret, spec), len(records)
