#!/usr/bin/env bash
# Makes sure the S3 clients users run are there for the S3 endpoint's tests (test/protocols/s3), and
# prints where they are:
#
#   COFFER_TEST_AWS=/usr/bin/aws  COFFER_TEST_RCLONE=/usr/bin/rclone  COFFER_TEST_S3CMD=/usr/bin/s3cmd
#   COFFER_TEST_PYTHON_BOTO3=/usr/bin/python3
#
# Runs as root on Debian 12 without internet: installs Debian's awscli, rclone, s3cmd and python3-boto3
# when one is missing, and proves that each starts.
set -euo pipefail

say() { printf 's3-clients.sh: %s\n' "$*" >&2; }
die() {
  say "error: $*"
  exit 1
}

if [ ! -x /usr/bin/aws ] || [ ! -x /usr/bin/rclone ] || [ ! -x /usr/bin/s3cmd ] ||
  ! /usr/bin/python3 -c 'import boto3' 2>/dev/null; then
  say 'installing awscli, rclone, s3cmd and python3-boto3 from Debian'
  bash "$(dirname "${BASH_SOURCE[0]}")/apt-install.sh" --no-install-recommends awscli rclone s3cmd python3-boto3
fi

# A client that cannot start would only show up as a failed test: fail here, naming it.
say "$(/usr/bin/aws --version 2>&1)" || die 'aws --version failed'
say "$(/usr/bin/rclone version 2>&1 | head -n 1)" || die 'rclone version failed'
say "$(/usr/bin/s3cmd --version 2>&1)" || die 's3cmd --version failed'
say "boto3 $(/usr/bin/python3 -c 'import boto3; print(boto3.__version__)')" || die 'python3 cannot import boto3'
echo 'COFFER_TEST_AWS=/usr/bin/aws'
echo 'COFFER_TEST_RCLONE=/usr/bin/rclone'
echo 'COFFER_TEST_S3CMD=/usr/bin/s3cmd'
echo 'COFFER_TEST_PYTHON_BOTO3=/usr/bin/python3'
