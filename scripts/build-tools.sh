#!/usr/bin/env bash
# Builds the pinned toolchain into bin/ from the Go module proxy alone: the
# Kubernetes control plane (for envtest and the local cluster), the kubelet
# and kube-proxy (the local cluster's real nodes), CoreDNS, etcd, kwok,
# kustomize, controller-gen, golangci-lint, memcached_exporter, kpt's fn
# render, Flux's source-controller and kustomize-controller with their CRDs
# (bin/flux-crds), cosign, Kyverno's CLI with its CRDs (bin/kyverno-crds),
# the CNCF distribution registry, helm, operator-registry's
# opm, Prometheus' server and promtool, the monitoring.coreos.com and
# cert-manager.io CRDs (generated from their API modules), and Argo CD (one
# multi-call binary, with its install manifests and the helper scripts its
# repo-server runs, in bin/argocd-dist). Nothing is downloaded from release pages, so it works where
# setup-envtest and kind cannot.
#
# Versions come from tools/go.mod and the modules beside it (tools/*/go.mod),
# one per tool whose dependencies must not change another's; binaries are
# built with -trimpath and stripped, and stamped with their versions so that
# `--version` answers truthfully. A stamp keyed on the module files makes a
# warm run a no-op.
#
# Usage: scripts/build-tools.sh [BIN_DIR] [all|run]    (default: bin all)
#
# `run` builds only what the local cluster of `make run` needs (the control
# plane, kubelet and kube-proxy, CoreDNS, etcd, kwok, kustomize and the
# exporter), so a newcomer's first `make run` does not wait for Prometheus,
# Helm, opm, Flux and the linter.
set -euo pipefail
# Progress goes to stderr, so `make render > prod.yaml` captures manifests only.
exec 1>&2

root=$(cd "$(dirname "$0")/.." && pwd)
bin=$(mkdir -p "${1:-$root/bin}" && cd "${1:-$root/bin}" && pwd)
set_name=${2:-all}
export GOWORK=off GOFLAGS="${GOFLAGS:+$GOFLAGS }-mod=mod" CGO_ENABLED=0

run_tools=(kube-apiserver kube-controller-manager kube-scheduler kubectl kubelet kube-proxy coredns etcd kwok kwokctl kustomize memcached_exporter)
case $set_name in
  all) tools=("${run_tools[@]}" controller-gen golangci-lint kpt source-controller kustomize-controller cosign kyverno kyverno-crds flux-crds registry helm opm promtool prometheus monitoring-crds certmanager-crds argocd argocd-dist) ;;
  run) tools=("${run_tools[@]}") ;;
  *) echo "tools: unknown set '$set_name'; use all or run" >&2; exit 2 ;;
esac
# One stamp per set: a full build also stamps the run set.
stamp="$bin/.tools-stamp"
[[ $set_name == all ]] || stamp="$bin/.tools-stamp-$set_name"

key=$(cat "$root"/tools/go.mod "$root"/tools/go.sum "$root"/tools/*/go.mod "$root"/tools/*/go.sum "$0" | sha256sum | cut -d' ' -f1)
key="$key $(go env GOVERSION GOOS GOARCH | tr '\n' ' ')"
up_to_date() {
  [[ (-f $stamp && $(cat "$stamp") == "$key") || (-f $bin/.tools-stamp && $(cat "$bin/.tools-stamp") == "$key") ]] || return 1
  local t
  for t in "${tools[@]}"; do [[ -e $bin/$t ]] || return 1; done
}
if up_to_date; then
  echo "tools: up to date in ${bin#"$root"/} ($(IFS=,; echo "${tools[*]}"))"
  exit 0
fi

start=$SECONDS
# One row per go build: binaries, wall seconds, CPU seconds, bytes.
table=$(mktemp -t tools-table.XXXXXX)
trap 'rm -f "$table"' EXIT
elapsed() { local s=$((SECONDS - $1)); printf '%dm%02ds' $((s / 60)) $((s % 60)); }

