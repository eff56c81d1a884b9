# tool-catalog-operator

IMG ?= tool-catalog-operator:dev
# Go tools are pinned in go.mod (`tool` directives) and run with `go tool`.
CONTROLLER_GEN ?= go tool controller-gen
KUBECTL ?= kubectl
# Directory holding kube-apiserver, etcd and kubectl for envtest; built from
# Go modules by hack/build-controlplane.sh unless set.
KUBEBUILDER_ASSETS ?=
GO_TEST_FLAGS ?= -timeout 20m
export GOFLAGS ?= -buildvcs=false

SHELL = /usr/bin/env bash -o pipefail
.SHELLFLAGS = -ec

.PHONY: all
all: build

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "\nUsage:\n  make \033[36m<target>\033[0m\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) } ' $(MAKEFILE_LIST)

##@ Development

.PHONY: manifests
manifests: ## Generate CRDs and RBAC from the API types and markers.
	$(CONTROLLER_GEN) rbac:roleName=manager-role crd:allowDangerousTypes=true webhook paths="./..." output:crd:artifacts:config=config/crd/bases

.PHONY: generate
generate: ## Generate DeepCopy methods.
	$(CONTROLLER_GEN) object:headerFile="hack/boilerplate.go.txt" paths="./..."

.PHONY: docs
docs: manifests ## Regenerate docs/api.md from the CRDs.
	go run ./hack/apidocs docs/api.md

.PHONY: chart-docs
chart-docs: ## Regenerate charts/tool-catalog-operator/README.md from its values.yaml (helm-docs, pinned in hack/tools).
	cd hack/tools && go tool helm-docs --chart-search-root ../../charts

.PHONY: fmt
fmt: ## Run go fmt.
	go fmt ./...

.PHONY: vet
vet: ## Run go vet.
	go vet ./...

.PHONY: lint
lint: ## Run golangci-lint (pinned in hack/tools/lint; .golangci.yml says which checks).
	cd hack/tools/lint && go build -o ../../../bin/golangci-lint github.com/golangci/golangci-lint/v2/cmd/golangci-lint
	bin/golangci-lint run --timeout 15m ./...

.PHONY: controlplane
controlplane: ## Build kube-apiserver, etcd and kubectl for envtest into bin/ (cached).
	@bash hack/build-controlplane.sh >/dev/null

.PHONY: prereqs
prereqs: ## Check (and on Debian/Ubuntu as root or with passwordless sudo, install) what test and run need.
	@bash hack/prereqs.sh

.PHONY: test
test: prereqs manifests generate fmt vet lint ## Run all tests against a real kube-apiserver, etcd and redis-server.
	assets="$${KUBEBUILDER_ASSETS:-$$(bash hack/build-controlplane.sh)}"; \
	KUBEBUILDER_ASSETS="$$assets" go test $(GO_TEST_FLAGS) ./...

