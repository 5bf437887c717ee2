#!/usr/bin/env bash
# Nova beside Stratus, for tests/bench/bench_nova_side_by_side.py (docs/performance.md, "Side by side
# with Nova"): OpenStack Nova and Placement from PyPI, in a venv of their own, with the fake driver,
# on this machine's PostgreSQL and RabbitMQ, and a no-auth stub for Keystone, Glance and Neutron
# (tests/bench/nova/stub.py). Nova 34 dropped noauth2, so its API keeps keystonemiddleware and the
# stub plays Keystone; Placement still runs with auth_strategy = noauth2.
#
#   tests/bench/nova/setup.sh install   # the venv: .stratus/bench/nova-venv (once; ~5 min)
#   tests/bench/nova/setup.sh start     # databases, RabbitMQ vhost, config, cells v2, the services
#   tests/bench/nova/setup.sh stop      # the services, then drop the databases and the vhost
#   tests/bench/nova/setup.sh status    # what runs
#
# Never touches the project's own venv. What it starts, it starts with setsid and records in
# $RUN/pids; `stop` ends those process groups only. Settings (environment):
#   NOVA_VERSION (34.0.0), PLACEMENT_VERSION (16.0.0), PYTHON (python3), PGHOST/PGPORT/PGUSER
#   (127.0.0.1/5432/postgres, trust auth), RABBIT (guest:guest@127.0.0.1:5672), NOVA_API_PORT (18774),
#   NOVA_PLACEMENT_PORT (18778), NOVA_STUB_PORT (19292), NOVA_API_WORKERS (2), NOVA_API_THREADS (8),
#   NOVA_BENCH_DIR (<repository>/.stratus/bench: the venv, and nova-run/ with config, logs, pids).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
BENCH=${NOVA_BENCH_DIR:-$ROOT/.stratus/bench}
VENV=$BENCH/nova-venv
RUN=$BENCH/nova-run
NOVA_VERSION=${NOVA_VERSION:-34.0.0}
PLACEMENT_VERSION=${PLACEMENT_VERSION:-16.0.0}
PYTHON=${PYTHON:-python3}
PGHOST=${PGHOST:-127.0.0.1} PGPORT=${PGPORT:-5432} PGUSER=${PGUSER:-postgres}
export PGHOST PGPORT PGUSER
RABBIT=${RABBIT:-guest:guest@127.0.0.1:5672}
VHOST=nova_bench
API_PORT=${NOVA_API_PORT:-18774}
PLACEMENT_PORT=${NOVA_PLACEMENT_PORT:-18778}
STUB_PORT=${NOVA_STUB_PORT:-19292}
API_WORKERS=${NOVA_API_WORKERS:-2}
API_THREADS=${NOVA_API_THREADS:-8}
DATABASES=(nova_api nova nova_cell0 nova_placement)
DB="postgresql+psycopg2://$PGUSER@$PGHOST:$PGPORT"

log() { echo "[nova-bench $(date -u +%H:%M:%S)] $*" >&2; }
psql_admin() { PGOPTIONS="-c client_min_messages=warning" psql -d postgres -v ON_ERROR_STOP=1 -qAt "$@"; }

