"""What ``arcflow doctor`` concludes from one snapshot of the cluster and of NATS (pure).

:func:`diagnose` takes a :class:`Snapshot` (manifests as the API server returns them, the
registrar's scale set ids, GitHub's view of each set through the registrar's RPC, the dead
letters of the last hour) and returns one :class:`Finding` per thing that is stuck: what, on
which set and variant, since when, why, and the one thing to do. No I/O here
(``doctor.py`` reads; ADR 0064).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from typing import Any, Final

from arcflow.common.constants import LABEL_RUNNER_VARIANT, LABEL_SCALE_SET_NAME
from arcflow.common.timestamps import parse_kube_time

Manifest = Mapping[str, Any]

#: A state younger than this is work in progress, not stuck (a pod being scheduled, a set
#: being registered, a runner waiting for its JIT config on a loaded machine).
STUCK_AFTER: Final = timedelta(seconds=60)
#: Runner phases that are over (the runner is cleared, nothing waits on it).
_DONE_PHASES: Final = frozenset({"Succeeded", "Failed"})

#: Condition reason -> the one thing to do (``{ns}``, ``{ars}``, ``{url}``, ``{secret}``).
FIXES: Final[Mapping[str, str]] = {
    "GitHubUnreachable": "make {url} reachable from the registrar (DNS, proxy, firewall) or "
    "fix spec.githubConfigUrl; the registrar retries on its own",
    "CredentialsRefused": "renew the token or GitHub App in Secret {ns}/{secret}, or give it "
    "admin rights on the organization or repository of {url}",
    "CredentialsUnusable": "put github_token, or github_app_id, github_app_installation_id and "
    "github_app_private_key, into Secret {ns}/{secret}",
    "GitHubSecretNotFound": "create Secret {ns}/{secret} (spec.githubConfigSecret) with the "
    "GitHub credentials",
    "ServerConnectionInvalid": "fix the CA ConfigMap or proxy Secret the message names",
    "CACertificateUnusable": "fix the CA ConfigMap of spec.githubServerTLS (the message names "
    "the key)",
    "ScaleSetDeletedOnGitHub": "nothing: the registrar registers it again; if it stays, read "
    "the registrar's log",
    "RegistrationRejected": "fix what the message names (runner group, labels) in the ARS; "
    "arcflow audit --domain errors --ars {ars}",
    "RegistrationFailed": "arcflow audit --domain errors --ars {ars} says why",
    "SessionConflict": "another listener holds the scale set's session: stop the other "
    "listener (a second installation, an old pod); the session idles out on GitHub otherwise",
    "SessionRefused": "the service answered without a usable session; the listener retries on "
    "its own: if it stays, kubectl logs the listener pod of {ns}/{ars}",
    "ScaleSetNotFound": "GitHub no longer has the scale set: the registrar checks and registers "
    "it again under the same name; if it stays, arcflow audit --domain errors --ars {ars}",
    "SessionError": "the listener cannot open a message session (the message says why); "
    "kubectl logs the listener pod of {ns}/{ars}",
    "InvalidSpec": "fix the fields the message names (arcflow validate FILE)",
    "ControllerNamespaceMissing": "create the reconciler's controller namespace",
    "NoResourceQuota": "create a ResourceQuota in {ns} for the budget, or drop "
    "spec.capacity.fromResourceQuota (the set is bounded by spec.capacity alone meanwhile)",
}
DEFAULT_FIX: Final = "kubectl describe ars -n {ns} {ars}"
#: The reconciler's Event on a runner whose pod the API server refused (its message).
REASON_POD_REFUSED: Final = "RunnerPodRefused"
REFUSED_FIX: Final = (
    "fix what the API server's message names (the pod's ServiceAccount, the namespace's "
    "ResourceQuota or PodSecurity level, the template): kubectl describe er -n {ns} {runner}"
)


@dataclass(frozen=True, slots=True)
class ScaleSetOnGitHub:
    """One registered scale set as GitHub has it (the registrar's ``scale-sets`` RPC)."""

    variant: str
    scale_set_id: int
    exists: bool
    assigned_jobs: int = 0
    running_jobs: int = 0


@dataclass(frozen=True, slots=True)
class DeadLetter:
    subject: str
    reason: str
    occurred_at: datetime
    namespace: str = ""
    ars: str = ""


@dataclass(frozen=True, slots=True)
class SetInfo:
    """One AutoscalingRunnerSet as ``doctor.py`` parsed it."""

    manifest: Manifest
    variants: tuple[str, ...]
    #: variant -> scale set id from the ARS annotations (what the reconciler mirrored).
    annotated_ids: Mapping[str, int]
    #: Why the spec does not parse (then ``variants`` is empty).
    parse_error: str = ""

    @property
    def namespace(self) -> str:
        return str((self.manifest.get("metadata") or {}).get("namespace") or "")

    @property
    def name(self) -> str:
        return str((self.manifest.get("metadata") or {}).get("name") or "")


@dataclass
class Snapshot:
    now: datetime
    sets: list[SetInfo]
    runner_sets: Sequence[Manifest] = field(default_factory=list)
    runners: Sequence[Manifest] = field(default_factory=list)
    runner_pods: Sequence[Manifest] = field(default_factory=list)
    listeners: Sequence[Manifest] = field(default_factory=list)
    listener_pods: Sequence[Manifest] = field(default_factory=list)
    #: (namespace, ars, variant) -> scale set id in the registrar's KV bucket; None: not read.
    records: Mapping[tuple[str, str, str], int] | None = None
    #: (namespace, ars) -> GitHub's view; a set missing here was not asked (or could not be).
    github: Mapping[tuple[str, str], Sequence[ScaleSetOnGitHub]] = field(default_factory=dict)
    #: Dead letters of the last hour; None: not read.
    dead_letters: Sequence[DeadLetter] | None = None
    #: The reconciler's ``RunnerPodRefused`` Events (on runners and on sets).
    pod_refusals: Sequence[Manifest] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Finding:
    namespace: str
    ars: str
    variant: str | None
    check: str
    what: str
    since: datetime | None
    why: str
    fix: str

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["since"] = self.since.isoformat() if self.since else None
        return data


def _meta(obj: Manifest) -> Mapping[str, Any]:
    value = obj.get("metadata")
    return value if isinstance(value, Mapping) else {}


def _created(obj: Manifest) -> datetime | None:
    return parse_kube_time(_meta(obj).get("creationTimestamp"))


def _labels(obj: Manifest) -> Mapping[str, str]:
    return _meta(obj).get("labels") or {}


def _old_enough(since: datetime | None, now: datetime) -> bool:
    return since is None or now - since >= STUCK_AFTER


def _fix(reason: str, info: SetInfo) -> str:
    spec = info.manifest.get("spec") or {}
    return FIXES.get(reason, DEFAULT_FIX).format(
        ns=info.namespace,
        ars=info.name,
        url=spec.get("githubConfigUrl") or "spec.githubConfigUrl",
        secret=spec.get("githubConfigSecret") or "(spec.githubConfigSecret)",
    )


def _owned_by(obj: Manifest, kind: str) -> str | None:
    for ref in _meta(obj).get("ownerReferences") or []:
        if isinstance(ref, Mapping) and ref.get("kind") == kind:
            return str(ref.get("name") or "")
    return None


def _pod_stage(pod: Manifest) -> tuple[str, str]:
    """(stage, detail) of a pod that has not started: scheduling, or a container waiting."""
    status = pod.get("status") or {}
    for condition in status.get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("status") != "True":
            return "scheduling", str(condition.get("message") or condition.get("reason") or "")
    for state in status.get("containerStatuses") or []:
        waiting = (state.get("state") or {}).get("waiting")
        if waiting:
            return str(waiting.get("reason") or "waiting"), str(waiting.get("message") or "")
    return str(status.get("phase") or "Pending"), ""


def _set_findings(info: SetInfo, snap: Snapshot) -> list[Finding]:
    ns, ars = info.namespace, info.name
    found: list[Finding] = []
    created = _created(info.manifest)

    def add(
        variant: str | None, check: str, what: str, since: datetime | None, why: str, fix: str
    ) -> None:
        found.append(Finding(ns, ars, variant, check, what, since, why, fix))

    if _meta(info.manifest).get("deletionTimestamp"):
        deleting_since = parse_kube_time(_meta(info.manifest).get("deletionTimestamp"))
        if _old_enough(deleting_since, snap.now):
            add(
                None,
                "deletion",
                "being deleted",
                deleting_since,
                "its runners, runner sets or listener are still there (finalizers)",
                f"kubectl get ers,er,autoscalinglisteners -A -l {LABEL_SCALE_SET_NAME}={ars}",
            )
        return found
    if info.parse_error:
        add(None, "spec", "spec does not parse", created, info.parse_error, FIXES["InvalidSpec"])
        return found
    conditions = (info.manifest.get("status") or {}).get("conditions") or []
    explained = False
    for condition in conditions:
        if condition.get("status") != "False":
            continue
        explained = True
        reason = str(condition.get("reason") or "")
        add(
            None,
            "condition",
            f"{condition.get('type')}=False ({reason})",
            parse_kube_time(condition.get("lastTransitionTime")),
            str(condition.get("message") or ""),
            _fix(reason, info),
        )
    # Scale set ids: the registrar's record, mirrored into the ARS annotations.
    missing = [v for v in info.variants if v not in info.annotated_ids]
    if missing and _old_enough(created, snap.now):
        why = (
            "the registrar has not registered them (the condition above says why)"
            if explained
            else "the registrar has not registered them and reported nothing on the ARS"
        )
        for variant in missing:
            recorded = snap.records.get((ns, ars, variant)) if snap.records is not None else None
            if recorded:
                why_v = f"registered as {recorded}, but the reconciler has not mirrored it"
                fix = "read the reconciler's log for this ARS"
            else:
                why_v = why
                fix = f"arcflow audit --domain errors --ars {ars}"
            add(variant, "scale_set_id", "no scale set id", created, why_v, fix)
    if snap.records is not None:
        for variant, annotated in info.annotated_ids.items():
            recorded = snap.records.get((ns, ars, variant))
            if recorded and recorded != annotated:
                add(
                    variant,
                    "drift",
                    f"ARS says scale set {annotated}, the registrar {recorded}",
                    None,
                    "the reconciler has not caught up with a new registration",
                    "wait a few seconds; if it stays, read the reconciler's log",
                )
    for view in snap.github.get((ns, ars), ()):
        if not view.exists:
            add(
                view.variant,
                "github",
                f"scale set {view.scale_set_id} no longer exists on GitHub",
                None,
                "deleted on the GitHub side (by an admin, or as unused)",
                FIXES["ScaleSetDeletedOnGitHub"],
            )
    found.extend(_children_findings(info, snap, created))
    return found


def _children_findings(info: SetInfo, snap: Snapshot, created: datetime | None) -> list[Finding]:
    ns, ars = info.namespace, info.name
    found: list[Finding] = []
    if not info.annotated_ids:
        return found  # nothing is built before the ids: the id finding says it
    owned_sets = [
        e
        for e in snap.runner_sets
        if _meta(e).get("namespace") == ns and _labels(e).get(LABEL_SCALE_SET_NAME) == ars
    ]
    by_variant = {_labels(e).get(LABEL_RUNNER_VARIANT, ""): e for e in owned_sets}
    for variant in info.variants:
        ers = by_variant.get(variant)
        if ers is None:
            if info.annotated_ids.get(variant) and _old_enough(created, snap.now):
                found.append(
                    Finding(
                        ns,
                        ars,
                        variant,
                        "drift",
                        "no EphemeralRunnerSet",
                        created,
                        "the reconciler has not created it",
                        "read the reconciler's log for this ARS",
                    )
                )
            continue
        spec_id = ((ers.get("spec") or {}).get("ephemeralRunnerSpec") or {}).get("runnerScaleSetId")
        want = info.annotated_ids.get(variant)
        if want and spec_id and int(spec_id) != want:
            found.append(
                Finding(
                    ns,
                    ars,
                    variant,
                    "drift",
                    f"EphemeralRunnerSet uses scale set {spec_id}, the ARS {want}",
                    None,
                    "the reconciler has not patched it yet",
                    "wait a few seconds; if it stays, read the reconciler's log",
                )
            )
    for variant in set(by_variant) - set(info.variants):
        ers = by_variant[variant]
        if not _meta(ers).get("deletionTimestamp"):
            found.append(
                Finding(
                    ns,
                    ars,
                    variant or "(default)",
                    "drift",
                    "EphemeralRunnerSet of a variant the ARS no longer has",
                    _created(ers),
                    "not deleted yet",
                    "read the reconciler's log for this ARS",
                )
            )
    found.extend(_listener_findings(info, snap))
    found.extend(_runner_findings(info, snap, owned_sets))
    return found


def _listener_findings(info: SetInfo, snap: Snapshot) -> list[Finding]:
    ns, ars = info.namespace, info.name
    listeners = [
        al
        for al in snap.listeners
        if (al.get("spec") or {}).get("autoscalingRunnerSetNamespace") == ns
        and (al.get("spec") or {}).get("autoscalingRunnerSetName") == ars
    ]
    if not listeners:
        since = max((t for t in (_created(info.manifest),) if t is not None), default=None)
        if _old_enough(since, snap.now):
            return [
                Finding(
                    ns,
                    ars,
                    None,
                    "session",
                    "no AutoscalingListener: no session, no scaling",
                    None,
                    "the reconciler has not created it (a runner spec "
                    "change drains first, or it is being recreated)",
                    "read the reconciler's log for this ARS",
                )
            ]
        return []
    found: list[Finding] = []
    for al in listeners:
        name, al_ns = _meta(al).get("name"), _meta(al).get("namespace")
        pod = next(
            (
                p
                for p in snap.listener_pods
                if _meta(p).get("name") == name and _meta(p).get("namespace") == al_ns
            ),
            None,
        )
        since = _created(al)
        if pod is None:
            if _old_enough(since, snap.now):
                found.append(
                    Finding(
                        ns,
                        ars,
                        None,
                        "session",
                        "listener pod missing",
                        since,
                        f"AutoscalingListener {al_ns}/{name} has no pod",
                        "read the reconciler's log for the listener",
                    )
                )
            continue
        phase = (pod.get("status") or {}).get("phase")
        if phase != "Running" and _old_enough(_created(pod), snap.now):
            stage, detail = _pod_stage(pod)
            found.append(
                Finding(
                    ns,
                    ars,
                    None,
                    "session",
                    f"listener pod {phase} ({stage})",
                    _created(pod),
                    detail or "the listener is not running",
                    f"kubectl describe pod -n {al_ns} {name}",
                )
            )
    for view in snap.github.get((ns, ars), ()):
        if view.exists and view.assigned_jobs > view.running_jobs:
            coming = [
                r
                for r in snap.runners
                if _meta(r).get("namespace") == ns
                and _labels(r).get(LABEL_SCALE_SET_NAME) == ars
                and _labels(r).get(LABEL_RUNNER_VARIANT, "") == view.variant
                and (r.get("status") or {}).get("phase") not in _DONE_PHASES
            ]
            if not coming:
                found.append(
                    Finding(
                        ns,
                        ars,
                        view.variant,
                        "jobs",
                        f"{view.assigned_jobs - view.running_jobs} job(s) assigned "
                        "but not started, and no runner is coming",
                        None,
                        "GitHub assigned them to the scale set; the listener has "
                        "not scaled the runner set up",
                        "check the listener pod's log for this scale set",
                    )
                )
    return found


def _newest_refusals(events: Sequence[Manifest], namespace: str) -> dict[str, str]:
    """Runner name -> the message of its newest ``RunnerPodRefused`` Event."""
    newest: dict[str, tuple[str, str]] = {}
    for event in events:
        involved = event.get("involvedObject") or {}
        if involved.get("kind") != "EphemeralRunner" or involved.get("namespace") != namespace:
            continue
        at = str(event.get("lastTimestamp") or event.get("eventTime") or "")
        name = str(involved.get("name") or "")
        if name not in newest or at >= newest[name][0]:
            newest[name] = (at, str(event.get("message") or ""))
    return {name: message for name, (_, message) in newest.items()}


def _runner_findings(info: SetInfo, snap: Snapshot, owned_sets: list[Manifest]) -> list[Finding]:
    ns, ars = info.namespace, info.name
    set_names = {str(_meta(e).get("name")) for e in owned_sets}
    runners = [
        r
        for r in snap.runners
        if _meta(r).get("namespace") == ns and _owned_by(r, "EphemeralRunnerSet") in set_names
    ]
    runner_names = {str(_meta(r).get("name")) for r in runners}
    pods = {
        str(_meta(p).get("name")): p for p in snap.runner_pods if _meta(p).get("namespace") == ns
    }
    found: list[Finding] = []
    stuck_stages: dict[tuple[str, str], list[str]] = defaultdict(list)
    oldest: dict[tuple[str, str], datetime | None] = {}
    refusals = _newest_refusals(snap.pod_refusals, ns)
    #: variant -> the API server's refusal of one of its runners' pods.
    refused: dict[str, str] = {}
    for runner in runners:
        name = str(_meta(runner).get("name"))
        variant = _labels(runner).get(LABEL_RUNNER_VARIANT, "")
        phase = (runner.get("status") or {}).get("phase")
        since = _created(runner)
        if phase == "Failed" and (runner.get("status") or {}).get("reason") == "InvalidPod":
            refused[variant] = refused.get(variant) or str(runner["status"].get("message") or "")
            stuck_stages[(variant, "runner failed: pod refused")].append(name)
            oldest[(variant, "runner failed: pod refused")] = _min(
                oldest.get((variant, "runner failed: pod refused")), since
            )
            continue
        if _meta(runner).get("deletionTimestamp") or phase in _DONE_PHASES:
            continue
        pod = pods.get(name)
        if pod is None:
            if name in refusals:
                refused.setdefault(variant, refusals[name])
            if _old_enough(since, snap.now):
                stuck_stages[(variant, "runner without pod")].append(name)
                oldest[(variant, "runner without pod")] = _min(
                    oldest.get((variant, "runner without pod")), since
                )
            continue
        if (pod.get("status") or {}).get("phase") == "Pending" and _old_enough(
            _created(pod), snap.now
        ):
            stage, _ = _pod_stage(pod)
            stuck_stages[(variant, f"pod stuck: {stage}")].append(name)
            oldest[(variant, f"pod stuck: {stage}")] = _min(
                oldest.get((variant, f"pod stuck: {stage}")), _created(pod)
            )
    for (variant, what), names in sorted(stuck_stages.items()):
        if not what.startswith("pod stuck") and variant in refused:
            why = refused[variant]
            fix = REFUSED_FIX.format(ns=ns, runner=sorted(names)[0])
        elif what == "runner without pod":
            why = "no pod for the runner: its JIT config or the pod create failed"
            fix = f"kubectl describe ers -n {ns} (Events say why), or the reconciler's log"
        else:
            why = "pods created but not started"
            fix = f"kubectl describe pod -n {ns} {names[0]}"
        found.append(
            Finding(
                ns,
                ars,
                variant or "(default)",
                "runners",
                f"{len(names)} {what}",
                oldest.get((variant, what)),
                f"{why}: {', '.join(sorted(names)[:3])}{' ...' if len(names) > 3 else ''}",
                fix,
            )
        )
    orphans = [
        p
        for p in pods.values()
        if _labels(p).get(LABEL_SCALE_SET_NAME) == ars
        and _owned_by(p, "EphemeralRunner") is not None
        and _owned_by(p, "EphemeralRunner") not in runner_names
        and not _meta(p).get("deletionTimestamp")
        and _old_enough(_created(p), snap.now)
    ]
    if orphans:
        found.append(
            Finding(
                ns,
                ars,
                None,
                "runners",
                f"{len(orphans)} pod(s) without runner",
                min((t for t in map(_created, orphans) if t), default=None),
                "their EphemeralRunner is gone",
                f"kubectl delete pod -n {ns} "
                + " ".join(sorted(str(_meta(p).get("name")) for p in orphans)[:5]),
            )
        )
    return found


def _min(a: datetime | None, b: datetime | None) -> datetime | None:
    if a is None:
        return b
    if b is None:
        return a
    return min(a, b)


def _dead_letter_findings(snap: Snapshot) -> list[Finding]:
    if not snap.dead_letters:
        return []
    groups: dict[tuple[str, str], list[DeadLetter]] = defaultdict(list)
    for letter in snap.dead_letters:
        groups[(letter.namespace, letter.ars)].append(letter)
    found = []
    for (ns, ars), letters in sorted(groups.items()):
        letters.sort(key=lambda d: d.occurred_at)
        last = letters[-1]
        found.append(
            Finding(
                ns,
                ars,
                None,
                "dead_letters",
                f"{len(letters)} dead letter(s) in the last hour",
                letters[0].occurred_at,
                f"last on {last.subject}: {last.reason[:200]}",
                "arcflow audit --domain dlq --since 1h" + (f" --ars {ars}" if ars else ""),
            )
        )
    return found


def diagnose(snap: Snapshot) -> list[Finding]:
    """Everything stuck, set by set (sorted), then dead letters."""
    found: list[Finding] = []
    for info in sorted(snap.sets, key=lambda s: (s.namespace, s.name)):
        found.extend(_set_findings(info, snap))
    found.extend(_dead_letter_findings(snap))
    return found


def ago(since: datetime | None, now: datetime) -> str:
    """``4m12s``: how long ago (for the human output)."""
    if since is None:
        return ""
    seconds = max(0, int((now - since).total_seconds()))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


def render_human(snap: Snapshot, findings: Sequence[Finding], notes: Sequence[str] = ()) -> str:
    """Per set: ``ok`` or each finding with since, why and what to do; then the notes."""
    lines: list[str] = []
    by_set: dict[tuple[str, str], list[Finding]] = defaultdict(list)
    for finding in findings:
        by_set[(finding.namespace, finding.ars)].append(finding)
    stuck = {k for k in by_set if k[1]}
    lines.append(
        f"arcflow doctor: {len(snap.sets)} AutoscalingRunnerSet(s), {len(stuck)} with something "
        "stuck" + ("" if findings else ": all healthy")
    )
    for info in sorted(snap.sets, key=lambda s: (s.namespace, s.name)):
        key = (info.namespace, info.name)
        variants = ", ".join(v or "(default)" for v in info.variants) or "-"
        if key not in by_set:
            lines.append(f"ok     {info.namespace}/{info.name}  variants: {variants}")
            continue
        lines.append(f"STUCK  {info.namespace}/{info.name}  variants: {variants}")
        for finding in by_set.pop(key):
            lines.extend(_finding_lines(finding, snap.now))
    for (ns, ars), rest in sorted(by_set.items()):
        lines.append(f"STUCK  {ns}/{ars}" if ars else "STUCK  (no set)")
        for finding in rest:
            lines.extend(_finding_lines(finding, snap.now))
    lines.extend(f"note: {note}" for note in notes)
    return "\n".join(lines)


def _finding_lines(finding: Finding, now: datetime) -> list[str]:
    where = f"[{finding.variant}] " if finding.variant else ""
    since = (
        f"  since {finding.since.strftime('%Y-%m-%d %H:%M:%S')}Z ({ago(finding.since, now)})"
        if finding.since
        else ""
    )
    return [
        f"  - {where}{finding.what}{since}",
        f"      why: {finding.why}",
        f"      do:  {finding.fix}",
    ]


def render_json(
    snap: Snapshot, findings: Sequence[Finding], notes: Sequence[str] = ()
) -> dict[str, Any]:
    stuck = {(f.namespace, f.ars) for f in findings}
    return {
        "healthy": not findings,
        "checked_at": snap.now.isoformat(),
        "sets": [
            {
                "namespace": s.namespace,
                "name": s.name,
                "variants": list(s.variants),
                "scale_set_ids": dict(s.annotated_ids),
                "healthy": (s.namespace, s.name) not in stuck,
            }
            for s in sorted(snap.sets, key=lambda s: (s.namespace, s.name))
        ],
        "findings": [f.to_json() for f in findings],
        "notes": list(notes),
    }
