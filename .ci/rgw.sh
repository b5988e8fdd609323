#!/usr/bin/env bash
# A throw-away S3 server for Coffer's tests: Ceph radosgw, which verifies SigV4 signatures as AWS
# does, over a one-node Ceph cluster (one monitor, one OSD keeping its data in RAM, no manager, no
# authentication between the daemons), everything on 127.0.0.1.
#
#   bash .ci/rgw.sh start DIR   # prints COFFER_TEST_S3_* lines for the tests on stdout
#   bash .ci/rgw.sh stop DIR    # stops the daemons that `start DIR` started
#
# `start` prints, shell-sourceable (progress goes to stderr):
#   COFFER_TEST_S3_ENDPOINT=http://127.0.0.1:<port>   COFFER_TEST_S3_REGION=us-east-1
#   COFFER_TEST_S3_ACCESS_KEY_ID=…   COFFER_TEST_S3_SECRET_ACCESS_KEY=…   COFFER_TEST_S3_BUCKET=coffer-test
#
# Runs on Debian 12 (Ceph Pacific 16.2); installs ceph-mon, ceph-osd and radosgw when radosgw is
# missing (that needs root), and needs no systemd. Config, monitor store, logs (DIR/log) and pid
# files all live in DIR. The monitor and radosgw take free ports; the OSD takes free ones of Ceph's
# own range. If DIR already holds a cluster (an earlier run that was not stopped), that cluster is
# stopped and DIR wiped first. A failed start stops what it started and keeps DIR/log.
#
# Knobs: COFFER_RGW_MEMSTORE_MB (OSD capacity, default 4096), COFFER_RGW_TIMEOUT (seconds per
# step, default 120).
set -euo pipefail

# Progress goes to fd 3, the caller's stderr, even from checks whose own output is discarded.
exec 3>&2
say() { printf 'rgw.sh [%s] %s\n' "$(date +%T)" "$*" >&3; }
usage() {
  echo 'usage: bash .ci/rgw.sh start|stop DIR' >&2
  exit 2
}

[ $# = 2 ] && [ -n "$2" ] || usage
action=$1
case "$action" in
  start) mkdir -p "$2" ;;
  stop) [ -d "$2" ] || exit 0 ;;
  *) usage ;;
esac
dir=$(cd "$2" && pwd)
conf=$dir/ceph.conf
# The first line of every ceph.conf this script writes: DIR is only wiped when it holds one.
marker='# Written by .ci/rgw.sh for Coffer tests.'
export PATH="$PATH:/usr/sbin:/sbin"

# --- stop ------------------------------------------------------------------------------------
# Is process $1 alive and one of ours, that is, started with `-c DIR/ceph.conf`?
ours() { grep -qzxF -- "$conf" "/proc/$1/cmdline" 2>/dev/null; }

stop_pid() { # stop_pid NAME PID: SIGTERM, then SIGKILL after 10 s
  ours "$2" || return 0
  kill -TERM "$2" 2>/dev/null || true
  for _ in $(seq 1 100); do
    ours "$2" || break
    sleep 0.1
  done
  if ours "$2"; then
    say "$1 (pid $2) ignored SIGTERM; killing it"
    kill -KILL "$2" 2>/dev/null || true
  fi
  say "stopped $1 (pid $2)"
}

# Pids of our daemons running COMMAND: the one of its pid file, and any other whose command line
# names our config (a daemon killed on its way up may have written no pid file yet).
our_pids() { # our_pids COMMAND PIDFILE
  local pid
  if [ -s "$2" ]; then cat "$2"; fi
  for pid in $(grep -lzxF -- "$conf" /proc/[0-9]*/cmdline 2>/dev/null | cut -d/ -f3); do
    [ "$(cat "/proc/$pid/comm" 2>/dev/null)" != "$1" ] || echo "$pid"
  done
}

