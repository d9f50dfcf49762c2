"""Runner groups and scale sets, E1-E6 (spec §2.1-2.2), over raw HTTP."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.integration
SETS = "_apis/runtime/runnerscalesets"


async def test_runner_groups_by_name_with_trailing_slash_and_seeded_default(raw):
    raw.sim.add_runner_group("gpu pool")
    default = await raw.call("GET", "_apis/runtime/runnergroups/", params={"groupName": "Default"})
    spaced = await raw.http.get(
        raw.url("_apis/runtime/runnergroups/?groupName=gpu%20pool&api-version=6.0-preview"),
        headers=raw.auth,
    )
    missing = await raw.call("GET", "_apis/runtime/runnergroups/", params={"groupName": "nope"})
    assert default.json() == {
        "count": 1,
        "value": [{"id": 1, "name": "Default", "size": 0, "isDefaultGroup": True}],
    }
    assert spaced.json()["count"] == 1
    assert spaced.json()["value"][0]["name"] == "gpu pool"
    assert spaced.json()["value"][0]["isDefaultGroup"] is False
    assert missing.json() == {"count": 0, "value": []}


async def test_create_accepts_pascal_case_setting_ignores_created_on_and_defaults_labels(raw):
    response = await raw.call(
        "POST",
        SETS,
        json={
            "NAME": "linux-x64",
            "runnergroupid": 1,
            "RunnerSetting": {"DisableUpdate": True},
            "createdOn": "0001-01-01T00:00:00Z",
        },
    )
    assert response.status_code == 200
    body = response.json()
    assert body["id"] >= 1
    assert body["name"] == "linux-x64"
    assert body["runnerGroupName"] == "Default"
    assert body["labels"] == [{"type": "System", "name": "linux-x64"}]
    assert body["RunnerSetting"] == {"disableUpdate": True}
    assert body["createdOn"].endswith("Z")
    assert not body["createdOn"].startswith("0001")
    assert body["statistics"]["totalAssignedJobs"] == 0


async def test_ids_autoincrement_and_names_are_unique_per_group(raw):
    group = raw.sim.add_runner_group("second")
    first = await raw.create_scale_set("shared-name")
    again = await raw.call("POST", SETS, json={"name": "shared-name", "runnerGroupId": 1})
    elsewhere = await raw.create_scale_set("shared-name", runnerGroupId=group.id)
    no_group = await raw.call("POST", SETS, json={"name": "x", "runnerGroupId": 77})
    no_name = await raw.call("POST", SETS, json={"runnerGroupId": 1})
    not_json = await raw.call(
        "POST", SETS, content=b"{not json", headers={"Content-Type": "application/json"}
    )
    assert elsewhere == first + 1
    assert again.status_code == 409
    assert "RunnerScaleSetExistsException" in again.json()["typeName"]
    assert no_group.status_code == 404
    assert no_name.status_code == 400
    assert no_name.json()["typeName"].startswith("System.Argument")
    assert not_json.status_code == 400


async def test_find_by_name_is_decided_by_count_and_decodes_the_name(raw):
    await raw.create_scale_set("with space")
    found = await raw.http.get(
        raw.url(f"{SETS}?name=with%20space&api-version=6.0-preview&runnerGroupId=1"),
        headers=raw.auth,
    )
    none = await raw.call("GET", SETS, params={"runnerGroupId": "1", "name": "absent"})
    assert found.json()["count"] == 1
    assert found.json()["value"][0]["name"] == "with space"
    assert none.json() == {"count": 0, "value": []}


async def test_get_update_delete_by_id(raw):
    scale_set_id = await raw.create_scale_set("to-change", labels=["a", "b"])
    group = raw.sim.add_runner_group("moved")
    renamed = await raw.call(
        "PATCH",
        f"{SETS}/{scale_set_id}",
        json={"name": "changed", "RunnerSetting": {}, "createdOn": "0001-01-01T00:00:00Z"},
    )
    moved = await raw.call("PATCH", f"{SETS}/{scale_set_id}", json={"runnerGroupId": group.id})
    fetched = await raw.call("GET", f"{SETS}/{scale_set_id}")
    assert renamed.status_code == 200
    assert renamed.json()["name"] == "changed"
    assert renamed.json()["RunnerSetting"] == {"disableUpdate": True}, "zero setting kept"
    assert moved.json()["runnerGroupId"] == group.id
    assert fetched.json()["labels"] == [
        {"type": "System", "name": "a"},
        {"type": "System", "name": "b"},
    ]
    deleted = await raw.call("DELETE", f"{SETS}/{scale_set_id}")
    assert deleted.status_code == 204
    assert deleted.content == b""
    gone = await raw.call("GET", f"{SETS}/{scale_set_id}")
    again = await raw.call("DELETE", f"{SETS}/{scale_set_id}")
    assert gone.status_code == 404
    assert "RunnerScaleSetNotFoundException" in gone.json()["typeName"]
    assert again.status_code == 404


async def test_delete_drops_session_queue_and_runners(raw):
    scale_set_id = await raw.create_scale_set("doomed")
    session = await raw.open_session(scale_set_id)
    assert (await raw.jit(scale_set_id, "doomed-runner-1")).status_code == 200
    raw.sim.enqueue_job(["doomed"])
    assert (await raw.call("DELETE", f"{SETS}/{scale_set_id}")).status_code == 204
    assert (await session.get()).status_code == 401
    stats = raw.sim.stats()
    assert stats["sessions"] == 0
    assert stats["scale_sets"] == 0
    assert sum(stats["runners"].values()) == 0
    assert stats["jobs"]["queued"] == 1, "its unstarted job goes back to the queue"
    reborn = await raw.create_scale_set("doomed")
    assert reborn != scale_set_id
    assert (await raw.jit(reborn, "doomed-runner-1")).status_code == 200, "name freed"


async def test_api_version_anywhere_and_query_key_case(raw):
    await raw.create_scale_set("q")
    for query in ("api-version=6.0-preview&name=q", "name=q&api-version=6.0-preview", "NAME=q"):
        r = await raw.http.get(raw.url(f"{SETS}?{query}"), headers=raw.auth)
        assert r.json()["count"] == 1, query
