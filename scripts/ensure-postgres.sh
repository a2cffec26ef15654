#!/usr/bin/env bash
# Make sure the PostgreSQL the tests use answers: start the local cluster when it is
# installed and stopped; otherwise fail with one clear line. The tests never skip it.
set -u
# The server to check: HOOKINBOX_TEST_PG_HOST/PORT when set, else the host and port of
# HOOKINBOX_TEST_PG_URL (the URL the tests connect to), else 127.0.0.1:5432.
parsed_host="" parsed_port=""
if [ -n "${HOOKINBOX_TEST_PG_URL:-}" ]; then
  authority=${HOOKINBOX_TEST_PG_URL#*://}   # drop the scheme
  authority=${authority%%[/?]*}              # drop /database and ?query
  authority=${authority##*@}                 # drop user:password@
  if [[ $authority == \[* ]]; then           # [ipv6]:port
    parsed_host=${authority%%]*}; parsed_host=${parsed_host#[}
    parsed_port=${authority#*]}; parsed_port=${parsed_port#:}
  else
    parsed_host=${authority%%:*}
    [[ $authority == *:* ]] && parsed_port=${authority##*:}
  fi
fi
url_host=${HOOKINBOX_TEST_PG_HOST:-${parsed_host:-127.0.0.1}}
url_port=${HOOKINBOX_TEST_PG_PORT:-${parsed_port:-5432}}

ready() { pg_isready -q -h "$url_host" -p "$url_port" 2>/dev/null; }
if ! command -v pg_isready >/dev/null 2>&1; then
  ready() { (exec 3<>"/dev/tcp/$url_host/$url_port") 2>/dev/null; }
fi

ready && exit 0
case $url_host in 127.0.0.1|localhost|::1) local_server=1 ;; *) local_server=0 ;; esac
# Only a server on this machine can be started from here.
if [ "$local_server" = 1 ] && command -v pg_ctlcluster >/dev/null 2>&1 && [ -d /etc/postgresql ]; then
  for version in $(ls /etc/postgresql); do
    echo "PostgreSQL is not answering; starting cluster $version/main" >&2
    pg_ctlcluster --skip-systemctl-redirect "$version" main start || true
  done
  for _ in $(seq 1 30); do ready && exit 0; sleep 1; done
fi
echo "error: PostgreSQL is not reachable at $url_host:$url_port and could not be started;" \
     "the test suite needs it (set HOOKINBOX_TEST_PG_URL to use another server)" >&2
exit 1