wait_port() {  # port, what, seconds
    local deadline=$((SECONDS + $3))
    until (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; do
        if ((SECONDS > deadline)); then
            log "$2 does not listen on $1"; return 1
        fi
        sleep 1
    done
}

spawn() {  # name, command...: a process group of its own, output in $RUN/log/<name>.log
    local name=$1; shift
    setsid "$@" >"$RUN/log/$name.log" 2>&1 < /dev/null &
    echo "$! $name" >>"$RUN/pids"
    log "started $name (pid $!)"
}

install() {
    if [[ ! -x $VENV/bin/python ]]; then
        log "creating $VENV with $($PYTHON --version)"
        "$PYTHON" -m venv "$VENV"
    fi
    "$VENV/bin/pip" install -q -U pip setuptools wheel
    # psycopg2 for PostgreSQL, gunicorn to serve the two WSGI applications.
    "$VENV/bin/pip" install -q "nova==$NOVA_VERSION" "openstack-placement==$PLACEMENT_VERSION" \
        psycopg2-binary gunicorn
    "$VENV/bin/pip" list 2>/dev/null | grep -Ei '^(nova|openstack-placement|oslo\.messaging|sqlalchemy|gunicorn|eventlet) '
}

rabbit() {
    if ! command -v rabbitmqctl >/dev/null; then
        log "installing rabbitmq-server from Debian's packages"
        apt-get install -y -q rabbitmq-server >/dev/null
    fi
    if ! rabbitmqctl -q status >/dev/null 2>&1; then
        log "starting rabbitmq-server"
        rabbitmq-server -detached
        rabbitmqctl -q wait --timeout 60 /var/lib/rabbitmq/mnesia/rabbit@"$(hostname -s)".pid 2>/dev/null ||
            sleep 10
    fi
    rabbitmqctl -q delete_vhost "$VHOST" >/dev/null 2>&1 || true
    rabbitmqctl -q add_vhost "$VHOST" >/dev/null
    rabbitmqctl -q set_permissions -p "$VHOST" "${RABBIT%%:*}" '.*' '.*' '.*' >/dev/null
}

databases() {
    for db in "${DATABASES[@]}"; do
        psql_admin -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" -c "CREATE DATABASE $db"
    done
}

configure() {
    mkdir -p "$RUN/log" "$RUN/state" "$RUN/instances" "$RUN/placement"
    cp "$VENV/etc/nova/api-paste.ini" "$RUN/api-paste.ini"
    cat >"$RUN/nova.conf" <<EOF
[DEFAULT]
debug = False
compute_driver = fake.FakeDriver
host = nova-bench-compute
my_ip = 127.0.0.1
state_path = $RUN/state
instances_path = $RUN/instances
transport_url = rabbit://$RABBIT/$VHOST
[api]
max_limit = 1000
# Nova 34 has no noauth2: keystonemiddleware validates tokens with the stub's Keystone, which
# takes any password and calls every token the admin's
[keystone_authtoken]
www_authenticate_uri = http://127.0.0.1:$STUB_PORT/identity
auth_url = http://127.0.0.1:$STUB_PORT/identity
auth_type = password
username = nova
password = stub
user_domain_name = Default
project_name = service
project_domain_name = Default
[wsgi]
api_paste_config = $RUN/api-paste.ini
[api_database]
connection = $DB/nova_api
[database]
connection = $DB/nova
[scheduler]
# hosts register themselves: no periodic discovery needed beyond the first (done by this script)
discover_hosts_in_cells_interval = -1
[notifications]
notification_format = unversioned
[oslo_messaging_notifications]
driver = noop
[oslo_concurrency]
lock_path = $RUN/state
[glance]
endpoint_override = http://127.0.0.1:$STUB_PORT
[neutron]
auth_type = admin_token
token = admin
endpoint = http://127.0.0.1:$STUB_PORT
endpoint_override = http://127.0.0.1:$STUB_PORT
[placement]
auth_type = admin_token
token = admin
endpoint = http://127.0.0.1:$PLACEMENT_PORT
endpoint_override = http://127.0.0.1:$PLACEMENT_PORT
[keystone]
endpoint_override = http://127.0.0.1:$STUB_PORT/identity
[cinder]
catalog_info = volumev3::publicURL
[os_vif_ovs]
per_port_bridge = False
[vnc]
enabled = False
[cache]
enabled = False
EOF
    cat >"$RUN/placement/placement.conf" <<EOF
[DEFAULT]
debug = False
[api]
auth_strategy = noauth2
[placement_database]
connection = $DB/nova_placement
EOF
}

cells() {  # the schemas, and cells v2: cell0 and cell1 (their output in $RUN/log/manage.log)
    local manage=("$VENV/bin/nova-manage" --config-file "$RUN/nova.conf")
    log "schemas and cells v2 (nova-manage, placement-manage)"
    {
        OS_PLACEMENT_CONFIG_DIR=$RUN/placement "$VENV/bin/placement-manage" \
            --config-file "$RUN/placement/placement.conf" db sync
        "${manage[@]}" api_db sync
        "${manage[@]}" cell_v2 map_cell0 --database_connection "$DB/nova_cell0"
        "${manage[@]}" cell_v2 create_cell --name cell1 --database_connection "$DB/nova" \
            --transport-url "rabbit://$RABBIT/$VHOST"
        "${manage[@]}" db sync
    } >"$RUN/log/manage.log" 2>&1 || { tail -30 "$RUN/log/manage.log" >&2; return 1; }
}

services() {
    : >"$RUN/pids"
    spawn stub "$VENV/bin/python" "$HERE/stub.py" --port "$STUB_PORT" \
        --placement "http://127.0.0.1:$PLACEMENT_PORT"
    OS_PLACEMENT_CONFIG_DIR=$RUN/placement spawn placement "$VENV/bin/gunicorn" --chdir "$RUN" \
        --bind "127.0.0.1:$PLACEMENT_PORT" --workers 2 placement.wsgi.api:application
    wait_port "$STUB_PORT" stub 30
    wait_port "$PLACEMENT_PORT" placement 120
    local conf=(--config-file "$RUN/nova.conf")
    spawn conductor "$VENV/bin/nova-conductor" "${conf[@]}"
    spawn scheduler "$VENV/bin/nova-scheduler" "${conf[@]}"
    spawn compute "$VENV/bin/nova-compute" "${conf[@]}"
    # nova's WSGI entry point reads nova.conf and api-paste.ini from OS_NOVA_CONFIG_DIR, and parses
    # sys.argv as its own command line (uwsgi's --pyargv): a worker forgets gunicorn's arguments
    cat >"$RUN/gunicorn-nova-api.py" <<'EOF'
import sys


def post_fork(server, worker):
    del sys.argv[1:]
EOF
    OS_NOVA_CONFIG_DIR=$RUN spawn api "$VENV/bin/gunicorn" --chdir "$RUN" --bind "127.0.0.1:$API_PORT" \
        --config "$RUN/gunicorn-nova-api.py" --workers "$API_WORKERS" --threads "$API_THREADS" \
        --timeout 300 nova.wsgi.osapi_compute:application
    wait_port "$API_PORT" nova-api 180
    log "waiting for nova-compute to register"
    local deadline=$((SECONDS + 300))
    until "$VENV/bin/nova-manage" --config-file "$RUN/nova.conf" cell_v2 discover_hosts --strict \
        >/dev/null 2>&1; do
        if ((SECONDS > deadline)); then
            log "nova-compute did not register:"; tail -30 "$RUN/log/compute.log" >&2; return 1
        fi
        sleep 3
    done
    log "nova is up: http://127.0.0.1:$API_PORT/v2.1 (any X-Auth-Token is the admin's)"
}

start() {
    [[ -x $VENV/bin/nova-manage ]] || install
    [[ ! -s $RUN/pids ]] || stop
    rabbit
    databases
    configure
    cells
    services
}

stop() {
    if [[ -s $RUN/pids ]]; then
        # the API first (no new work), the stub last (its request counts go to its log)
        tac "$RUN/pids" | while read -r pid name; do
            kill -TERM -- "-$pid" 2>/dev/null && log "stopped $name (process group $pid)" || true
        done
        sleep 3
        while read -r pid _; do kill -KILL -- "-$pid" 2>/dev/null || true; done <"$RUN/pids"
        : >"$RUN/pids"
    fi
    for db in "${DATABASES[@]}"; do
        psql_admin -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" || true
    done
    rabbitmqctl -q delete_vhost "$VHOST" >/dev/null 2>&1 || true
    log "stopped; databases ${DATABASES[*]} and vhost $VHOST dropped; logs in $RUN/log"
}

status() {
    [[ -s $RUN/pids ]] || { echo "nothing started"; return 0; }
    while read -r pid name; do
        if kill -0 "$pid" 2>/dev/null; then echo "$name: running (pid $pid)"; else echo "$name: gone"; fi
    done <"$RUN/pids"
}

case ${1:-} in
    install) install ;;
    start) start ;;
    stop) stop ;;
    status) status ;;
    *) echo "usage: $0 install|start|stop|status" >&2; exit 2 ;;
esac
