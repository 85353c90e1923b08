#!/usr/bin/env bash
# Gives a running settee the settings CouchDB's `make elixir` gives CouchDB before its Elixir
# integration suite runs (dev/run and test/elixir/test/config/test-config.ini), through
# /_node/_local/_config, so the suite meets settee configured as it meets CouchDB:
#   scripts/couchdb-suite-profile.sh http://127.0.0.1:15984 adm:pass
# Settings CouchDB's profile has that settee has no use for (erlang query servers, the
# replicator's startup jitter, dreyfus, nouveau, log level, the node-local port) are left out.
set -euo pipefail
url=${1:?url}
auth=${2:-adm:pass}
put() {
    curl -fsS -u "$auth" -X PUT "$url/_node/_local/_config/$1/$2" \
        -H 'content-type: application/json' -d "$3" >/dev/null
}
put chttpd authentication_handlers '"{chttpd_auth, jwt_authentication_handler}, {chttpd_auth, proxy_authentication_handler}, {chttpd_auth, cookie_authentication_handler}, {chttpd_auth, default_authentication_handler}"'
put chttpd_auth iterations '"9"'