# build "NAMES" MODULE_DIR "PACKAGES" [LDFLAGS]: one `go build` for several
# binaries of one module with the same flags, so that their shared packages
# compile once and they link in parallel; each binary is named after its
# package's last element.
build() {
  local names=$1 dir=$2 pkgs=$3 ldflags=${4:-} t0=$SECONDS out
  echo "tools: building $names ($pkgs) ..."
  # A heartbeat, so that a 10-minute compile does not look like a hang.
  ( while sleep 60; do echo "tools:   ... still building $names, $(elapsed "$t0") so far"; done ) &
  local beat=$!
  out=$bin/$names
  [[ $names == *" "* ]] && out=$bin/
  local trace=()
  [[ -z ${TOOLS_TRACE:-} ]] || trace=(-debug-trace="$TOOLS_TRACE/${names%% *}.json")
  # -gcflags=all=-dwarf=false: the binaries are stripped (-s -w), so the
  # compiler need not write debug information the linker then drops; it
  # measured 18% less compile CPU (docs/development.md#cold-start).
  # The subshell prints the CPU time its go build and the compilers and
  # linkers under it used (the children's utime+stime, in clock ticks).
  local ticks
  # shellcheck disable=SC2086 # pkgs is a list of packages
  if ! ticks=$(cd "$root/$dir" && go build "${trace[@]}" -trimpath -gcflags=all=-dwarf=false -ldflags "-s -w $ldflags" -o "$out" $pkgs >&2 &&
      read -ra proc_stat < /proc/$BASHPID/stat && echo $((proc_stat[15] + proc_stat[16]))); then
    kill "$beat" 2>/dev/null || true
    echo "tools: FAILED to build $names from $dir/go.mod; fix the error above and run 'make tools' again" >&2
    exit 1
  fi
  kill "$beat" 2>/dev/null || true
  wait "$beat" 2>/dev/null || true
  local n size=0
  for n in $names; do size=$((size + $(stat -c %s "$bin/$n"))); done
  printf '%s\t%d\t%d\t%d\n' "$names" $((SECONDS - t0)) $((ticks / $(getconf CLK_TCK))) "$size" >> "$table"
  echo "tools: built $names in $(elapsed "$t0") (total $(elapsed "$start"))"
}

# print_table: what each build cost, longest CPU first, so a new tool's
# price on a cold machine is measured, not guessed (docs/development.md).
print_table() {
  echo "tools: done in $(elapsed "$start") on $(nproc) cores: $(IFS=,; echo "${tools[*]}")"
  printf 'tools: %-72s %8s %8s %8s\n' binaries wall cpu MB
  sort -t$'\t' -k3,3nr "$table" | while IFS=$'\t' read -r names wall cpu size; do
    printf 'tools: %-72s %8s %8s %8d\n' "$names" "$(elapsed $((SECONDS - wall)))" "$(elapsed $((SECONDS - cpu)))" $((size / 1000000))
  done
}

modver() { (cd "$root/$1" && go list -m -f '{{.Version}}' "$2"); }

kube=$(modver tools k8s.io/kubernetes)           # v1.37.2
[[ $kube =~ ^v([0-9]+)\.([0-9]+)\. ]] || { echo "tools: unexpected k8s.io/kubernetes version $kube" >&2; exit 1; }
kube_ldflags="-X k8s.io/component-base/version.gitVersion=$kube -X k8s.io/component-base/version.gitMajor=${BASH_REMATCH[1]} -X k8s.io/component-base/version.gitMinor=${BASH_REMATCH[2]} -X k8s.io/component-base/version.gitTreeState=clean"
kube_ldflags+=" -X k8s.io/client-go/pkg/version.gitVersion=$kube -X k8s.io/client-go/pkg/version.gitMajor=${BASH_REMATCH[1]} -X k8s.io/client-go/pkg/version.gitMinor=${BASH_REMATCH[2]} -X k8s.io/client-go/pkg/version.gitTreeState=clean"
kwok=$(modver tools sigs.k8s.io/kwok)
kustomize=$(modver tools sigs.k8s.io/kustomize/kustomize/v5)
lint=$(modver tools/lint github.com/golangci/golangci-lint/v2)
exporter=$(modver tools/memcached-exporter github.com/prometheus/memcached_exporter)
flux_source=$(modver tools github.com/fluxcd/source-controller)
flux_kustomize=$(modver tools github.com/fluxcd/kustomize-controller)

