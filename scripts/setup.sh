#!/usr/bin/env bash
# Installs what evlab's tests and experiments use on a fresh Debian machine: the peer servers and
# clients (nginx, lighttpd, HAProxy, wrk, httperf, ab, curl), OpenSSH's server and iproute2 for the test
# hosts, Chromium (headless: the reports are tested in it), cargo-nextest, cargo-machete, rustfmt
# and clippy.
# Idempotent and non-interactive; safe to run again.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive

# openssh-server, iproute2 and iptables: the test hosts of scripts/netns-hosts.sh; libfaketime
# moves one test host's clock; liburing-dev builds bench/uring_pattern.c; valgrind counts
# instructions for bench/proxy_instructions.py.
pkgs=(curl wrk httperf apache2-utils nginx-light lighttpd haproxy procps openssh-server iproute2 iptables libfaketime chromium liburing-dev valgrind)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  # Debian starts the packaged nginx and lighttpd on port 80, and HAProxy with its sample
  # config; evlab starts its own on loopback.
  $SUDO service nginx stop >/dev/null 2>&1 || true
  $SUDO service lighttpd stop >/dev/null 2>&1 || true
  $SUDO service haproxy stop >/dev/null 2>&1 || true
  # Nor does it need the system's sshd: each test host runs its own.
  $SUDO service ssh stop >/dev/null 2>&1 || true
fi

rustup component add rustfmt clippy >/dev/null 2>&1 || true
if ! cargo nextest --version >/dev/null 2>&1; then
  cargo install cargo-nextest --locked
fi
# Unused dependencies fail CI (.ci/run); about a minute to build from crates.io.
if ! cargo machete --version >/dev/null 2>&1; then
  cargo install cargo-machete --locked
fi
