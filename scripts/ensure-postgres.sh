#!/usr/bin/env bash
# Make sure the PostgreSQL the tests use answers: start the local cluster when it is
# installed and stopped; otherwise fail with one clear line. The tests never skip it.
set -u
url_host=${HOOKINBOX_TEST_PG_HOST:-127.0.0.1}
url_port=${HOOKINBOX_TEST_PG_PORT:-5432}

ready() { pg_isready -q -h "$url_host" -p "$url_port" 2>/dev/null; }
if ! command -v pg_isready >/dev/null 2>&1; then
  ready() { (exec 3<>"/dev/tcp/$url_host/$url_port") 2>/dev/null; }
fi

ready && exit 0
if command -v pg_ctlcluster >/dev/null 2>&1 && [ -d /etc/postgresql ]; then
  for version in $(ls /etc/postgresql); do
    echo "PostgreSQL is not answering; starting cluster $version/main" >&2
    pg_ctlcluster --skip-systemctl-redirect "$version" main start || true
  done
  for _ in $(seq 1 30); do ready && exit 0; sleep 1; done
fi
echo "error: PostgreSQL is not reachable at $url_host:$url_port and could not be started;" \
     "the test suite needs it (set HOOKINBOX_TEST_PG_URL to use another server)" >&2
exit 1