echo "tools: building the pinned toolchain ($set_name) into ${bin#"$root"/} (cold on 2 cores: docs/development.md#cold-start; warm: seconds)"
# Two lines of builds run side by side, so that one line's links and
# module downloads overlap the other's compiles. The shared line builds
# everything in tools/go.mod one `go build` after another: they share one
# module graph, so client-go, the cloud SDKs and the rest compile once and
# every later build takes them from the build cache (two builds of one
# graph at the same time would both compile them). The other line builds
# the modules that cannot join it: Argo CD (Go 1.27), Kyverno (its fork of
# k8s.io/pod-security-admission would replace the apiserver's),
# golangci-lint (its analyzers follow golang.org/x/tools exactly) and
# memcached_exporter (it needs a prometheus/common older than the rest).
# The shared line ends with controller-gen before the CRD steps below.
run_shared_line() {
  build "kube-apiserver kube-controller-manager kube-scheduler kubectl kubelet kube-proxy" tools \
    "k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-proxy" \
    "$kube_ldflags"
  build etcd                    tools go.etcd.io/etcd/server/v3
  build "kwok kwokctl"          tools "sigs.k8s.io/kwok/cmd/kwok sigs.k8s.io/kwok/cmd/kwokctl" \
    "-X sigs.k8s.io/kwok/pkg/consts.Version=${kwok#v} -X sigs.k8s.io/kwok/pkg/consts.KubeVersion=${kube#v}"
  build kustomize               tools sigs.k8s.io/kustomize/kustomize/v5 "-X sigs.k8s.io/kustomize/api/provenance.version=kustomize/$kustomize"
  build coredns                 tools github.com/example/memcached-operator/tools/coredns
}
run_other_line() {
  build memcached_exporter      tools/memcached-exporter github.com/prometheus/memcached_exporter/cmd/memcached_exporter "-X github.com/prometheus/common/version.Version=${exporter#v}"
}
shared_line() {
  run_shared_line
  build controller-gen          tools sigs.k8s.io/controller-tools/cmd/controller-gen
  build registry                tools github.com/distribution/distribution/v3/cmd/registry "-X github.com/distribution/distribution/v3/version.version=$(modver tools github.com/distribution/distribution/v3)"
  build helm                    tools helm.sh/helm/v4/cmd/helm "-X helm.sh/helm/v4/internal/version.version=$(modver tools helm.sh/helm/v4)"
  # opm as operator-registry's release builds it: the pure-Go OpenPGP
  # implementation instead of gpgme (cgo), and no sqlite (file-based catalogs
  # need none).
  GOFLAGS="$GOFLAGS -tags=containers_image_openpgp" \
  build opm                     tools github.com/operator-framework/operator-registry/cmd/opm "-X github.com/operator-framework/operator-registry/cmd/opm/version.opmVersion=$(modver tools github.com/operator-framework/operator-registry)"
  build kpt                     tools github.com/example/memcached-operator/tools/kpt
  # cosign: the release the controllers link (their go.mod picks it), so
  # that what make release signs is what source-controller verifies.
  build "source-controller kustomize-controller cosign" tools "github.com/fluxcd/source-controller github.com/fluxcd/kustomize-controller github.com/sigstore/cosign/v3/cmd/cosign" \
    "-X sigs.k8s.io/release-utils/version.gitVersion=$(modver tools github.com/sigstore/cosign/v3)"
  # Prometheus' module versions encode its release: v0.316.0 is Prometheus
  # 3.16.0. remove_all_sd is Prometheus' own build tag for a server without
  # the service discovery plugins (AWS, Azure, GCE, Kubernetes, ...): the
  # tests configure static targets only, and the cloud SDKs were a third
  # of this build.
  local prom_module prom_ldflags
  prom_module=$(modver tools github.com/prometheus/prometheus)
  [[ $prom_module =~ ^v0\.([0-9])([0-9]{2})\.([0-9]+)$ ]] || { echo "tools: unexpected github.com/prometheus/prometheus version $prom_module" >&2; exit 1; }
  prom_ldflags="-X github.com/prometheus/common/version.Version=${BASH_REMATCH[1]}.$((10#${BASH_REMATCH[2]})).${BASH_REMATCH[3]}"
  GOFLAGS="$GOFLAGS -tags=remove_all_sd" \
  build "promtool prometheus"   tools "github.com/prometheus/prometheus/cmd/promtool github.com/prometheus/prometheus/cmd/prometheus" "$prom_ldflags"
}
other_line() {
  run_other_line
  build golangci-lint           tools/lint github.com/golangci/golangci-lint/v2/cmd/golangci-lint "-X main.version=${lint#v}"
  # Argo CD v3.6 declares Go 1.27: this build alone uses the approved
  # go1.27.3 toolchain, which the go command fetches from the module proxy.
  local argocd
  argocd=$(GOTOOLCHAIN=go1.27.3 modver tools/argocd github.com/argoproj/argo-cd/v3)
  GOTOOLCHAIN=go1.27.3 \
  build argocd                  tools/argocd github.com/argoproj/argo-cd/v3/cmd "-X github.com/argoproj/argo-cd/v3/common.version=${argocd#v}"
  # Kyverno's CLI: its apply runs the admission controller's
  # image-verification engine, which test/ship holds deploy/kyverno to.
  build kyverno                 tools/kyverno github.com/kyverno/kyverno/cmd/cli/kubectl-kyverno \
    "-X github.com/kyverno/kyverno/pkg/version.BuildVersion=$(modver tools/kyverno github.com/kyverno/kyverno)"
}
if [[ $set_name == run ]]; then
  run_shared_line & shared_pid=$!
  run_other_line & other_pid=$!
