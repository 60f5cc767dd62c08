#!/usr/bin/env bash
# Checks the .deb that scripts/package.sh builds (the .rpm is built from
# the same files; nothing here installs it):
# - lintian --fail-on error is clean;
# - in a fresh mmdebstrap bookworm (cached under .cache/packages/ for the
#   day; man-db added for `man`), the .deb's declared dependencies install
#   from the archive and then the .deb itself;
# - there, systemd-analyze verify prints nothing for its units, and
#   systemd-analyze security --offline=yes scores each at most 3.0;
# - coffer --version and coffer version print the version built; man
#   coffer works when the package has man pages; the user coffer exists;
# - the server unit's command, run as coffer with the directories systemd
#   would give it, answers /readyz within 10 s, prints its one-time setup
#   link, and writes only under its state and cache directories;
# - a purge leaves no file behind (the coffer user and group stay).
# Root only (chroot, mounts); prints the time it took.
set -euo pipefail
cd "$(dirname "$0")/../.."
begin=$SECONDS
step() { echo "check-packages: $* ($((SECONDS - begin)) s)"; }
fail() { echo "check-packages: FAIL: $*" >&2; exit 1; }
bash scripts/ci/install-packaging.sh
work=$(mktemp -d)
root="$work/root"
server_pid=""
cleanup() {
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
  for m in proc dev; do mountpoint -q "$root/$m" 2>/dev/null && umount -l "$root/$m"; done
  rm -rf --one-file-system "$work"
}
trap cleanup EXIT

