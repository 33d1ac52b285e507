#!/usr/bin/env bash
# Test hosts on one machine: N network namespaces on a bridge of their own, each running its own
# sshd with throw-away keys, for `evlab hosts` and `evlab run --hosts` (docs/hosts.md).
#
#   scripts/netns-hosts.sh up N [--roles LIST] [DIR]
#                                       make hosts h0 … h(N-1); the last line printed is the
#                                       path of the hosts file (h0 the server, the rest clients;
#                                       or LIST's roles in order, e.g. server,origin,client,client);
#                                       beside it, inventory.ini names the same hosts as an
#                                       Ansible-style inventory
#   scripts/netns-hosts.sh down [DIR]   remove everything `up` made (namespaces, bridge, sshd
#                                       processes, DIR), and check it is gone
#
# DIR defaults to /tmp/evlab-netns; EVLAB_NETNS_TAG (default: evh) prefixes every name, so two
# sets can exist at once. The addresses (10.213.T.0/24, a T no other set holds) exist only on
# that bridge and in the namespaces: no route, forwarding or NAT is added, so nothing sent to
# them leaves the machine, and nothing in a namespace can reach anything but its peers and the
# bridge's address. Needs root (ip netns); the namespaces share this machine's file system,
# clock and cgroups (mounted again in each host's mount namespace, for CPU budgets there).
set -euo pipefail

cmd=${1:-}
tag=${EVLAB_NETNS_TAG:-evh}
if ! [[ $tag =~ ^[a-z][a-z0-9]{0,5}$ ]]; then
  echo "netns-hosts: EVLAB_NETNS_TAG must be 1-6 lower-case letters or digits, starting with a letter" >&2
  exit 2
fi
bridge="${tag}br"

die() { echo "netns-hosts: $*" >&2; exit 1; }
need_root() { [ "$(id -u)" -eq 0 ] || die "needs root (ip netns add); run it with sudo"; }

down() {
  local dir=$1
  need_root
  if [ -d "$dir" ]; then
    for pidfile in "$dir"/h*/sshd.pid; do
      [ -f "$pidfile" ] && kill "$(cat "$pidfile")" 2>/dev/null || true
    done
  fi
  for ns in $(ip netns list | awk '{print $1}' | grep -E "^${tag}-h[0-9]+$" || true); do
    # Whatever still runs in the namespace (an sshd without a pid file, a test's evlab).
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$pid" 2>/dev/null || true; done
    ip netns del "$ns"
  done
  ip link del "$bridge" 2>/dev/null || true
  rm -rf "$dir"
  # Checked gone.
  if ip netns list | grep -qE "^${tag}-h[0-9]+"; then die "namespaces left: $(ip netns list)"; fi
  if ip link show "$bridge" >/dev/null 2>&1; then die "bridge $bridge left"; fi
}

up() {
  local n=$1 roles=$2 dir=$3
  need_root
  [[ $n =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] && [ "$n" -le 32 ] || die "N must be 1 to 32, not '$n'"
  local -a role_of
  if [ -n "$roles" ]; then
    IFS=, read -r -a role_of <<< "$roles"
    [ "${#role_of[@]}" -eq "$n" ] || die "--roles names ${#role_of[@]} role(s) for $n host(s)"
    local r servers=0
    for r in "${role_of[@]}"; do
      case "$r" in server) servers=$((servers + 1)) ;; client|origin) ;; *) die "--roles: '$r' is not server, client or origin" ;; esac
    done
    [ "$servers" -eq 1 ] || die "--roles names $servers servers: name exactly one"
  else
    role_of=(server)
    for ((i = 1; i < n; i++)); do role_of+=(client); done
  fi
  command -v sshd >/dev/null || [ -x /usr/sbin/sshd ] || die "no sshd: install openssh-server"
  local sshd; sshd=$(command -v sshd || echo /usr/sbin/sshd)
  if ip link show "$bridge" >/dev/null 2>&1 || [ -e "$dir" ]; then
    die "$bridge or $dir exists: run '$0 down $dir' first"
  fi
  mkdir -p "$dir"
  chmod 700 "$dir"
  ssh-keygen -q -t ed25519 -N '' -C evlab-test-client -f "$dir/id_ed25519"
  cp "$dir/id_ed25519.pub" "$dir/authorized_keys"
  : > "$dir/known_hosts"
  # One /24 per set: 10.213.T.0/24, T first from a checksum of the tag, else the next one no
  # address here is in. Two tags can share a checksum's T, and two /24s alike on two bridges
  # would send one set's connections to the other's hosts; sets made at once take turns (a lock
  # on this script's own file: nothing is left behind).
  local net="" t0 o k
  exec 9< "${BASH_SOURCE[0]}"
  flock 9
  t0=$(($(printf '%s' "$tag" | cksum | cut -d' ' -f1) % 240))
  for ((k = 0; k < 240; k++)); do
    o=$((10 + (t0 + k) % 240))
    if [ -z "$(ip -4 -o addr show to "10.213.$o.0/24")" ]; then net="10.213.$o"; break; fi
  done
  [ -n "$net" ] || { flock -u 9; die "no free 10.213.T.0/24 left"; }
  ip link add "$bridge" type bridge
  ip addr add "$net.1/24" dev "$bridge"
  flock -u 9
  exec 9>&-
  ip link set "$bridge" up
  local user; user=$(id -un)
  # This machine's cgroup mounts (type, path, options), mounted again in each host.
  local cgroups
  cgroups=$(awk '($3 == "cgroup" || $3 == "cgroup2") && $2 ~ "^/sys/fs/cgroup" {print $3, $2, $4}' /proc/mounts)
  {
    echo "# Made by scripts/netns-hosts.sh; removed by its 'down'."
    echo "Host *"
    echo "  User $user"
    echo "  IdentityFile $dir/id_ed25519"
    echo "  IdentitiesOnly yes"
    echo "  UserKnownHostsFile $dir/known_hosts"
    echo "  StrictHostKeyChecking yes"
    echo "  BatchMode yes"
    echo "  ConnectTimeout 5"
  } > "$dir/ssh_config"
  {
    echo "# Made by scripts/netns-hosts.sh up $n: roles $(IFS=,; echo "${role_of[*]}")."
    echo "ssh_config = \"$dir/ssh_config\""
  } > "$dir/hosts.toml"
  for ((i = 0; i < n; i++)); do
    local ns="${tag}-h$i" veth="${tag}v$i" addr="$net.$((10 + i))" h="$dir/h$i"
    mkdir -p "$h/work"
    ip netns add "$ns"
    ip link add "$veth" type veth peer name "${veth}p"
    ip link set "${veth}p" netns "$ns"
    ip link set "$veth" master "$bridge" up
    ip netns exec "$ns" ip link set lo up
    # As a client machine of a testbed is tuned: a connect() may take a port another
    # connection holds in TIME_WAIT (its 60 s would otherwise leave ~470 new connections a
    # second to one server address; past that the kernel searches the port range on every
    # connect). A namespace starts with the default, 2, which reuses only on loopback.
    ip netns exec "$ns" sysctl -qw net.ipv4.tcp_tw_reuse=1
    ip netns exec "$ns" ip link set "${veth}p" name eth0
    ip netns exec "$ns" ip addr add "$addr/24" dev eth0
    ip netns exec "$ns" ip link set eth0 up
    ssh-keygen -q -t ed25519 -N '' -C "evlab-test-$ns" -f "$h/ssh_host_ed25519_key"
    cat > "$h/sshd_config" <<EOF
