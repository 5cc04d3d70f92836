#!/usr/bin/env bash
# A three-node NATS JetStream cluster (deploy/nats/nats-{1,2,3}.conf) and two
# postured nodes on this machine, each process in the background.
#
#   deploy/local-cluster.sh start    # start the five processes
#   deploy/local-cluster.sh status   # which are running
#   deploy/local-cluster.sh stop     # stop them (SIGTERM)
#
# Run it from the repository root: the NATS stores are ./data/nats-N (as the
# configurations say), the postured nodes keep ./data/cluster/node-N and
# share the CA in ./data/cluster/pki; logs and pids are in ./data/cluster.
#
# NATS wants TLS and credentials. On the first start `postured nats init`
# makes them in ./data/cluster/nats: the servers' certificate (from the same
# CA), the nkey seeds of the postured and auditor users (0600), the route
# password and nats.env, the variables the configurations read. The nodes
# connect as postured; follow the log as the auditor with:
#   postured events tail --nats-url $NATS_URLS --nats-tls-ca data/cluster/pki/ca.pem \
#     --nats-nkey data/cluster/nats/auditor.nk
# NATS_SERVER and POSTURED name the binaries (default: nats-server and
# postured from PATH); NODE_1_PORT and NODE_2_PORT the postured nodes' HTTPS
# ports on 127.0.0.1 (default 1280 and 1281; the NATS ports are in the
# configurations). POSTURED_ADMIN_PASSWORD sets the admin's password on
# the first start (otherwise it is generated into node-1's data directory,
# data/cluster/node-1/admin-password, readable by you alone, as node-1.log
# says; change it after signing in).
set -euo pipefail
cd "$(dirname "$0")/.."
# The data directories hold the generated admin password and the stores
# the log itself: no one else may read them.
umask 077

NATS_SERVER=${NATS_SERVER:-nats-server}
POSTURED=${POSTURED:-postured}
NODE_1_PORT=${NODE_1_PORT:-1280}
NODE_2_PORT=${NODE_2_PORT:-1281}
RUN=data/cluster
NATS_URLS=tls://127.0.0.1:4222,tls://127.0.0.1:4223,tls://127.0.0.1:4224
CREDS=$RUN/nats

running() { [[ -f "$RUN/$1.pid" ]] && kill -0 "$(cat "$RUN/$1.pid")" 2>/dev/null; }

launch() { # name, command...
	local name=$1
	shift
	if running "$name"; then
		echo "$name is already running (pid $(cat "$RUN/$name.pid"))"
		return
	fi
	"$@" >>"$RUN/$name.log" 2>&1 &
	echo $! >"$RUN/$name.pid"
	echo "$name started (pid $!, log $RUN/$name.log)"
}

# exited fails, with the tail of its log, when a launched process is gone.
exited() {
	if running "$1"; then
		return 1
	fi
	echo "$1 exited; the end of $RUN/$1.log:" >&2
	tail -n 20 "$RUN/$1.log" >&2
	rm -f "$RUN/$1.pid"
	return 0
}

# wait_for_https waits (at most 60s) until a node (name, port) answers its
# liveness probe, and fails at once if the node exits.
wait_for_https() {
	for _ in $(seq 120); do
		if curl -sf --cacert "$RUN/pki/ca.pem" "https://localhost:$2/livez" >/dev/null 2>&1; then
			return 0
		fi
		if exited "$1"; then
			return 1
		fi
		sleep 0.5
	done
	echo "no answer on https://localhost:$2 (see the logs in $RUN)" >&2
	return 1
}

case "${1:-}" in
start)
	mkdir -p "$RUN"
	chmod 700 data "$RUN"
	chmod 600 "$RUN"/*.log 2>/dev/null || true # logs of an earlier start
	"$POSTURED" nats init --dir "$CREDS" --pki-dir "$RUN/pki" --host 127.0.0.1,localhost \
		--route 127.0.0.1:6222,127.0.0.1:6223,127.0.0.1:6224 >/dev/null
	set -a
	# shellcheck disable=SC1091
	. "$CREDS/nats.env"
	set +a
	for i in 1 2 3; do
		launch "nats-$i" "$NATS_SERVER" -c "deploy/nats/nats-$i.conf"
	done
	sleep 1 # a server that refuses its configuration exits at once
	for i in 1 2 3; do
		if exited "nats-$i"; then
			exit 1
		fi
	done
	# The variables are nats-server's; postured reads its own flags.
	unset NATS_POSTURED_NKEY NATS_AUDITOR_NKEY NATS_ROUTE_PASSWORD NATS_ROUTE_1 NATS_ROUTE_2 NATS_ROUTE_3
	NATS_AUTH=(--nats-url "$NATS_URLS" --nats-tls-ca "$RUN/pki/ca.pem" --nats-nkey "$CREDS/postured.nk")
	# The first node creates the CA and the default admin; the second
	# starts once the first answers, with the same CA.
	launch node-1 "$POSTURED" serve --name node-1 --data-dir "$RUN/node-1" --pki-dir "$RUN/pki" \
		--listen "127.0.0.1:$NODE_1_PORT" "${NATS_AUTH[@]}" --stream-replicas 3 --log-format json
	wait_for_https node-1 "$NODE_1_PORT"
	launch node-2 "$POSTURED" serve --name node-2 --data-dir "$RUN/node-2" --pki-dir "$RUN/pki" \
		--listen "127.0.0.1:$NODE_2_PORT" "${NATS_AUTH[@]}" --stream-replicas 3 --log-format json
	wait_for_https node-2 "$NODE_2_PORT"
	echo "postured nodes on https://localhost:$NODE_1_PORT and https://localhost:$NODE_2_PORT (CA: $RUN/pki/ca.pem)"
	echo "NATS on $NATS_URLS (TLS; auditor credentials: $CREDS/auditor.nk)"
	;;
status)
	for name in nats-1 nats-2 nats-3 node-1 node-2; do
		if running "$name"; then echo "$name running (pid $(cat "$RUN/$name.pid"))"; else echo "$name stopped"; fi
	done
	;;
stop)
	for name in node-2 node-1 nats-3 nats-2 nats-1; do
		if running "$name"; then
			kill "$(cat "$RUN/$name.pid")"
			echo "$name stopped"
		fi
		rm -f "$RUN/$name.pid"
	done
	;;
*)
	echo "usage: $0 start|status|stop" >&2
	exit 2
	;;
esac
