# wasmsched: `make run` starts an embedded control plane with the scheduler
# and example policies; `make test` runs every test. Both set themselves up.

GO            ?= go
BIN           := $(CURDIR)/bin
TOOLS         := $(CURDIR)/.bin
EXAMPLES      := $(notdir $(patsubst %/,%,$(dir $(wildcard examples/*/main.go))))
GUEST_ENV     := GOOS=wasip1 GOARCH=wasm
GUEST_FLAGS   := -buildmode=c-shared -trimpath -ldflags="-s -w"
K8S_VERSION   := $(shell $(GO) list -m -f '{{.Version}}' k8s.io/kubernetes 2>/dev/null)
LDFLAGS       := -X k8s.io/component-base/version.gitVersion=$(K8S_VERSION) -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=35
PLUGIN_GEN    := github.com/knqyf263/go-plugin/cmd/protoc-gen-go-plugin@v0.9.0
TEST_TIMEOUT  ?= 30m
RACE_PKGS     := ./host ./host/convert ./host/engine ./host/eval ./host/interrupt ./host/plugin ./host/policy ./host/pool

.PHONY: all build build-scheduler examples generate check-generate protoc test test-short vet bench run clean

all: build examples

## build: bin/wasmsched and bin/kube-scheduler
build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/wasmsched ./cmd/wasmsched
	$(MAKE) --no-print-directory build-scheduler

## build-scheduler: bin/kube-scheduler alone (SCHEDULER_OUT overrides the path)
SCHEDULER_OUT ?= $(BIN)/kube-scheduler
build-scheduler:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(SCHEDULER_OUT) ./cmd/kube-scheduler

## run: embedded control plane + scheduler with the example policies, demo pods placed
run: examples
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/wasmsched ./cmd/wasmsched
	$(BIN)/wasmsched up --demo --policies $(BIN)/policies

## examples: every examples/<name> to bin/policies/<name>.wasm
examples: $(addprefix $(BIN)/policies/,$(addsuffix .wasm,$(EXAMPLES)))

$(BIN)/policies/%.wasm: FORCE
	@mkdir -p $(BIN)/policies
	$(GUEST_ENV) $(GO) build $(GUEST_FLAGS) -o $@ ./examples/$*

FORCE:

## protoc: make sure Debian's protoc and its well-known types are installed
protoc:
	@command -v protoc >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "installing protobuf-compiler with apt-get"; \
	    (apt-get install -y -q protobuf-compiler libprotobuf-dev >/dev/null 2>&1 || \
	     (apt-get update -q >/dev/null && apt-get install -y -q protobuf-compiler libprotobuf-dev >/dev/null)); \
	  else echo "protoc is missing: install protobuf-compiler (Debian) as root" >&2; exit 1; fi; }

## generate: regenerate abi/v1 from policy.proto (byte for byte reproducible)
generate: protoc
	GOBIN=$(TOOLS) $(GO) install $(PLUGIN_GEN)
	cd abi/v1 && protoc --plugin=protoc-gen-go-plugin=$(TOOLS)/protoc-gen-go-plugin \
	  --go-plugin_out=. --go-plugin_opt=paths=source_relative policy.proto
	@# wasmsched uses only the message code; the generated transport (host loader,
	@# guest exports, options) is replaced by host/engine and guest (RATIONALE.md).
	rm -f abi/v1/policy_host.pb.go abi/v1/policy_plugin.pb.go abi/v1/policy_options.pb.go

## check-generate: fail if the committed generated code differs from a fresh generation
check-generate: generate
	@git diff --exit-code -- abi/v1/ || { echo "abi/v1: generated code is stale: run make generate and commit" >&2; exit 1; }

vet:
	$(GO) vet ./...
	$(GUEST_ENV) $(GO) vet ./guest/... ./examples/...
	@test -z "$$(gofmt -l $$(git ls-files '*.go' | grep -v '\.pb\.go$$'))" || { gofmt -l $$(git ls-files '*.go' | grep -v '\.pb\.go$$'); echo "gofmt needed" >&2; exit 1; }

## test: every test (guests are built by the tests themselves)
test: vet
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) ./...
	@# The race detector on the host packages that run guests; host/source's
	@# tests start a control plane, too costly to build with -race on 2 cores.
	$(GO) test -count=1 -race -timeout $(TEST_TIMEOUT) $(RACE_PKGS)

## bench: host micro-benchmarks
bench:
	$(GO) test -run '^$$' -bench . -benchmem -benchtime=1x ./host/ >/dev/null
	$(GO) test -run '^$$' -bench . -benchmem ./host/

clean:
	rm -rf $(BIN) $(TOOLS)