FUZZTIME ?= 30s
.PHONY: fuzz
fuzz: ## Run every fuzz test for FUZZTIME each (make test runs their seed corpora only).
	@for pkg in $$(grep -rl --include='*_test.go' '^func Fuzz' --exclude-dir=bin . | xargs -n1 dirname | sort -u); do \
		for fn in $$(grep -ho '^func Fuzz[A-Za-z0-9_]*' $$pkg/*_test.go | sed 's/^func //'); do \
			echo "== $$pkg $$fn ($(FUZZTIME))"; \
			go test $$pkg -run '^$$' -fuzz "^$$fn$$" -fuzztime $(FUZZTIME) || exit 1; \
		done; \
	done

.PHONY: bench
bench: ## Run the Go benchmarks (embedding, search latency at 1k and 10k tools).
	go test -run '^$$' -bench . -benchmem ./...

SCALE_ARGS ?= -scale.sizes=1000,10000 -scale.slow-tools=1000 -scale.chat-latency=2s -scale.pass-budget=20s -scale.edits=5
.PHONY: bench-scale
bench-scale: prereqs ## Measure large catalogs (manager process, API server, Redis, provider with 2 s chat latency) and print the table; make test runs it small.
	assets="$${KUBEBUILDER_ASSETS:-$$(bash hack/build-controlplane.sh)}"; \
	KUBEBUILDER_ASSETS="$$assets" go test ./test/scale -run 'TestScale$$' -count=1 -v -timeout 90m -args $(SCALE_ARGS)

.PHONY: bench-scale-catalogs
bench-scale-catalogs: prereqs ## An organisation's shape: 500 catalogs of 200 tools over 100 namespaces, 100,000 ToolDefinitions, half selected by two catalogs.
	assets="$${KUBEBUILDER_ASSETS:-$$(bash hack/build-controlplane.sh)}"; \
	KUBEBUILDER_ASSETS="$$assets" go test ./test/scale -run TestScaleManyCatalogs -count=1 -v -timeout 150m -args -scale.catalogs=500 -scale.catalog-tools=200 -scale.namespaces=100 -scale.edits=3

.PHONY: bench-scale-50k
bench-scale-50k: ## bench-scale at 50,000 tools (bulk apply, records, one edit, consumer load and search); about 45 minutes.
	$(MAKE) bench-scale SCALE_ARGS="-scale.sizes=50000 -scale.slow-tools=0 -scale.pass-budget=20s -scale.edits=3"

GATEWAY_ARGS ?= -gateway.clients=16 -gateway.duration=20s -gateway.tools=200
.PHONY: bench-gateway
bench-gateway: prereqs ## Load the MCP gateway (API server, Redis, manager, upstream MCP server, all on loopback) and print throughput and latency; make test runs it small.
	assets="$${KUBEBUILDER_ASSETS:-$$(bash hack/build-controlplane.sh)}"; \
	KUBEBUILDER_ASSETS="$$assets" go test ./internal/gateway -run '^TestLoad$$' -count=1 -v -timeout 30m -args $(GATEWAY_ARGS) | grep -E 'load_test|^(ok|FAIL|---)'

.PHONY: bench-gateway-catalogs
bench-gateway-catalogs: prereqs ## One gateway process serving 200 catalogs to 64 clients (own principals, sessions on several catalogs each): throughput, latency, the gateway's CPU and peak RSS, a new version → list_changed.
	assets="$${KUBEBUILDER_ASSETS:-$$(bash hack/build-controlplane.sh)}"; \
	KUBEBUILDER_ASSETS="$$assets" go test ./test/scale -run TestGatewayManyCatalogs -count=1 -v -timeout 60m -args \
	  -scale.gateway-catalogs=200 -scale.gateway-tools=50 -scale.gateway-namespaces=20 -scale.gateway-clients=64 -scale.gateway-duration=30s -scale.edits=5

DATA ?= internal/evaluation/testdata/mini
RETRIEVAL_ARGS ?=
.PHONY: bench-retrieval
bench-retrieval: ## Measure retrieval quality and latency on DATA (tools.json + queries.json), e.g. DATA=../shared/bench/seal-tools; RETRIEVAL_ARGS=-replay=5 measures learning from use.
	go run ./cmd/bench-retrieval -data $(DATA) $(RETRIEVAL_ARGS)

BENCH_SETS ?= ../shared/bench
.PHONY: bench-retrieval-cross
bench-retrieval-cross: ## Report each set under BENCH_SETS with the hybrid constants chosen on the other sets (leave one set out), beside the defaults.
	go run ./cmd/bench-retrieval -cross $(BENCH_SETS) $(RETRIEVAL_ARGS)

##@ Build

# Release builds drop the symbol table and DWARF (-s -w; stack traces and
# pprof still resolve names) and build paths (-trimpath), as the image does.
# grpcnotrace keeps gRPC (linked by the OTLP exporter) from importing
# golang.org/x/net/trace, whose html/template makes the linker keep every
# exported method: 35 MB more per binary.
BUILD_FLAGS ?= -trimpath -tags grpcnotrace -ldflags="-s -w"
.PHONY: build
build: manifests generate fmt vet ## Build the manager, the MCP gateway, the kubectl plugin and the offline check into bin/, stripped as released.
	go build $(BUILD_FLAGS) -o bin/manager ./cmd/manager
	go build $(BUILD_FLAGS) -o bin/toolcatalog-gateway ./cmd/toolcatalog-gateway
	go build $(BUILD_FLAGS) -o bin/kubectl-toolcatalog ./cmd/kubectl-toolcatalog
	go build $(BUILD_FLAGS) -o bin/toolcatalog-check ./cmd/toolcatalog-check
	@stat -c '%n %s' bin/manager bin/toolcatalog-gateway bin/kubectl-toolcatalog bin/toolcatalog-check | awk '{ printf "%-26s %6.1f MB\n", $$1, $$2 / 1e6 }'

# The generators' inputs: the API types, the controllers' RBAC markers and
# the header. CI keeps the committed CRDs, RBAC and deep copies in step with
# them, so they are regenerated only when these differ from the last commit
# (or outside a git checkout).
GENERATOR_INPUTS := api controllers hack/boilerplate.go.txt
.PHONY: generated
generated: ## Run the generators only when their inputs changed since the last commit.
	@if git rev-parse -q --verify HEAD >/dev/null 2>&1 && [[ -z "$$(git status --porcelain -- $(GENERATOR_INPUTS))" ]]; then \
		echo "generated files are those of HEAD: $(GENERATOR_INPUTS) are unchanged"; \
	else \
		$(MAKE) --no-print-directory manifests generate; \
	fi

# make run does what running needs: no vet or fmt of the whole tree (make
# test does both), generators only when their inputs changed.
.PHONY: run
run: prereqs generated ## Run the manager: against the current cluster, or a local one (API server, etcd, Redis, samples) when none answers.
	go build -o bin/kubectl-toolcatalog ./cmd/kubectl-toolcatalog
	go build -o bin/localrun ./hack/localrun
	bin/localrun $(RUN_ARGS)

##@ Deployment

.PHONY: install
install: manifests ## Install the CRDs into the cluster of the current kubeconfig.
	$(KUBECTL) apply --server-side -f config/crd/bases

.PHONY: docker-build
docker-build: ## Build the manager image IMG (needs a Docker engine).
	docker build -t $(IMG) .

.PHONY: deploy
deploy: manifests ## Deploy CRDs, RBAC and the manager (image IMG) to the current cluster.
	$(KUBECTL) kustomize config/default | sed 's|image: tool-catalog-operator:dev|image: $(IMG)|' | $(KUBECTL) apply --server-side -f -

.PHONY: undeploy
undeploy: ## Remove what deploy created (CRDs included, so every catalog and tool too).
	$(KUBECTL) kustomize config/default | $(KUBECTL) delete --ignore-not-found -f -

.PHONY: uninstall
uninstall: manifests ## Remove the CRDs from the cluster of the current kubeconfig.
	$(KUBECTL) delete --ignore-not-found -f config/crd/bases