else
  shared_line & shared_pid=$!
  other_line & other_pid=$!
fi
failed=0
wait "$shared_pid" || failed=1
wait "$other_pid" || failed=1
[[ $failed == 0 ]] || { echo "tools: FAILED; see the errors above" >&2; exit 1; }
if [[ $set_name == run ]]; then
  echo "$key" > "$stamp"
  print_table
  exit 0
fi

# The controllers' CRDs, from the same module versions, for the tests that
# install them (test/e2e's Flux run).
rm -rf "$bin/flux-crds" && mkdir -p "$bin/flux-crds"
for m in source-controller kustomize-controller; do
  dir=$(cd "$root/tools" && go list -m -f '{{.Dir}}' "github.com/fluxcd/$m")
  cp "$dir"/config/crd/bases/*.yaml "$bin/flux-crds/"
done
chmod -R u+w "$bin/flux-crds"
# helm-controller itself is not served by the Go module proxy, so the
# HelmRelease CRD (for deploy/flux/helm) is generated from its API module,
# pinned in tools/go.mod, by the same controller-gen as ours.
helm_api=$(modver tools github.com/fluxcd/helm-controller/api)
(cd "$root/tools" && "$bin/controller-gen" crd paths=github.com/fluxcd/helm-controller/api/v2 output:crd:dir="$bin/flux-crds")
echo "tools: Flux CRDs of source-controller ${flux_source}, kustomize-controller ${flux_kustomize} and helm-controller/api ${helm_api} in ${bin#"$root"/}/flux-crds"

# Kyverno's policies.kyverno.io CRDs from the same module, so that
# deploy/kyverno is held to the schema Kyverno serves.
kyverno_dir=$(cd "$root/tools/kyverno" && go list -m -f '{{.Dir}}' github.com/kyverno/kyverno)
rm -rf "$bin/kyverno-crds" && mkdir -p "$bin/kyverno-crds"
cp "$kyverno_dir"/config/crds/policies.kyverno.io/*.yaml "$bin/kyverno-crds/"
chmod -R u+w "$bin/kyverno-crds"
echo "tools: Kyverno $(modver tools/kyverno github.com/kyverno/kyverno) policies.kyverno.io CRDs in ${bin#"$root"/}/kyverno-crds"

# Argo CD's own install manifests (its CRDs, ConfigMaps and Secret, which
# test/internal/argocd installs from here rather than from copies) and the
# script its repo-server runs from PATH on every manifest generation,
# git-verify-wrapper.sh.
argocd_dir=$(cd "$root/tools/argocd" && GOTOOLCHAIN=go1.27.3 go list -m -f '{{.Dir}}' github.com/argoproj/argo-cd/v3)
rm -rf "$bin/argocd-dist" && mkdir -p "$bin/argocd-dist/path"
cp "$argocd_dir/manifests/install.yaml" "$bin/argocd-dist/"
cp "$argocd_dir/hack/git-verify-wrapper.sh" "$bin/argocd-dist/path/"
chmod -R u+w "$bin/argocd-dist" && chmod +x "$bin/argocd-dist/path/"*.sh
echo "tools: Argo CD $(GOTOOLCHAIN=go1.27.3 modver tools/argocd github.com/argoproj/argo-cd/v3) install manifests and helper scripts in ${bin#"$root"/}/argocd-dist"

# The monitoring.coreos.com CRDs, generated from prometheus-operator's API
# module (tools/monitoring/crds.go imports it) by controller-gen, as prometheus-operator
# generates its own, for test/monitoring.
mon_api=$(modver tools github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring)
rm -rf "$bin/monitoring-crds"
(cd "$root/tools" && "$bin/controller-gen" crd paths=github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1 output:crd:dir="$bin/monitoring-crds")
echo "tools: monitoring.coreos.com CRDs of prometheus-operator ${mon_api} in ${bin#"$root"/}/monitoring-crds"

# The cert-manager.io CRDs, generated the same way from cert-manager's API
# (tools/certmanager/crds.go imports it), for test/deploy's dry run of
# deploy/components/cert-manager.
cm_api=$(modver tools github.com/cert-manager/cert-manager)
rm -rf "$bin/certmanager-crds"
(cd "$root/tools" && "$bin/controller-gen" crd paths=github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1 output:crd:dir="$bin/certmanager-crds")
echo "tools: cert-manager.io CRDs of cert-manager ${cm_api} in ${bin#"$root"/}/certmanager-crds"

echo "$key" > "$stamp"
print_table
