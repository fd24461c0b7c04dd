# Memcached operator: build, test and ship a Kubernetes operator GitOps-style.
# `make help` lists the targets. Everything runs from tools built into bin/.

SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

BIN := $(CURDIR)/bin
# envtest (controller-runtime) finds kube-apiserver and etcd here, for every
# target that runs tests.
export KUBEBUILDER_ASSETS := $(BIN)

# Every go command builds one way, as the toolchain in bin/ is built
# (scripts/build-tools.sh): static, without the machine's paths, and without
# debug information (the binaries are stripped; compiling it costs 18% of
# the CPU). So a package compiled once, for make build, make lint's type
# information, make test or an image, is compiled once for all of them
# (docs/development.md#cold-start). The race detector needs cgo: the race
# run turns it back on for itself.
export CGO_ENABLED := 0
export GOFLAGS := -trimpath -gcflags=all=-dwarf=false

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)
GO_MODULES := operator krm-functions/set-image-replicas hack test docs/examples/go
GO_PACKAGES := $(addprefix ./,$(addsuffix /...,$(GO_MODULES)))
# The real-memcached tier runs on its own, verbosely, so its figures (specs
# tried and accepted, the seed) show in the output.
MEMCACHED_TIER := ./test/memcached
# The end-to-end scenarios: the long pole of make test, run beside the other
# suites (scripts/test-suites.sh).
E2E_PACKAGES := ./test/e2e
# The operator's suites run under the race detector: 16 reconcile workers
# share the write tracker and the template record.
RACE_PACKAGES := ./operator/...
# What needs no bin/: the packages of the product modules, the generators
# and the test harness that have unit tests. -tags unit leaves out the files
# that need a control plane (they carry //go:build !unit), and packages
# without tests are not listed (go test would compile them too), so neither
# envtest nor the cluster harness is compiled; make test runs this too, so
# the split cannot rot.
UNIT_PACKAGES = $(shell go list -tags unit -f '{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}}{{end}}' ./operator/... ./krm-functions/set-image-replicas/... ./hack/... ./test/internal/... ./test/docs/...)

CONTROLLER_GEN := $(BIN)/controller-gen
GOLANGCI_LINT := $(BIN)/golangci-lint
KUSTOMIZE := $(BIN)/kustomize
KUBECTL := $(BIN)/kubectl