stop_cluster() {
  [ -f "$conf" ] || return 0
  # radosgw first, the monitor last: a daemon whose monitor is gone hangs in its shutdown.
  local spec pid
  for spec in radosgw:client.rgw ceph-osd:osd.0 ceph-mon:mon.a; do
    for pid in $(our_pids "${spec%%:*}" "$dir/run/${spec#*:}.pid" | sort -u); do
      stop_pid "${spec#*:}" "$pid"
    done
    rm -f "$dir/run/${spec#*:}.pid"
  done
}

if [ "$action" = stop ]; then
  stop_cluster
  exit 0
fi

# --- install ---------------------------------------------------------------------------------
if ! command -v radosgw >/dev/null 2>&1; then
  say 'installing ceph-mon, ceph-osd and radosgw from Debian'
  bash "$(dirname "${BASH_SOURCE[0]}")/apt-install.sh" --no-install-recommends ceph-mon ceph-osd radosgw curl
fi
for tool in ceph ceph-authtool ceph-mon ceph-osd monmaptool radosgw radosgw-admin curl python3; do
  command -v "$tool" >/dev/null 2>&1 || {
    say "error: $tool is missing"
    exit 1
  }
done

# --- a clean DIR -----------------------------------------------------------------------------
if [ -f "$conf" ]; then
  [ "$(head -n 1 "$conf")" = "$marker" ] || {
    say "error: $conf was not written by this script; not touching $dir"
    exit 1
  }
  say "$dir holds an earlier cluster: stopping it and wiping $dir"
  stop_cluster
  find "$dir" -mindepth 1 -maxdepth 1 -exec rm -rf -- {} +
elif [ -n "$(ls -A "$dir")" ]; then
  say "error: $dir is neither empty nor a cluster of this script"
  exit 1
fi

timeout=${COFFER_RGW_TIMEOUT:-120}
memstore_mb=${COFFER_RGW_MEMSTORE_MB:-4096}
region=us-east-1
bucket=coffer-test
started_at=$SECONDS
log=$dir/log

ready=
on_exit() {
  [ -z "$ready" ] || return 0
  say "start failed; stopping what was started (logs in $log)"
  stop_cluster
}
trap on_exit EXIT

die() { # die MESSAGE [LOGFILE]: print the message and the end of the log that explains it
  say "error: $1"
  if [ -n "${2:-}" ] && [ -s "$2" ]; then
    say "last lines of $2:"
    tail -n 20 "$2" >&3
  fi
  exit 1
}
die_log() { die "$1 (see $2)" "$2"; }

# wait_for WHAT COMMAND...: retry COMMAND until it succeeds, for at most $timeout seconds.
wait_for() {
  local what=$1 deadline=$((SECONDS + timeout))
  shift
  until "$@" >/dev/null 2>&1; do
    [ "$SECONDS" -lt "$deadline" ] || die "no $what within $timeout s (logs in $log)"
    sleep 0.2
  done
  say "$what after $((SECONDS - started_at)) s"
}

