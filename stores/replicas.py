"""The ``kb-agent serve`` replicas sharing one Postgres, and what graph and settings each one runs.

Replicas behind one load balancer hand threads to each other, so they must run the same graph with the same
settings: a thread whose turns alternate between two versions would see two different agents. Each replica
writes a row at start and refreshes it while it lives; a replica starting with another graph version or
settings than a live peer refuses to start. Rows of replicas not seen for ``GONE_AFTER`` seconds (killed, or
stopped without a goodbye) are dropped, so a deployment can be upgraded by stopping all old replicas first.
Settings are stored as a short hash per setting: the difference can be named without storing a value.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from stores.postgres import open_pool, run

TABLE = "kb_serve_replicas"
GONE_AFTER = 60.0  # seconds without a heartbeat after which a replica is considered gone
HEARTBEAT = 15.0  # seconds between a live replica's refreshes of its row
_LOCK = 7_301_955_114  # advisory lock: two replicas starting together check one after the other


@dataclass
class Replica:
    """A peer as its row describes it."""

    replica_id: str
    address: str
    graph_version: str
    settings: dict[str, str]
    seen_ago: float


class ReplicaRegistry:
    """The replicas table of one Postgres database: on ``pool`` (the deployment's, left open by ``close``),
    else on a small pool of its own for ``url``."""

    def __init__(self, url: str = "", *, pool: Any = None) -> None:
        self._owns_pool = pool is None
        self.pool = open_pool(url, max_size=2) if pool is None else pool
        self.execute(
            f"CREATE TABLE IF NOT EXISTS {TABLE} (replica_id TEXT PRIMARY KEY, address TEXT NOT NULL, "
            "graph_version TEXT NOT NULL, settings JSONB NOT NULL, started_at TIMESTAMPTZ NOT NULL DEFAULT now(), "
            "seen_at TIMESTAMPTZ NOT NULL DEFAULT now())"
        )

    def execute(self, sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
        """One statement that leaves the same rows when it runs twice (so it is retried once on a
        connection lost mid-way); the rows it returned."""

        def statement(conn: Any) -> list[Any]:
            cursor = conn.execute(sql, params)
            return cursor.fetchall() if cursor.description else []

        return run(self.pool, statement, retry=True)

    def close(self) -> None:
        """Close the pool this registry opened (never one it was handed)."""
        if self._owns_pool:
            self.pool.close()

    def join(
        self,
        replica_id: str,
        address: str,
        graph_version: str,
        settings: dict[str, str],
        compare: Any,
    ) -> None:
        """Under the advisory lock: drop gone replicas, let ``compare(peers)`` raise, then write our row."""

        def join(conn: Any) -> None:
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK,))
                conn.execute(f"DELETE FROM {TABLE} WHERE seen_at < now() - make_interval(secs => %s)", (GONE_AFTER,))
                rows = conn.execute(
                    f"SELECT replica_id, address, graph_version, settings, "
                    f"extract(epoch FROM now() - seen_at) FROM {TABLE} WHERE replica_id <> %s ORDER BY started_at",
                    (replica_id,),
                ).fetchall()
                compare([Replica(r[0], r[1], r[2], dict(r[3]), float(r[4])) for r in rows])
                conn.execute(
                    f"INSERT INTO {TABLE} (replica_id, address, graph_version, settings) VALUES (%s, %s, %s, %s) "
                    "ON CONFLICT (replica_id) DO UPDATE SET address = EXCLUDED.address, "
                    "graph_version = EXCLUDED.graph_version, settings = EXCLUDED.settings, seen_at = now()",
                    (replica_id, address, graph_version, json.dumps(settings)),
                )

        run(self.pool, join, retry=True)  # an upsert under the lock: the same row however often it runs

    def heartbeat(self, replica_id: str) -> None:
        self.execute(f"UPDATE {TABLE} SET seen_at = now() WHERE replica_id = %s", (replica_id,))

    def leave(self, replica_id: str) -> None:
        self.execute(f"DELETE FROM {TABLE} WHERE replica_id = %s", (replica_id,))
