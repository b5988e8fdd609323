#!/usr/bin/env bash
# Starts a private clamd on 127.0.0.1:3310 for the scanner tests, and prints the URL to give them:
#
#   eval "$(bash .ci/clamd.sh | grep '^COFFER_TEST_CLAMD_URL=')" && export COFFER_TEST_CLAMD_URL
#
# Runs as root on Debian 12 without internet: installs Debian's clamav-daemon when clamd is missing,
# and downloads nothing (no freshclam). Its only signature database is a hash signature of the
# 68-byte EICAR test file, so clamd reports EICAR (whole-file MD5 match) and nothing else.
# StreamMaxLength is 24M, so a test can exceed it with a larger stream (and a 17 MiB multipart file passes). Idempotent: a clamd that an
# earlier run started (found by its pidfile) is stopped first. Logs: $COFFER_CLAMD_DIR/clamd.log.
set -euo pipefail

dir=${COFFER_CLAMD_DIR:-/tmp/coffer-clamav}
addr=127.0.0.1
port=3310
db=$dir/db
conf=$dir/clamd.conf
pidfile=$dir/clamd.pid
logfile=$dir/clamd.log
export PATH="$PATH:/usr/sbin:/sbin"

say() { printf 'clamd.sh: %s\n' "$*" >&2; }
die() {
  say "error: $*"
  if [ -s "$logfile" ]; then
    say "last lines of $logfile:"
    tail -n 20 "$logfile" >&2
  fi
  exit 1
}

# --- install -------------------------------------------------------------------------------
if ! command -v clamd >/dev/null 2>&1; then
  say 'installing clamav-daemon from Debian'
  bash "$(dirname "${BASH_SOURCE[0]}")/apt-install.sh" clamav-daemon
  command -v clamd >/dev/null 2>&1 || die 'clamd is still missing after installing clamav-daemon'
fi

# --- stop what an earlier run started ------------------------------------------------------
if [ -s "$pidfile" ]; then
  old=$(cat "$pidfile")
  if [ -n "$old" ] && kill -0 "$old" 2>/dev/null && grep -qa clamd "/proc/$old/cmdline" 2>/dev/null; then
    say "stopping the clamd an earlier run started (pid $old)"
    kill "$old"
    for _ in $(seq 1 100); do
      kill -0 "$old" 2>/dev/null || break
      sleep 0.1
    done
    if kill -0 "$old" 2>/dev/null; then kill -9 "$old" || true; fi
  fi
  rm -f "$pidfile"
fi

# --- signature database: only the EICAR test file's MD5 --------------------------------------
rm -rf "$db"
mkdir -p "$db" "$dir/tmp"
# The EICAR string is put together from two halves so this script is no EICAR file itself.
eicar=$dir/eicar.com
# shellcheck disable=SC2016 # literal $ signs
printf '%s%s' 'X5O!P%@AP[4\PZX54(P^)7CC)7}$EICAR' '-STANDARD-ANTIVIRUS-TEST-FILE!$H+H*' >"$eicar"
size=$(stat -c %s "$eicar")
md5=$(md5sum "$eicar" | cut -d' ' -f1)
[ "$size" = 68 ] || die "the EICAR test file has $size bytes, not 68"
[ "$md5" = 44d88612fea8a8f36de82e1278abb02f ] || die "the EICAR test file's MD5 is $md5"
printf '%s:%s:%s\n' "$md5" "$size" 'Eicar-Test-Signature' >"$db/coffer-test.hdb"

# --- configuration ---------------------------------------------------------------------------
cat >"$conf" <<CONF
# Written by .ci/clamd.sh for Coffer's tests.
TCPSocket $port
TCPAddr $addr
DatabaseDirectory $db
TemporaryDirectory $dir/tmp
LogFile $logfile
LogTime yes
PidFile $pidfile
Foreground no
User root
# A test sends more than 10 MiB to see clamd refuse it.
StreamMaxLength 24M
# Whole streams are scanned: the file limits are not below StreamMaxLength.
MaxFileSize 24M
MaxScanSize 40M
ReadTimeout 30
CommandReadTimeout 30
MaxThreads 4
SelfCheck 3600
CONF
: >"$logfile"

# --- start and wait --------------------------------------------------------------------------
# Prints clamd's answer to the request in file $1 (the answer ends with a NUL), or fails.
ask_clamd() {
  # shellcheck disable=SC2016 # expanded by the inner bash
  timeout 10 bash -c '
    exec 3<>"/dev/tcp/$1/$2" || exit 1
    cat "$3" >&3
    IFS= read -r -d "" reply <&3 || exit 1
    printf "%s\n" "$reply"' ask "$addr" "$port" "$1" 2>/dev/null
}
printf 'zPING\0' >"$dir/ping.req"
ping_clamd() { [ "$(ask_clamd "$dir/ping.req" || true)" = PONG ]; }
# Writes an INSTREAM request for file $1 (as one chunk) to file $2.
instream_request() {
  {
    printf 'zINSTREAM\0'
    perl -e 'print pack("N", $ARGV[0])' "$(stat -c %s "$1")"
    cat "$1"
    printf '\0\0\0\0'
  } >"$2"
}

if ping_clamd; then
  die "something already answers PING on $addr:$port (a clamd this script did not start?)"
fi

say "starting clamd -c $conf"
clamd -c "$conf" || die 'clamd did not start'

deadline=$((SECONDS + 60))
until ping_clamd; do
  [ "$SECONDS" -lt "$deadline" ] || die "clamd did not answer PING on $addr:$port within 60 s"
  sleep 0.2
done

# --- prove the database: the EICAR file is found, other bytes are not ------------------------
instream_request "$eicar" "$dir/eicar.req"
found=$(ask_clamd "$dir/eicar.req") || die 'INSTREAM of the EICAR test file got no answer'
case "$found" in
  *'Eicar-Test-Signature'*FOUND) ;;
  *) die "clamd did not find the EICAR test file: '$found'" ;;
esac
printf 'hello, clamd\n' >"$dir/clean.txt"
instream_request "$dir/clean.txt" "$dir/clean.req"
clean=$(ask_clamd "$dir/clean.req") || die 'INSTREAM of a clean file got no answer'
[ "$clean" = 'stream: OK' ] || die "clamd did not pass a clean file: '$clean'"

say "clamd $(clamd --version | cut -d/ -f1) is up on $addr:$port (pid $(cat "$pidfile")); EICAR: $found"
echo "COFFER_TEST_CLAMD_URL=tcp://$addr:$port"
