"""stores/replicas.py + cli/serve.check_peers on Postgres: a live peer with another graph or settings stops a
start, naming the difference; a peer gone quiet for GONE_AFTER seconds does not."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from cli import serve
from graph.fingerprint import graph_version
from stores.replicas import GONE_AFTER, TABLE, ReplicaRegistry
from tests.fixtures.serve import POSTGRES_URL, private_database

pytestmark = pytest.mark.postgres


@pytest.fixture
def database() -> Iterator[str]:
    if not POSTGRES_URL:
        pytest.skip("KB_TEST_POSTGRES_URL is not set (.ci/run starts Postgres and sets it)")
    with private_database() as url:
        yield url


def _peer(url: str, address: str, graph: str, settings: dict[str, str], seen_ago: float = 0.0) -> None:
    registry = ReplicaRegistry(url)
    try:
        registry.join(address, address, graph, settings, lambda peers: None)
        registry.execute(
            f"UPDATE {TABLE} SET seen_at = now() - make_interval(secs => %s) WHERE replica_id = %s",
            (seen_ago, address),
        )
    finally:
        registry.close()


def test_a_live_peer_with_another_graph_version_stops_the_start(database: str) -> None:
    first = serve.check_peers(database, "host-a:2026")
    registry = ReplicaRegistry(database)
    row = registry.execute(f"SELECT settings FROM {TABLE} WHERE replica_id = %s", (first,))[0]
    registry.close()
    _peer(database, "host-b:2026", "kb-agent 0.0.9 / langgraph 1.0 / 0123456789ab", dict(row[0]))
    with pytest.raises(serve.ServeError) as refused:
        serve.check_peers(database, "host-c:2026")
    message = str(refused.value)
    assert "replica host-b:2026" in message and "graph version" in message and "settings KB_AGENT_" not in message
    assert graph_version() in message and "0123456789ab" in message


def test_a_peer_not_seen_for_the_grace_period_is_gone(database: str) -> None:
    _peer(database, "old:2026", "kb-agent 0.0.1 / x / y", {"max_rounds": "z"}, seen_ago=GONE_AFTER + 5)
    replica_id = serve.check_peers(database, "new:2026")
    registry = ReplicaRegistry(database)
    try:
        ids = [r[0] for r in registry.execute(f"SELECT replica_id FROM {TABLE}")]
        assert ids == [replica_id]
        registry.leave(replica_id)
        assert registry.execute(f"SELECT count(*) FROM {TABLE}")[0][0] == 0
    finally:
        registry.close()
