"""How the bench runs each peer (bench/peers/): its database, schema, receiver and worker."""

from __future__ import annotations

from pathlib import Path

from harness import PEERS_DIR, PY, Proc, db_name, pg_dsn, pg_recreate, run_checked, uvicorn_cmd
from tables import PGQUEUER_SQL, PROCRASTINATE_SQL, QueueSql

PEERS = ("procrastinate", "pgqueuer")
PEER_SQL: dict[str, QueueSql] = {"procrastinate": PROCRASTINATE_SQL, "pgqueuer": PGQUEUER_SQL}


def peer_db(peer: str) -> str:
    return db_name(peer)


def peer_env(peer: str, env: dict[str, str], pgqueuer_on_conflict: str) -> dict[str, str]:
    return {
        **env,
        "PEER_DSN": pg_dsn(peer_db(peer)),
        "PEER_ON_CONFLICT": pgqueuer_on_conflict,
        # procrastinate's command line imports the app by its dotted path.
        "PYTHONPATH": str(PEERS_DIR),
    }


def _procrastinate(*args: str) -> list[str]:
    return [str(PY), "-m", "procrastinate", "--app", "procrastinate_peer.queue", *args]


def fresh_peer_db(peer: str, env: dict[str, str]) -> None:
    """Recreate the peer's own database and install the library's schema in it."""
    pg_recreate(peer_db(peer))
    if peer == "procrastinate":
        cmd = _procrastinate("schema", "--apply")
    else:
        cmd = [str(PY), str(PEERS_DIR / "pgqueuer_peer.py"), "schema"]
    run_checked(cmd, env, f"{peer} schema install")


def peer_receiver(peer: str, port: int, env: dict[str, str], logfile: Path) -> Proc:
    return Proc(peer, uvicorn_cmd(f"{peer}_peer:app", port, PEERS_DIR), env, logfile)


def peer_worker(peer: str, concurrency: int, env: dict[str, str], logfile: Path) -> Proc:
    if peer == "procrastinate":
        cmd = _procrastinate("worker", "--concurrency", str(concurrency))
    else:
        cmd = [str(PY), str(PEERS_DIR / "pgqueuer_peer.py"), "worker"]
    return Proc(f"{peer}-worker", cmd, env, logfile)