# Two distinct free loopback ports, held open together so they cannot be the same one. The OSD
# needs no chosen port: it binds the first free ones of Ceph's range (6800-7300).
read -r mon_port rgw_port < <(python3 -c '
import socket
socks = [socket.socket() for _ in range(2)]
for s in socks: s.bind(("127.0.0.1", 0))
print(*(s.getsockname()[1] for s in socks))')

# Test credentials, random per run: SigV4 signing still has to be right for radosgw to accept it.
random_string() { # random_string ALPHABET LENGTH
  python3 -c 'import secrets, sys; print("".join(secrets.choice(sys.argv[1]) for _ in range(int(sys.argv[2]))))' "$@"
}
access_key=$(random_string ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 20)
secret_key=$(random_string ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789 40)
fsid=$(cat /proc/sys/kernel/random/uuid)

# --- configuration ---------------------------------------------------------------------------
# The config comes first: with it, a run that dies from here on leaves a DIR the next run wipes.
cat >"$conf" <<CONF
$marker
[global]
fsid = $fsid
mon host = [v2:127.0.0.1:$mon_port]
mon initial members = a
# Loopback only, msgr2 only: nothing listens on another interface.
public addr = 127.0.0.1
cluster addr = 127.0.0.1
ms bind msgr1 = false
ms bind ipv6 = false
# No cephx: the cluster is private to this machine and lives as long as one test run.
auth cluster required = none
auth service required = none
auth client required = none
auth allow insecure global id reclaim = false
# radosgw would ask for the secure messenger mode, which needs cephx.
ms mon client mode = crc
ms client mode = crc
keyring = $dir/keyring
run dir = $dir/run
admin socket = $dir/run/\$name.\$pid.asok
pid file = $dir/run/\$name.pid
log file = $log/\$name.log
mon cluster log file = $log/cluster.log
log to stderr = false
err to stderr = false
crash dir = $dir/crash
# One OSD: one copy of everything, placed on that OSD.
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
osd pool default pg autoscale mode = off
osd crush chooseleaf type = 0
mon allow pool size one = true
mon warn on pool no redundancy = false
mon max pg per osd = 1000
# The monitor refuses to run below its disk-space thresholds; a CI disk may well be that full.
mon data avail warn = 2
mon data avail crit = 1

[mon]
mon data = $dir/mon/\$cluster-\$id
# Commit map changes at once: the default (1 s per change) makes the pool setup take ~10 s.
paxos propose interval = 0.05

[osd]
osd data = $dir/osd/\$id
# Objects live in the OSD's memory. Of a deleted object, all but the first 4 MiB are only freed
# by radosgw's garbage collector two hours later, so this must hold about everything the suite
# ever uploads. When it is full (seen a few seconds late), writes do not fail: they HANG.
osd objectstore = memstore
memstore device bytes = $((memstore_mb * 1024 * 1024))
osd op num shards = 2
osd op num threads per shard = 1

[client.rgw]
admin socket = $dir/run/\$name.asok
rgw frontends = beast endpoint=127.0.0.1:$rgw_port tcp_nodelay=1
rgw data = $dir/rgw
rgw thread pool size = 32
rgw dynamic resharding = false
rgw enable usage log = false
CONF
mkdir -p "$dir/run" "$log" "$dir/mon" "$dir/osd/0" "$dir/rgw"
ceph=(ceph -c "$conf" --connect-timeout 5)

# --- monitor ---------------------------------------------------------------------------------
ceph-authtool --create-keyring "$dir/keyring" --gen-key -n mon. --cap mon 'allow *' >/dev/null
ceph-authtool "$dir/keyring" --gen-key -n client.admin \
  --cap mon 'allow *' --cap osd 'allow *' --cap mgr 'allow *' >/dev/null
monmaptool --create --fsid "$fsid" --addv a "[v2:127.0.0.1:$mon_port]" "$dir/monmap" >/dev/null
ceph-mon -c "$conf" -i a --mkfs --monmap "$dir/monmap" --keyring "$dir/keyring" \
  >>"$log/mkfs.log" 2>&1 || die_log 'the monitor store could not be created' "$log/mkfs.log"
# The daemons fork into the background once up; their inherited stdout must not be the caller's
# (a `$(bash .ci/rgw.sh start …)` would otherwise wait for them to exit).
timeout "$timeout" ceph-mon -c "$conf" -i a </dev/null >>"$log/mon.a.out" 2>&1 ||
  die_log 'the monitor did not start' "$log/mon.a.log"
say "monitor started on 127.0.0.1:$mon_port"
wait_for 'monitor quorum' "${ceph[@]}" mon stat

# --- OSD -------------------------------------------------------------------------------------
osd_uuid=$(cat /proc/sys/kernel/random/uuid)
osd_id=$("${ceph[@]}" osd new "$osd_uuid" 2>>"$log/admin.log")
[ "$osd_id" = 0 ] || die "the new OSD got id '$osd_id', not 0" "$log/admin.log"
ceph-osd -c "$conf" -i 0 --mkfs --osd-uuid "$osd_uuid" >>"$log/mkfs.log" 2>&1 ||
  die_log 'the OSD could not be created' "$log/osd.0.log"
timeout "$timeout" ceph-osd -c "$conf" -i 0 </dev/null >>"$log/osd.0.out" 2>&1 ||
  die_log 'the OSD did not start' "$log/osd.0.log"
osd_up() { "${ceph[@]}" osd stat --format json | grep -q '"num_up_osds":1[,}]'; }
wait_for 'OSD up' osd_up

# radosgw's pools, made now: radosgw would create the data pools only on the first upload, and
# make the first test wait for them.
# (One ceph command takes ~0.2 s, mostly Python starting: the pools are made in parallel.)
pool_jobs=()
for pool in .rgw.root default.rgw.log default.rgw.control default.rgw.meta \
  default.rgw.buckets.index default.rgw.buckets.data default.rgw.buckets.non-ec; do
  { "${ceph[@]}" osd pool create "$pool" 8 8 replicated &&
    "${ceph[@]}" osd pool application enable "$pool" rgw; } >>"$log/pool-${pool#.}.log" 2>&1 &
  pool_jobs+=("$!:$pool")
done
for job in "${pool_jobs[@]}"; do
  pool=${job#*:}
  wait "${job%%:*}" || die_log "pool $pool could not be created" "$log/pool-${pool#.}.log"
done
say "pools created after $((SECONDS - started_at)) s"

# --- radosgw ---------------------------------------------------------------------------------
# radosgw forks into the background only once it has reached the cluster.
timeout "$timeout" radosgw -c "$conf" -n client.rgw </dev/null >>"$log/client.rgw.out" 2>&1 ||
  die_log 'radosgw did not start' "$log/client.rgw.log"
rgw_answers() { # our radosgw is alive and answers an anonymous ListBuckets
  local pid
  pid=$(cat "$dir/run/client.rgw.pid" 2>/dev/null || true)
  [ -z "$pid" ] || ours "$pid" || die_log 'radosgw exited' "$log/client.rgw.log"
  ! grep -q 'failed to bind' "$log/client.rgw.log" 2>/dev/null ||
    die_log "radosgw could not bind 127.0.0.1:$rgw_port" "$log/client.rgw.log"
  [ -n "$pid" ] && curl -sf "http://127.0.0.1:$rgw_port/" | grep -q ListAllMyBucketsResult
}
wait_for "radosgw on 127.0.0.1:$rgw_port" rgw_answers

radosgw-admin -c "$conf" -n client.admin user create --uid=coffer --display-name='Coffer tests' \
  --access-key="$access_key" --secret-key="$secret_key" >"$dir/user.json" 2>>"$log/admin.log" ||
  die_log 'the S3 user could not be created' "$log/admin.log"

# The bucket is made through S3 itself, which also proves that SigV4 requests are accepted. curl's
# --aws-sigv4 does not send x-amz-content-sha256, which radosgw requires: it is given here.
empty_sha256=e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855
create_bucket() {
  [ "$(curl -s -o "$log/create-bucket.out" -w '%{http_code}' -X PUT \
    -H "x-amz-content-sha256: $empty_sha256" \
    --aws-sigv4 "aws:amz:$region:s3" --user "$access_key:$secret_key" \
    "http://127.0.0.1:$rgw_port/$bucket")" = 200 ]
}
wait_for "bucket $bucket" create_bucket

ready=1
say "S3 on http://127.0.0.1:$rgw_port, ${memstore_mb} MiB, ready after $((SECONDS - started_at)) s; stop with: bash .ci/rgw.sh stop $dir"
cat <<ENV
COFFER_TEST_S3_ENDPOINT=http://127.0.0.1:$rgw_port
COFFER_TEST_S3_REGION=$region
COFFER_TEST_S3_ACCESS_KEY_ID=$access_key
COFFER_TEST_S3_SECRET_ACCESS_KEY=$secret_key
COFFER_TEST_S3_BUCKET=$bucket
ENV