ListenAddress $addr:22
HostKey $h/ssh_host_ed25519_key
PidFile $h/sshd.pid
AuthorizedKeysFile $dir/authorized_keys
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
PermitRootLogin prohibit-password
StrictModes no
AllowTcpForwarding no
X11Forwarding no
MaxStartups 64
MaxSessions 64
EOF
    mkdir -p /run/sshd
    # `ip netns exec` gives the host a fresh /sys without this machine's cgroup mounts: they are
    # mounted again in its mount namespace (the same hierarchies: the groups are this machine's),
    # so that a CPU budget can be made there as on a real host. They go with the namespace.
    CG="$cgroups" ip netns exec "$ns" sh -c '
      printf "%s\n" "$CG" | grep -q "^cgroup2 /sys/fs/cgroup " ||
        mount -t tmpfs -o mode=755 cgroup_root /sys/fs/cgroup
      printf "%s\n" "$CG" | while read -r t p o; do
        [ -n "$t" ] || continue
        mkdir -p "$p" && mount -t "$t" -o "$o" "$t" "$p" ||
          echo "netns-hosts: cannot mount $p there (no CPU budget on that host)" >&2
      done
      exec "$0" -f "$1" -E "$2"' "$sshd" "$h/sshd_config" "$h/sshd.log"
    echo "h$i,$addr $(cut -d' ' -f1,2 "$h/ssh_host_ed25519_key.pub")" >> "$dir/known_hosts"
    {
      echo "Host h$i"
      echo "  HostName $addr"
    } >> "$dir/ssh_config"
    local role=${role_of[$i]}
    {
      echo ""
      echo "[[host]]"
      echo "name = \"h$i\""
      echo "destination = \"h$i\""
      echo "role = \"$role\""
      echo "workdir = \"$h/work\""
      echo "address = \"$addr\""
    } >> "$dir/hosts.toml"
  done
  # Every sshd answers before the file is handed out: within 30 s (a loaded 2-CPU machine can
  # be slow to start one), or its last answer and its log are the error.
  for ((i = 0; i < n; i++)); do
    local end=$((SECONDS + 30)) said=""
    until said=$(ssh -F "$dir/ssh_config" "h$i" true 2>&1); do
      if [ "$SECONDS" -ge "$end" ]; then
        die "h$i's sshd does not answer within 30 s: ssh said: ${said:-nothing}; its log:
$(tail -n 5 "$dir/h$i/sshd.log" 2>/dev/null)"
      fi
      sleep 0.1
    done
  done
  # The same hosts as an Ansible-style inventory (docs/hosts.md).
  {
    local g
    for g in server client origin; do
      echo "[$g]"
      for ((i = 0; i < n; i++)); do
        [ "${role_of[$i]}" = "$g" ] || continue
        echo "h$i ansible_host=h$i evlab_workdir=$dir/h$i/work evlab_address=$(awk -v h="h$i" '$1 == "Host" && $2 == h {getline; print $2}' "$dir/ssh_config")"
      done
    done
    echo "[all:vars]"
    echo "ansible_ssh_common_args='-F $dir/ssh_config'"
  } > "$dir/inventory.ini"
  echo "$dir/hosts.toml"
}

case "$cmd" in
  up)
    n=${2:-}
    roles=""
    if [ "${3:-}" = "--roles" ]; then
      roles=${4:-}
      [ -n "$roles" ] || die "--roles needs a list, e.g. server,client"
      set -- "$1" "$2" "${5:-}"
    fi
    up "$n" "$roles" "${3:-/tmp/evlab-netns}" ;;
  down) down "${2:-/tmp/evlab-netns}" ;;
  *) echo "usage: $0 up N [--roles LIST] [DIR] | down [DIR]" >&2; exit 2 ;;
esac