# The environment deploy, undeploy, render and pin work on: overlays/$(ENV).
ENV ?= dev
ENVS := dev staging prod

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make \033[36m<target>\033[0m [VAR=value]\n"} \
		/^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-16s\033[0m %s\n", $$1, $$2 } \
		/^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Development

.PHONY: tools
tools: ## Build the pinned toolchain into bin/ from tools/ and print what each build cost (cold: docs/development.md#cold-start; warm: seconds).
	@scripts/build-tools.sh $(BIN)

.PHONY: run-tools
run-tools: ## Build only what a local cluster needs (control plane, kubelet, CoreDNS, etcd, kwok, kustomize, exporter): what make run, deploy and render wait for.
	@scripts/build-tools.sh $(BIN) run

.PHONY: generate
generate: tools ## Generate the API's deepcopy code from its markers.
	cd operator && $(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./api/...

.PHONY: manifests
manifests: tools ## Generate the CRD and RBAC role from the operator's markers, then everything made from deploy/: monitoring objects, alerts and dashboard, Helm chart, OLM bundle and catalog.
	cd operator && $(CONTROLLER_GEN) rbac:roleName=memcached-operator-manager-role,headerFile=hack/boilerplate.yaml.txt crd:headerFile=hack/boilerplate.yaml.txt paths=./... \
		output:crd:artifacts:config=../deploy/crd/bases output:rbac:artifacts:config=../deploy/rbac
	go run ./hack/cmd/generate prometheus helm-chart bundle catalog

# The release version make helm-chart and make bundle set: VERSION only when
# given on the command line or in the environment, never git describe's.
RELEASE_VERSION = $(if $(filter environment command,$(firstword $(origin VERSION))),$(VERSION))

.PHONY: helm-chart
helm-chart: ## Generate the Helm chart deploy/helm/memcached-operator from deploy/ ([VERSION=v0.2.0] sets the release version first).
	go run ./hack/cmd/generate $(if $(RELEASE_VERSION),set-version=$(RELEASE_VERSION)) prometheus helm-chart

.PHONY: bundle
bundle: ## Generate the OLM bundle (bundle/, bundle.Dockerfile) and its catalog/ entry ([VERSION=v0.2.0] sets the release version first).
	go run ./hack/cmd/generate $(if $(RELEASE_VERSION),set-version=$(RELEASE_VERSION) prometheus helm-chart) bundle catalog

.PHONY: fmt
fmt: tools ## Format the Go code (gofmt + goimports through golangci-lint).
	@for m in $(GO_MODULES); do (cd $$m && $(GOLANGCI_LINT) fmt ./...); done

.PHONY: vet
vet: ## Run go vet on every module.
	go vet $(GO_PACKAGES)

.PHONY: lint
lint: tools ## Run golangci-lint (errcheck, staticcheck, nilerr, revive, ...) on every module.
	@for m in $(GO_MODULES); do echo "lint: $$m"; (cd $$m && $(GOLANGCI_LINT) run ./...); done

##@ Build

.PHONY: build
build: pins-bin ## Build bin/manager, bin/reloader and bin/set-image-replicas as their images do (static, from their own go.mod), bin/image (the image builder), bin/cluster (the local cluster) and bin/pins (the overlays' pins).
	cd operator && GOWORK=off go build -buildvcs=false -ldflags "-s -w -X main.version=$(VERSION)" -o $(BIN)/manager ./cmd
	cd operator && GOWORK=off go build -buildvcs=false -ldflags "-s -w -X main.version=$(VERSION)" -o $(BIN)/reloader ./cmd/reloader
	cd krm-functions/set-image-replicas && GOWORK=off go build -buildvcs=false -ldflags "-s -w" -o $(BIN)/set-image-replicas .
	go build -o $(BIN)/image ./hack/cmd/image
	go build -o $(BIN)/cluster ./hack/cmd/cluster

# bin/pins, silently: make render's stdout is manifests.
.PHONY: pins-bin
pins-bin:
	@go build -o $(BIN)/pins ./hack/cmd/pins

##@ Ship (no Docker needed; see docs/shipping.md)

# The manager's image; set-image-replicas goes beside it (FN_IMG).
IMG ?= localhost:5000/memcached-operator:$(VERSION)
REGISTRY ?= localhost:5000
# The release key pair (docs/signing.md): the private key signs what make
# release, helm-push and olm-publish push (a file, or env://VAR); the
# public key verifies before make promote and make pin RESOLVE=1 write a
# digest, and in make verify-release. make keygen writes a dev pair here.
export COSIGN_KEY ?= $(CURDIR)/.work/cosign.key
export COSIGN_PUBLIC_KEY ?= $(CURDIR)/.work/cosign.pub

# The manager image make deploy and make render run instead of the overlay's
# pin: IMG only when given on the command line or in the environment (the
# seed's `export IMG=...`), never the default above.
DEPLOY_IMG = $(if $(filter environment command,$(firstword $(origin IMG))),$(IMG))

.PHONY: docker-build
docker-build: build ## Build the manager and set-image-replicas images (linux/amd64, linux/arm64, SBOMs) into dist/images, without Docker.
	@VERSION=$(VERSION) scripts/images.sh build

.PHONY: docker-push
docker-push: build ## Push them: the manager to IMG, set-image-replicas beside it (FN_IMG); plain HTTP only to this machine or a private address.
	@IMG=$(IMG) scripts/images.sh push

.PHONY: helm-push
helm-push: tools build ## Package the chart (a release VERSION sets its version), push it to oci://$(REGISTRY)/charts (plain HTTP only to this machine or a private address) and sign it.
	@VERSION=$(VERSION) REGISTRY=$(REGISTRY) scripts/helm-push.sh

.PHONY: olm-publish
olm-publish: tools build ## Build, push and sign the bundle and catalog images to REGISTRY, the bundle pinned by digest in the catalog; prints the CatalogSource.
	@VERSION=$(VERSION) REGISTRY=$(REGISTRY) scripts/olm.sh

.PHONY: registry-up
registry-up: tools ## Run a local OCI registry on 127.0.0.1:5000 (REGISTRY_PORT), storage under .work/registry.
	@scripts/registry.sh up

.PHONY: registry-down
registry-down: ## Stop the local registry and delete what it stored.
	@scripts/registry.sh down

.PHONY: release
release: tools build ## Build, push, sign, attest and pin a release by digest: make release VERSION=v0.2.0 REGISTRY=localhost:5000 [ENV=staging [TAG=1: commit the pins, tag VERSION]]; writes dist/install.yaml.
	@VERSION=$(VERSION) REGISTRY=$(REGISTRY) TAG=$(TAG) scripts/release.sh

.PHONY: keygen
keygen: tools build ## Make a dev signing key pair (no password) at .work/cosign.key and .work/cosign.pub; never overwrites one.
	@$(BIN)/image keygen --prefix $(CURDIR)/.work/cosign

.PHONY: verify-release
verify-release: tools build ## Verify every artifact of a release with COSIGN_PUBLIC_KEY: make verify-release VERSION=v0.2.0 REGISTRY=localhost:5000 (digest, signature, provenance commit, SBOMs).
	@$(BIN)/image verify-release --registry $(REGISTRY) --version $(VERSION)

.PHONY: retarget
retarget: tools build ## Point every overlay's images at REGISTRY: a fork's registry or a mirror.
	@bin/pins retarget $(REGISTRY)

##@ Run

.PHONY: run
run: run-tools build ## Run the operator on a local cluster (CLUSTER=current: yours) with the tutorial's Memcached.
	@scripts/run.sh

# The memcached make memcached-cli talks to, and the cluster it is in.
MEMCACHED ?= memcached-sample.default.svc:11211
LOCAL_KUBECONFIG := $(or $(KUBECONFIG),$(CURDIR)/.work/kubeconfig)

.PHONY: memcached-cli
memcached-cli: ## Talk to memcached from a pod of the local cluster: make memcached-cli ARGS="set greeting hello" (get KEY, stats [NAME]; MEMCACHED=host:port).
	@KUBECONFIG=$(LOCAL_KUBECONFIG) scripts/memcached-cli.sh $(MEMCACHED) $(ARGS)

.PHONY: cluster-up
cluster-up: run-tools build ## Create or reuse the local cluster (.work/kubeconfig): REAL_NODES=3 real nodes (root, Linux), else NODES=3 fake ones.
	@bin/cluster up

.PHONY: cluster-down
cluster-down: build ## Delete the local cluster, its files, and everything its real nodes changed on the machine.
	@bin/cluster down

##@ Deployment (to the cluster of $KUBECONFIG or the current context)

.PHONY: install
install: run-tools ## Install the operator's namespace, CRD and RBAC (deploy/install).
	$(KUSTOMIZE) build deploy/install | $(KUBECTL) apply --server-side -f -
	$(KUBECTL) wait --for=condition=Established --timeout=60s crd/memcacheds.cache.example.com

.PHONY: uninstall
uninstall: run-tools delete-memcacheds ## Remove what `make install` installed (run it while the operator still runs).
	$(KUSTOMIZE) build deploy/install | $(KUBECTL) delete --ignore-not-found --wait=false -f -

.PHONY: deploy
deploy: install build ## Deploy overlays/$(ENV): the operator and the environment's Memcacheds (IMG=...: run that manager image).
	bin/pins manifests $(if $(DEPLOY_IMG),-img $(DEPLOY_IMG)) $(ENV) | $(KUBECTL) apply --server-side -f -

.PHONY: undeploy
undeploy: run-tools delete-memcacheds ## Remove overlays/$(ENV) from the cluster, Memcacheds first.
	$(KUSTOMIZE) build overlays/$(ENV) | $(KUBECTL) delete --ignore-not-found --wait=false -f -

# Memcacheds carry the operator's finalizer: they must go while the operator
# still runs, or they (and the CRD) wait for it forever.
.PHONY: delete-memcacheds
delete-memcacheds:
	@if $(KUBECTL) get crd memcacheds.cache.example.com >/dev/null 2>&1; then \
		$(KUBECTL) delete memcacheds.cache.example.com --all --all-namespaces --wait --timeout=60s || { \
		echo "Memcacheds are still there: is the operator running? See docs/deploy/uninstall.md." >&2; exit 1; }; fi

.PHONY: render
render: run-tools pins-bin ## Print the manifests of overlays/$(ENV) (what Argo CD and Flux apply; IMG=... as make deploy).
	@bin/pins manifests $(if $(DEPLOY_IMG),-img $(DEPLOY_IMG)) $(ENV)

.PHONY: kpt-render
kpt-render: tools build ## Render every overlay's pins with kpt: kpt fn render overlays/<env> --allow-exec, bin/ on PATH.
	@bin/pins render $(ENVS)

.PHONY: pin
pin: tools build ## Pin images/replicas of $(ENV): make pin ENV=prod IMAGE=repo:tag [RESOLVE=1: by its registry digest] REPLICAS="Memcached/app-cache=3".
	@bin/pins pin $(if $(RESOLVE),-resolve) -replicas "$(REPLICAS)" $(ENV) $(IMAGE)

.PHONY: promote
promote: tools build ## Copy the image pins of FROM into TO and render them: make promote FROM=staging TO=prod (digests from the registry).
	@bin/pins promote $(FROM) $(TO)

BASE ?= HEAD
.PHONY: diff
diff: pins-bin ## Review a change: per environment and object, what the working tree changes in the rendered overlays since BASE (default HEAD; BASE=main for a branch).
	@bin/pins diff -base $(BASE) $(ENVS)

##@ Test

.PHONY: test
test: test-unit tools build lint test-deps ## Everything CI runs: lint, unit, golden and envtest suites (the operator's with -race), deployment proofs, e2e, real memcached.
	@E2E_PACKAGES='$(E2E_PACKAGES)' RACE_PACKAGES='$(RACE_PACKAGES)' MEMCACHED_TIER='$(MEMCACHED_TIER)' \
		OTHER_PACKAGES="$$(go list $(GO_PACKAGES) | grep -v -e '/test/memcached$$' -e '/test/e2e$$' -e '/operator/')" \
		scripts/test-suites.sh

.PHONY: test-unit
test-unit: ## The tests that need no bin/ (no toolchain, no cluster, no envtest compiled): seconds warm, for the edit-test loop.
	go test -tags unit -count=1 $(UNIT_PACKAGES)

.PHONY: test-deps
test-deps: ## Install what the tests run that is not a Go module (Debian's memcached, containerd, runc, CNI plugins, iptables, nftables, redis-server; as root with apt-get).
	@scripts/test-deps.sh

.PHONY: test-memcached
test-memcached: tools build test-deps ## The operator's pod templates against real memcached and memcached_exporter, 500+ random specs (MEMCACHED_PROPERTY_SEED=...).
	go test -count=1 -timeout 15m -v $(MEMCACHED_TIER) 2>&1 | grep -vE '^=== (RUN|PAUSE|CONT)'

.PHONY: bench
bench: tools build test-deps ## Measure the operator against the equal-work and objects-only floors and the seed (N=100,1000, 3 runs), its change latency, the KRM function, and cache pods on real nodes (root); writes docs/benchmarks.md (~30 min).
	go run ./test/bench/cmd/bench $(BENCH_ARGS)

.PHONY: bench-dataplane
bench-dataplane: tools build test-deps ## Only make bench's real-node section (root): each cache container's memory and CPU, clients' throughput and latency with TLS and auth and through rollouts; keeps the other figures (~6 min).
	go run ./test/bench/cmd/bench -controlplane=false -krm=false $(BENCH_ARGS)

.PHONY: bench-10k
bench-10k: tools build ## The same at N=10,000, one run, keeping the other figures in docs/benchmarks.md (~20 min).
	go run ./test/bench/cmd/bench -n 10000 -runs 1 -krm=false -dataplane=false $(BENCH_ARGS)

.PHONY: hit-ratio
hit-ratio: tools build test-deps ## Measure on 3 real nodes (root) how many keys each identity keeps through a pod replacement, a rollout and scaling, with a ketama client over status.serverList; writes docs/hit-ratio.md (~6 min).
	cd test && HIT_RATIO_DOC=$(CURDIR)/docs/hit-ratio.md go test ./e2e -run 'TestRealNodes$$' -count=1 -timeout 30m

.PHONY: chaos
chaos: tools build ## Break the operator's world on purpose (leader kill, control-plane outage, 1,000 drift events, lost RBAC, admission, upgrade, 5,000 CRs, 1M fuzz execs); writes docs/reliability.md (~1 h).
	go run ./test/chaos/cmd/chaos $(CHAOS_ARGS)

.PHONY: e2e
e2e: tools build test-deps ## End-to-end on local clusters: the operator from its image on real nodes, every overlay, Kubernetes' own semantics, Flux itself (also part of make test).
	go test -count=1 -timeout 20m -v ./test/e2e/