bash scripts/package.sh "$work/dist" >"$work/package.log" 2>&1 || { cat "$work/package.log" >&2; fail "scripts/package.sh"; }
grep '^package: ' "$work/package.log" || true
deb=$(echo "$work"/dist/*.deb)
version=$(dpkg-deb -f "$deb" Version)
step "built $(basename "$deb")"

lintian --fail-on error --tag-display-limit 0 "$deb" 2> >(grep -v 'running with root privileges' >&2) ||
  fail "lintian found errors"
step "lintian: no error"
conffiles=$(dpkg-deb --info "$deb" conffiles)
for f in /etc/coffer/coffer.yaml /etc/coffer/worker.env; do
  grep -qx "$f" <<<"$conffiles" || fail "$f is not a conffile"
done
contents=$(dpkg-deb -c "$deb")
for f in /usr/share/bash-completion/completions/coffer /usr/share/zsh/vendor-completions/_coffer \
  /usr/share/fish/vendor_completions.d/coffer.fish /usr/share/doc/coffer/copyright; do
  grep -q " \.$f\$" <<<"$contents" || fail "the package has no $f"
done
grep -q '^License: Apache-2.0$' deploy/packaging/copyright || fail "the copyright file names no Apache-2.0"

# A fresh bookworm, made once a day.
cache=.cache/packages
tarball="$cache/bookworm-$(date -u +%Y%m%d).tar"
if ! [ -s "$tarball" ]; then
  mkdir -p "$cache"
  rm -f "$cache"/bookworm-*.tar
  # (the output's name ends in .tar: mmdebstrap chooses the format by it)
  mmdebstrap --quiet --mode=root --include=man-db bookworm "$cache/partial.tar" && mv "$cache/partial.tar" "$tarball"
  step "mmdebstrap bookworm: $tarball"
fi
mkdir "$root"
tar -C "$root" -xf "$tarball"
mount -t proc proc "$root/proc"
mount --bind /dev "$root/dev"
cp /etc/resolv.conf "$root/etc/resolv.conf"
in_root() { chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive LANG=C.UTF-8 "$@"; }
cp "$deb" "$root/tmp/coffer.deb"
in_root apt-get update -qq
# The dependencies it declares first (as apt resolves them from the .deb's
# own fields), so that what the package leaves after a purge can be told
# from what they brought.
deps=$(dpkg-deb -f "$deb" Depends)
recommends=$(dpkg-deb -f "$deb" Recommends)
in_root apt-get satisfy -y -qq "$deps${recommends:+, $recommends}" >"$work/apt.log" 2>&1 || { cat "$work/apt.log" >&2; fail "its dependencies do not install"; }
# Every path of the chroot but the package manager's own records, logs,
# man-db's index, and /run (a tmpfs emptied at each boot, where
# systemd-analyze leaves a lock of its own).
listing() {
  (cd "$root" && find . -xdev \( -path ./proc -o -path ./dev -o -path ./sys -o -path ./tmp -o -path ./var/log -o -path ./run \
    -o -path ./var/lib/apt -o -path ./var/cache/apt -o -path ./var/lib/dpkg -o -path ./var/cache/debconf \
    -o -path ./var/cache/man \) -prune -o -print | sort)
}
listing >"$work/before"
in_root apt-get install -y -qq /tmp/coffer.deb >"$work/apt.log" 2>&1 || { cat "$work/apt.log" >&2; fail "the .deb does not install"; }
step "installed in a fresh bookworm with its dependencies ($deps; recommends $recommends)"

out=$(in_root systemd-analyze verify coffer.service coffer-worker.service 2>&1) || true
[ -z "$out" ] || fail "systemd-analyze verify: $out"
for unit in coffer.service coffer-worker.service; do
  score=$(in_root systemd-analyze security --offline=yes "$unit" 2>&1 | sed -n 's/.*Overall exposure level for .*: \([0-9.]*\).*/\1/p')
  [ -n "$score" ] && awk -v s="$score" 'BEGIN { exit !(s <= 3.0) }' || fail "$unit: exposure $score, want at most 3.0"
  echo "check-packages: $unit: systemd-analyze security exposure $score"
done
step "systemd-analyze verify: nothing to say"

for args in --version version; do
  got=$(in_root coffer $args)
  grep -qF "v${version//\~/-}" <<<"$got" || fail "coffer $args printed \"$got\", want v$version"
done
in_root getent passwd coffer >/dev/null || fail "no user coffer"
groups=$(in_root id -nG coffer)
for g in kvm libvirt tape; do grep -qw "$g" <<<"$groups" || fail "coffer is not in the group $g: $groups"; done
echo "check-packages: user: $(in_root id coffer)"
# Under systemd the state directory is coffer's state-dir.
in_root env STATE_DIRECTORY=/var/lib/coffer setpriv --reuid=coffer --regid=coffer --init-groups coffer config show |
  grep -E '^state-dir +/var/lib/coffer +systemd$' >/dev/null || fail "coffer config show does not take \$STATE_DIRECTORY as state-dir"
if [ -e "$root/usr/share/man/man1/coffer.1.gz" ]; then
  in_root man -P cat coffer | grep -q . || fail "man coffer printed nothing"
  echo "check-packages: man coffer works"
else
  echo "check-packages: the package has no man pages (this coffer has no 'coffer generate man'): man coffer not checked"
fi

# The unit's command as the unit runs it: its user and groups, the
# directories and environment systemd gives it. Only the address is
# another (a free port), so that a coffer on this host does not collide.
exec_start=$(sed -n 's/^ExecStart=//p' "$root/usr/lib/systemd/system/coffer.service")
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
touch "$root/tmp/marker"
sleep 1 # the marker's mtime must be older than anything the server writes (1 s resolution on some filesystems)
t0=$(date +%s.%N)
# shellcheck disable=SC2086 # ExecStart's words
chroot "$root" env -i PATH=/usr/sbin:/usr/bin HOME=/var/lib/coffer USER=coffer LOGNAME=coffer \
  STATE_DIRECTORY=/var/lib/coffer CACHE_DIRECTORY=/var/cache/coffer \
  setpriv --reuid=coffer --regid=coffer --init-groups $exec_start --listen "127.0.0.1:$port" \
  >"$work/server.log" 2>&1 &
server_pid=$!
ready=""
for _ in $(seq 100); do
  if curl -ksf "https://127.0.0.1:$port/readyz" >/dev/null 2>&1; then ready=$(date +%s.%N); break; fi
  kill -0 "$server_pid" 2>/dev/null || break
  sleep 0.1
done
[ -n "$ready" ] || { cat "$work/server.log" >&2; fail "the server did not answer /readyz within 10 s"; }
echo "check-packages: /readyz answered $(awk -v a="$t0" -v b="$ready" 'BEGIN { printf "%.2f", b - a }') s after the start"
link=$(grep -o "https://127.0.0.1:$port/[^ ]*" "$work/server.log" | head -1)
[ -n "$link" ] || { cat "$work/server.log" >&2; fail "no setup link printed"; }
curl -ksf -o /dev/null "$link" || fail "the setup link $link does not open"
grep -q 'TLS certificate SHA-256 fingerprint' "$work/server.log" || fail "no certificate fingerprint in the log"
echo "check-packages: the first start printed a setup link that opens (https://127.0.0.1:$port/...)"
kill "$server_pid"; wait "$server_pid" || true; server_pid=""
written=$(cd "$root" && find . -xdev \( -path ./proc -o -path ./dev -o -path ./sys \) -prune -o -newer tmp/marker -print |
  grep -v -e '^./var/lib/coffer' -e '^./var/cache/coffer' || true)
[ -z "$written" ] || fail "the server wrote outside its state and cache directories: $written"
echo "check-packages: the server wrote only under /var/lib/coffer and /var/cache/coffer: $(cd "$root" && find var/lib/coffer var/cache/coffer -newer tmp/marker | tr '\n' ' ')"

in_root apt-get purge -y -qq coffer >"$work/apt.log" 2>&1 || { cat "$work/apt.log" >&2; fail "purge"; }
listing >"$work/after"
left=$(diff "$work/before" "$work/after" || true)
[ -z "$left" ] || fail "the purge left: $left"
in_root getent passwd coffer >/dev/null && echo "check-packages: after the purge the user coffer stays, as Debian's packages leave theirs"
step "purged: no file left"
echo "check-packages: ok in $((SECONDS - begin)) s"
