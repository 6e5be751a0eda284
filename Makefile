# wasmsched: `make run` starts an embedded control plane with the scheduler
# and example policies; `make test` runs every test. Both set themselves up.

GO            ?= go
# Every build but the race detector's runs with cgo off: the image's
# kube-scheduler must be static, and one setting for tests, tools and
# binaries lets them share one build cache (cgo on or off compiles every
# package above net and os/user again, most of Kubernetes). Race builds
# need cgo and set it themselves (RACE_ENV).
CGO_ENABLED   ?= 0
export CGO_ENABLED
RACE_ENV      := CGO_ENABLED=1
BIN           := $(CURDIR)/bin
TOOLS         := $(CURDIR)/.bin
EXAMPLES      := $(notdir $(patsubst %/,%,$(dir $(wildcard examples/*/main.go))))
GUEST_ENV     := GOOS=wasip1 GOARCH=wasm
GUEST_FLAGS   := -buildmode=c-shared -trimpath -ldflags="-s -w"
# The Kubernetes minor to build for: go.mod's, the newest, unless K8S names
# another that k8s/<minor>.mod describes (make build K8S=1.36). Such a build
# runs outside the workspace with that module file and the build tag
# k8s<minor>, which selects the files bridging the framework's API
# differences (docs/compatibility.md, RATIONALE.md).
K8S_DEFAULT   := $(shell sed -n 's|^\tk8s.io/kubernetes v\(1\.[0-9]*\)\..*|\1|p' go.mod)
K8S_MINORS    := $(K8S_DEFAULT) $(shell ls k8s/*.mod 2>/dev/null | sed 's|k8s/\(.*\)\.mod|\1|' | sort -rV)
K8S           ?= $(K8S_DEFAULT)
export K8S
ifeq ($(K8S),$(K8S_DEFAULT))
KGO           := $(GO)
KFLAGS        :=
else ifneq ($(wildcard k8s/$(K8S).mod),)
KGO           := GOWORK=off $(GO)
KFLAGS        := -modfile=$(CURDIR)/k8s/$(K8S).mod -tags=k8s$(K8S)
else
$(error K8S=$(K8S): this tree builds for Kubernetes $(K8S_MINORS) (k8s/$(K8S).mod does not exist))
endif
K8S_VERSION   := $(shell $(KGO) list $(KFLAGS) -m -f '{{.Version}}' k8s.io/kubernetes 2>/dev/null)
LDFLAGS       := -X k8s.io/component-base/version.gitVersion=$(K8S_VERSION) -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$(word 2,$(subst ., ,$(K8S)))
PLUGIN_GEN    := github.com/knqyf263/go-plugin/cmd/protoc-gen-go-plugin@v0.9.0
# deepcopy-gen of the code-generator release matching the k8s.io/* staging
# modules go.mod pins (k8s.io/apimachinery's version).
DEEPCOPY_GEN  := k8s.io/code-generator/cmd/deepcopy-gen@$(shell $(GO) list -m -f '{{.Version}}' k8s.io/apimachinery 2>/dev/null)
TEST_TIMEOUT  ?= 30m
# Every go test here runs with vet off: make vet (before make test) runs
# every analyzer over every package of the workspace. go test's own subset
# of analyzers would compute its facts again for each dependency of each
# test binary (about 2900 packages; 480 s of 2 cores' time on a cold cache
# for the plain set alone, again for the race build). Test binaries link
# without DWARF (-w; stack traces need none): a fifth less link time each.
TESTFLAGS     := -vet=off -ldflags=-w
# Every package of the workspace (go.work): ./... stops at the go.mod of
# each SDK module, so they are named.
PKGS          := ./... ./abi/... ./guest/...
# Processes running test/e2e's tests side by side in make test (see test:).
E2E_PROCS     ?= 2
TEST_CLAIMS   := WASMSCHED_TEST_CLAIMS
SHARED_COMPILED := WASMSCHED_TEST_COMPILED
RACE_PKGS     := ./host ./host/compose ./host/convert ./host/engine ./host/eval ./host/interrupt ./host/lifecycle ./host/plugin ./host/policy ./host/pool
# RACE_PKGS run under the race detector with -tags nocontrolplane, which
# leaves out their tests that start a control plane: compiling the API
# server and etcd with -race as well (about 800 packages more than
# kube-scheduler's) cost a cold-cache CI run minutes for those few tests.
# ALSO_PLAIN are the race packages with such tests, or with sequential
# tests that skip themselves under -race (testwasm.SkipUnderRace: tens of
# seconds each compiling Go-built guests with the instrumented compiler):
# make test runs them again, whole, without -race.
RACE_TAGS     := nocontrolplane
# The program host/engine runs to compile a guest (in a child process):
# make test names a plain build for the race set (see host/engine).
COMPILER_EXE  := WASMSCHED_COMPILER_EXE
ALSO_PLAIN    := ./host/plugin ./host/policy
# What make test prints last when a test fails: the failed tests, their
# messages and packages, from the outputs it kept.
SUMMARISE_FAILURES := test/failures.sh
# PKGS but RACE_PKGS, as import paths (evaluated only by make test).
PLAIN_PKGS     = $(filter-out $(shell $(GO) list $(RACE_PKGS)),$(shell $(GO) list $(PKGS)))

.PHONY: test-e2e-race dist chart image image-all image-ci ci-goflags ci-prove-goflags minors default-minor smoke k8s-mods check-k8s-mods all build build-cli build-up build-scheduler examples test-scenarios generate generate-abi generate-deepcopy generate-manifests check-generate protoc test test-short vet bench bench-full bench-huge bench-host perf run clean fuzz fuzz-long tinygo chromium examples-tinygo test-tinygo tinygo-tests sdk-proxy sdk-tidy

all: build examples

## build: bin/wasmsched (the policy author's CLI), bin/wasmsched-up (the
## embedded cluster) and bin/kube-scheduler
build: build-cli build-up
	$(MAKE) --no-print-directory build-scheduler

## build-cli: bin/wasmsched alone (eval, test, pack, push, rollback, diff, status; no
## control plane linked, so it builds in a fraction of the time)
build-cli:
	$(KGO) build $(KFLAGS) -ldflags "$(LDFLAGS)" -o $(BIN)/wasmsched ./cmd/wasmsched

## build-up: bin/wasmsched-up, etcd + kube-apiserver + the scheduler in one
## process (UP_OUT overrides the path)
UP_OUT ?= $(BIN)/wasmsched-up
build-up:
	$(KGO) build $(KFLAGS) -ldflags "$(LDFLAGS)" -o $(UP_OUT) ./cmd/wasmsched-up

## build-scheduler: bin/kube-scheduler alone (SCHEDULER_OUT overrides the path;
## SCHEDULER_FLAGS and SCHEDULER_LDFLAGS add build and link flags: the
## end-to-end tests pass -race; SCHEDULER_ARCH cross-builds for linux/<arch>).
## Static, CGO off, as the image needs it, except with -race (which needs cgo).
SCHEDULER_OUT     ?= $(BIN)/kube-scheduler
SCHEDULER_FLAGS   ?=
SCHEDULER_LDFLAGS ?=
SCHEDULER_ARCH    ?=
SCHEDULER_ENV     := CGO_ENABLED=$(if $(findstring -race,$(SCHEDULER_FLAGS)),1,0) $(if $(SCHEDULER_ARCH),GOOS=linux GOARCH=$(SCHEDULER_ARCH))
build-scheduler:
	$(SCHEDULER_ENV) $(KGO) build $(KFLAGS) $(SCHEDULER_FLAGS) -ldflags "$(LDFLAGS) $(SCHEDULER_LDFLAGS)" -o $(SCHEDULER_OUT) ./cmd/kube-scheduler

## image: the scheduler's OCI image for Kubernetes K8S, linux/amd64 and
## linux/arm64 (IMAGE_ARCHS) in one index tagged v<version>-k8s<minor>,
## built without a container daemon (internal/image): an OCI layout in
## bin/image/oci and an oci-archive tarball beside it (docker load, podman
## load, skopeo copy). Reproducible: SOURCE_DATE_EPOCH is the commit's time.
## The binaries are bin/<minor>/linux-<arch>/kube-scheduler, stripped (-s -w).
## image-all: every minor, every architecture, into the same layout.
## IMAGE_EXAMPLES=1 adds each minor's -examples variant (make examples' modules
## under /etc/wasmsched/policies).
VERSION           ?= v$(shell sed -n 's/^appVersion: *"\(.*\)"/\1/p' charts/wasmsched/Chart.yaml)
IMAGE_ARCHS       ?= amd64 arm64
IMAGE_DIR         ?= $(BIN)/image
IMAGE_EXAMPLES    ?=
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
export SOURCE_DATE_EPOCH
image_spec         = -image $(1):$(subst $(eval) ,$(comma),$(foreach a,$(2),$(a)=$(BIN)/$(1)/linux-$(a)/kube-scheduler))
comma             := ,
IMAGE_BUILD        = $(GO) run ./internal/image/imagebuild -out $(IMAGE_DIR) -version $(VERSION) \
                     -revision "$$(git rev-parse HEAD 2>/dev/null)" $(if $(IMAGE_EXAMPLES),-examples $(BIN)/policies)
image: $(if $(IMAGE_EXAMPLES),examples)
	@for a in $(IMAGE_ARCHS); do \
	  echo "make build-scheduler K8S=$(K8S) SCHEDULER_ARCH=$$a SCHEDULER_OUT=$(BIN)/$(K8S)/linux-$$a/kube-scheduler"; \
	  $(MAKE) --no-print-directory build-scheduler SCHEDULER_ARCH=$$a SCHEDULER_LDFLAGS="-s -w" SCHEDULER_OUT=$(BIN)/$(K8S)/linux-$$a/kube-scheduler || exit 1; done
	$(IMAGE_BUILD) $(call image_spec,$(K8S),$(IMAGE_ARCHS))

image-all: $(if $(IMAGE_EXAMPLES),examples)
	@for m in $(K8S_MINORS); do for a in $(IMAGE_ARCHS); do \
	  echo "make build-scheduler K8S=$$m SCHEDULER_ARCH=$$a SCHEDULER_LDFLAGS='-s -w' SCHEDULER_OUT=$(BIN)/$$m/linux-$$a/kube-scheduler"; \
	  $(MAKE) --no-print-directory build-scheduler K8S=$$m SCHEDULER_ARCH=$$a SCHEDULER_LDFLAGS="-s -w" SCHEDULER_OUT=$(BIN)/$$m/linux-$$a/kube-scheduler || exit 1; done; done
	$(IMAGE_BUILD) $(foreach m,$(K8S_MINORS),$(call image_spec,$(m),$(IMAGE_ARCHS)))

## image-ci: what CI builds: both architectures of the default minor, amd64
## of the others (CI has built bin/<minor>/kube-scheduler for amd64: linked
## again here into linux-amd64/, from the build cache). Every build but the
## default minor's amd64 one (which shares the tests' compile, and which the
## image tests run) takes CI_PROVE_GOFLAGS, as .ci/run's builds of the other
## minors do. make image and make image-all never do.
##
## ci-goflags: the GOFLAGS .ci/run exports to every go command of a CI run
## (CI_GOFLAGS): no DWARF compiled (the tests link with -w, which dropped it
## anyway), and no inlining but in the standard library, this module,
## wazero and protobuf (the code the tests run hot; the Kubernetes trees and
## other dependencies mostly only compile). ci-prove-goflags: the GOFLAGS of
## the builds CI only proves (CI_PROVE_GOFLAGS: nothing inlined, no DWARF).
## RATIONALE: "Why CI compiles without DWARF, and what it only proves without
## inlining".
CI_GOFLAGS       := "-gcflags=all=-l -dwarf=false" -gcflags=std=-dwarf=false \
                    "-gcflags=github.com/wasmsched/wasmsched/...=-dwarf=false" \
                    "-gcflags=github.com/tetratelabs/wazero/...=-dwarf=false" \
                    "-gcflags=google.golang.org/protobuf/...=-dwarf=false"
CI_PROVE_GOFLAGS := "-gcflags=all=-l -dwarf=false"
ci-goflags:
	@echo '$(CI_GOFLAGS)'
ci-prove-goflags:
	@echo '$(CI_PROVE_GOFLAGS)'
image-ci:
	@set -e; for m in $(K8S_MINORS); do \
	  archs=amd64; [ $$m = $(K8S_DEFAULT) ] && archs="amd64 arm64"; for a in $$archs; do \
	  g='$(CI_PROVE_GOFLAGS)'; [ $$m = $(K8S_DEFAULT) ] && [ $$a = amd64 ] && g="$$GOFLAGS"; \
	  echo "GOFLAGS='$$g' make build-scheduler K8S=$$m SCHEDULER_ARCH=$$a SCHEDULER_LDFLAGS='-s -w' SCHEDULER_OUT=$(BIN)/$$m/linux-$$a/kube-scheduler"; \
	  GOFLAGS="$$g" $(MAKE) --no-print-directory build-scheduler K8S=$$m SCHEDULER_ARCH=$$a SCHEDULER_LDFLAGS="-s -w" SCHEDULER_OUT=$(BIN)/$$m/linux-$$a/kube-scheduler; done; done
	$(IMAGE_BUILD) $(call image_spec,$(K8S_DEFAULT),amd64 arm64) $(foreach m,$(filter-out $(K8S_DEFAULT),$(K8S_MINORS)),$(call image_spec,$(m),amd64))

## dist: the policy author's CLI as release archives in bin/dist: wasmsched
## for linux and darwin on amd64 and arm64 and windows/amd64, static (CGO
## off), stripped and trimmed, the version from the chart's appVersion
## (VERSION overrides); a tar.gz (zip for Windows) each, with the kubectl
## plugin name kubectl-wasmsched, SHA256SUMS and a krew manifest
## (internal/dist). Reproducible (SOURCE_DATE_EPOCH).
DIST_DIR       ?= $(BIN)/dist
DIST_PLATFORMS := linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64
dist:
	@rm -rf $(DIST_DIR) && mkdir -p $(DIST_DIR)
	@set -e; for p in $(DIST_PLATFORMS); do os=$${p%/*}; arch=$${p#*/}; exe=wasmsched; [ $$os = windows ] && exe=wasmsched.exe; \
	  echo "GOOS=$$os GOARCH=$$arch go build -trimpath -o $(DIST_DIR)/build/$$os-$$arch/$$exe ./cmd/wasmsched"; \
	  CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(KGO) build $(KFLAGS) -trimpath -ldflags "-s -w $(LDFLAGS) -X main.Version=$(VERSION)" \
	    -o $(DIST_DIR)/build/$$os-$$arch/$$exe ./cmd/wasmsched; done
	$(GO) run ./internal/dist/distgen -version $(VERSION) -bin $(DIST_DIR)/build -out $(DIST_DIR) -extra README.md

## chart: the Helm chart packaged as bin/wasmsched-<version>.tgz (helm
## package's layout, through Helm's Go library: internal/chart/chartpack)
chart:
	$(GO) run ./internal/chart/chartpack $(BIN)

## run: embedded control plane + scheduler with the example policies, demo pods placed
run: examples build-up
	$(BIN)/wasmsched-up --demo --policies $(BIN)/policies

## examples: every examples/<name> to bin/policies/<name>.wasm
examples: $(addprefix $(BIN)/policies/,$(addsuffix .wasm,$(EXAMPLES)))

$(BIN)/policies/%.wasm: FORCE
	@mkdir -p $(BIN)/policies
	$(GUEST_ENV) $(GO) build $(GUEST_FLAGS) -o $@ ./examples/$*

FORCE:

## test-scenarios: every example's scenarios (examples/*/scenarios) run by
## bin/wasmsched test on the modules `make examples` writes (make test runs
## them too, on modules the test builds)
test-scenarios: build-cli examples
	$(BIN)/wasmsched test $(wildcard examples/*/scenarios)

## tinygo: the TinyGo toolchain in .bin/tinygo (Debian's LLVM 19 through
## apt-get when root, TinyGo built from tools/tinygo/go.mod); quick when present
TINYGO       := $(TOOLS)/tinygo/bin/tinygo
# The flags of every TinyGo build; internal/testwasm's TinyGoFlags must match.
# The target sets -scheduler=none (asyncify costs about 9x per call).
TINYGO_FLAGS := -target=$(CURDIR)/tools/tinygo/wasip1.json -buildmode=c-shared -no-debug
tinygo:
	@tools/tinygo/install.sh $(TOOLS)/tinygo

## chromium: Debian's Chromium, which the browser test of `wasmsched ui`
## drives headless (apt-get, as root; the test installs it itself when root)
chromium:
	@command -v chromium >/dev/null || (apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium)

## examples-tinygo: every examples/<name> to bin/policies/<name>.tinygo.wasm,
## TINYGO_JOBS at a time (a build is mostly one thread for a minute or so)
TINYGO_JOBS  ?= 2
examples-tinygo: tinygo
	@$(MAKE) --no-print-directory -j$(TINYGO_JOBS) $(addprefix $(BIN)/policies/,$(addsuffix .tinygo.wasm,$(EXAMPLES)))

$(BIN)/policies/%.tinygo.wasm: FORCE
	@mkdir -p $(BIN)/policies
	$(TINYGO) build $(TINYGO_FLAGS) -o $@ ./examples/$*

## test-tinygo: the tests that run TinyGo builds (examples' wasm-level tests,
## which compare both builds, the end-to-end TinyGo scenarios, a project
## `wasmsched new` scaffolds built by its own Makefile, and every
## example's scenario files), on the modules `make examples-tinygo` wrote; a
## missing toolchain fails them. tinygo-tests: the same tests on the
## modules bin/policies holds already (CI builds them in an earlier step).
test-tinygo: examples-tinygo
	@$(MAKE) --no-print-directory tinygo-tests

tinygo-tests: tinygo build-cli
	@# Its parts side by side, each one's output kept together: they are
	@# mostly single-threaded TinyGo builds (cmd/wasmsched's) or waits on a
	@# control plane.
	@$(MAKE) --no-print-directory -j4 --output-sync=target $(TINYGO_TESTS)

TINYGO_TESTS := tinygo-examples tinygo-e2e tinygo-cli tinygo-scenarios
.PHONY: $(TINYGO_TESTS)
tinygo-examples:
	WASMSCHED_REQUIRE_TINYGO=1 WASMSCHED_TINYGO_MODULES=$(BIN)/policies \
	  $(GO) test $(TESTFLAGS) -count=1 -timeout $(TEST_TIMEOUT) -skip '^TestREADME$$' ./examples/...
tinygo-e2e:
	WASMSCHED_REQUIRE_TINYGO=1 WASMSCHED_TINYGO_MODULES=$(BIN)/policies \
	  $(GO) test $(TESTFLAGS) -count=1 -timeout $(TEST_TIMEOUT) -run '^TestExample.*TinyGo$$' ./test/e2e/
tinygo-cli:
	WASMSCHED_REQUIRE_TINYGO=1 $(GO) test $(TESTFLAGS) -count=1 -timeout $(TEST_TIMEOUT) -run '^(TestEvalStackOverflow|TestNewProjectTinyGo|TestGuideStartTinyGo)$$' ./cmd/wasmsched/
tinygo-scenarios:
	@# Every example's scenarios on its TinyGo build, and on the TinyGo
	@# builds of the other examples they name (topology's run with gpu's).
	@set -e; for e in $(EXAMPLES); do \
	  args=""; for p in $$( (echo $$e; grep -ohE 'bin/policies/[a-z0-9-]+\.wasm' examples/$$e/scenarios/*.yaml | sed 's|bin/policies/||; s|\.wasm$$||') | sort -u); do \
	    args="$$args --policy $$p=$(BIN)/policies/$$p.tinygo.wasm"; done; \
	  echo "$(BIN)/wasmsched test$$args examples/$$e/scenarios"; \
	  $(BIN)/wasmsched test$$args examples/$$e/scenarios; \
	done

## protoc: make sure Debian's protoc and its well-known types are installed
protoc:
	@command -v protoc >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "installing protobuf-compiler with apt-get"; \
	    (apt-get install -y -q protobuf-compiler libprotobuf-dev >/dev/null 2>&1 || \
	     (apt-get update -q >/dev/null && apt-get install -y -q protobuf-compiler libprotobuf-dev >/dev/null)); \
	  else echo "protoc is missing: install protobuf-compiler (Debian) as root" >&2; exit 1; fi; }

## generate: regenerate abi/v1 from policy.proto, host/lifecycle's
## zz_generated.deepcopy.go from the plugin's argument types (+k8s:deepcopy-gen
## tags in args.go), the chart's copy of the CRD and manifests/ from the chart
## (internal/chart/chartgen); byte for byte reproducible
generate: generate-abi generate-deepcopy
	$(MAKE) --no-print-directory generate-manifests

generate-abi: protoc
	GOBIN=$(TOOLS) $(GO) install $(PLUGIN_GEN)
	cd abi/v1 && protoc --plugin=protoc-gen-go-plugin=$(TOOLS)/protoc-gen-go-plugin \
	  --go-plugin_out=. --go-plugin_opt=paths=source_relative policy.proto
	@# wasmsched uses only the message code; the generated transport (host loader,
	@# guest exports, options) is replaced by host/engine and guest (RATIONALE.md).
	rm -f abi/v1/policy_host.pb.go abi/v1/policy_plugin.pb.go abi/v1/policy_options.pb.go

generate-deepcopy:
	$(GO) run $(DEEPCOPY_GEN) --output-file zz_generated.deepcopy.go ./host/lifecycle ./host/api/v1alpha1
	cp host/api/v1alpha1/schedulingpolicy.crd.yaml charts/wasmsched/files/schedulingpolicy.crd.yaml

## generate-manifests: manifests/ rendered from charts/wasmsched (one file per
## template) for the default minor
generate-manifests:
	$(GO) run ./internal/chart/chartgen $(K8S_DEFAULT)

## check-generate: fail if the committed generated code differs from a fresh
## generation (or a generated file is not committed)
GENERATED := abi/v1/ host/lifecycle/zz_generated.deepcopy.go host/api/v1alpha1/zz_generated.deepcopy.go charts/wasmsched/files/ manifests/
check-generate: generate
	@git diff --exit-code -- $(GENERATED) && test -z "$$(git ls-files --others --exclude-standard -- $(GENERATED))" || { \
	  git ls-files --others --exclude-standard -- $(GENERATED); echo "generated code is stale or new: run make generate and commit" >&2; exit 1; }

vet:
	$(GO) vet $(PKGS)
	$(GUEST_ENV) $(GO) vet ./guest/... ./examples/...
	@test -z "$$(gofmt -l $$(git ls-files '*.go' | grep -v '\.pb\.go$$'))" || { gofmt -l $$(git ls-files '*.go' | grep -v '\.pb\.go$$'); echo "gofmt needed" >&2; exit 1; }

## test: every test (guests are built by the tests themselves); among them,
## internal/tracked's refuses build outputs and files over 1 MiB in git ls-files.
## On the default minor only: make smoke K8S=... tests another.
test: default-minor vet
	@# test/e2e's tests mostly wait on control planes and schedulers (a
	@# process of them keeps about a quarter of 2 cores busy): E2E_PROCS-1
	@# more processes of them run beside go test's, each test in the first
	@# process to claim it (testwasm.EnvClaims, test/e2e's TestMain).
	@# Every test process of this run shares one directory of compiled
	@# code (SHARED_COMPILED, testwasm.Main): each module compiles once,
	@# not once per process (a Go-built guest: about 20 s under -race). The
	@# host packages that run guests (RACE_PKGS) run under the race
	@# detector, while those processes still run, without their tests that
	@# start a control plane (RACE_TAGS): an API server is too costly to
	@# build with -race on 2 cores. Those tests (ALSO_PLAIN, with the
	@# sequential tests that skip themselves under -race; host/source's) run
	@# without it. The race set's guests compile in a plain build of
	@# host/engine's tests (COMPILER_EXE), not race-instrumented.
	@# Each go test's output is kept as well (logs/): when one fails, the
	@# recipe ends with the failed tests and their messages, which the
	@# packages' server logs would otherwise push out of a log's tail.
	@claims=$$(mktemp -d) && logs=$$(mktemp -d) && export $(SHARED_COMPILED)=$$(mktemp -d) && pids= && rc=0; \
	for i in $$(seq 2 $(E2E_PROCS)); do \
	  echo "$(TEST_CLAIMS)=$$claims $(GO) test $(TESTFLAGS) -count=1 -timeout $(TEST_TIMEOUT) ./test/e2e/ &"; \
	  ( { $(TEST_CLAIMS)=$$claims $(GO) test $(TESTFLAGS) -count=1 -timeout $(TEST_TIMEOUT) ./test/e2e/ || touch $$logs/failed; } 2>&1 | tee $$logs/e2e-$$i.log ) & pids="$$pids $$!"; \
	done; \
	echo "$(TEST_CLAIMS)=$$claims $(GO) test $(TESTFLAGS) -count=1 -timeout $(TEST_TIMEOUT) [every package but RACE_PKGS] $(ALSO_PLAIN)"; \
	{ $(TEST_CLAIMS)=$$claims $(GO) test $(TESTFLAGS) -count=1 -timeout $(TEST_TIMEOUT) $(PLAIN_PKGS) $(ALSO_PLAIN) || touch $$logs/failed; } 2>&1 | tee $$logs/plain.log; \
	echo "$(GO) test $(TESTFLAGS) -c -o $$logs/compiler ./host/engine"; \
	{ $(GO) test $(TESTFLAGS) -c -o $$logs/compiler ./host/engine || touch $$logs/failed; } 2>&1 | tee $$logs/compiler.log; \
	echo "$(COMPILER_EXE)=$$logs/compiler $(RACE_ENV) $(GO) test $(TESTFLAGS) -count=1 -race -tags $(RACE_TAGS) -timeout $(TEST_TIMEOUT) $(RACE_PKGS)"; \
	{ $(COMPILER_EXE)=$$logs/compiler $(RACE_ENV) $(GO) test $(TESTFLAGS) -count=1 -race -tags $(RACE_TAGS) -timeout $(TEST_TIMEOUT) $(RACE_PKGS) || touch $$logs/failed; } 2>&1 | tee $$logs/race.log; \
	for p in $$pids; do wait $$p || rc=1; done; \
	if [ -e $$logs/failed ]; then rc=1; $(SUMMARISE_FAILURES) $$logs/*.log; fi; \
	rm -rf $$claims $$logs $$$(SHARED_COMPILED); exit $$rc
	@# host/clusterctx's stores and usage are fed by informers while cycles
	@# read them; the tag leaves out its control-plane test (run above).
	$(RACE_ENV) $(GO) test $(TESTFLAGS) -count=1 -race -tags $(RACE_TAGS) ./host/clusterctx
	$(MAKE) --no-print-directory fuzz

## test-e2e-race: test/e2e with the kube-scheduler its tests start built
## with the race detector (WASMSCHED_E2E_RACE=1): a data race in a scheduler
## process fails the test. make test builds that binary plain.
test-e2e-race:
	WASMSCHED_E2E_RACE=1 $(GO) test $(TESTFLAGS) -count=1 -timeout 60m ./test/e2e/

## minors: the Kubernetes minors this tree builds for, the default first
minors:
	@echo $(K8S_MINORS)

default-minor:
	@test "$(K8S)" = "$(K8S_DEFAULT)" || { echo "make $(MAKECMDGOALS) runs on the default minor, $(K8S_DEFAULT); make smoke K8S=$(K8S) tests $(K8S)" >&2; exit 1; }

## smoke: the smoke suite (test/e2e's TestSmoke*) on Kubernetes K8S, with
## the example modules of bin/policies (make examples examples-tinygo writes
## them; every build loads the same files): first with its in-process
## scheduler on its in-process control plane, then with each
## bin/<minor>/kube-scheduler as a process against such a control plane
## (TestSmokeBuilds: the version-skew check, and the suite with every build
## the policy allows or, outside it, an older one with
## WASMSCHED_SKEW_CHECK=warn). Builds bin/$(K8S)/kube-scheduler first, and
## ends with make run's demo on bin/$(K8S)/wasmsched-up (--demo --exit:
## every pod as expected), its kubeconfig and logs in bin/$(K8S)/up. CI runs
## it on the default minor, with every minor's build.
smoke:
	@for m in $(addprefix $(BIN)/policies/,$(addsuffix .wasm,$(EXAMPLES)) gpu.tinygo.wasm); do \
	  test -f $$m || { echo "$$m is missing: make examples examples-tinygo writes the modules make smoke loads" >&2; exit 1; }; done
	$(MAKE) --no-print-directory build-scheduler SCHEDULER_OUT=$(BIN)/$(K8S)/kube-scheduler
	$(BIN)/$(K8S)/kube-scheduler --version
	WASMSCHED_MODULES=$(BIN)/policies WASMSCHED_TINYGO_MODULES=$(BIN)/policies \
	  WASMSCHED_SMOKE_BUILDS="$$(ls $(BIN)/1.*/kube-scheduler)" \
	  $(KGO) test $(TESTFLAGS) $(KFLAGS) -count=1 -timeout $(TEST_TIMEOUT) -run '^TestSmoke' -v ./test/e2e/
	$(MAKE) --no-print-directory build-up UP_OUT=$(BIN)/$(K8S)/wasmsched-up
	$(BIN)/$(K8S)/wasmsched-up --demo --exit --policies $(BIN)/policies --dir $(BIN)/$(K8S)/up

## k8s-mods: regenerate k8s/<minor>.mod and .sum from go.mod (after any
## change to go.mod's requirements); K8S_MODS=MINOR=VERSION (1.36=v1.36.4)
## moves or adds a minor. check-k8s-mods: fail if they differ from a fresh generation.
K8S_MODS ?=
k8s-mods:
	$(GO) run ./internal/kubemod/kubemodgen $(K8S_MODS)

check-k8s-mods: k8s-mods
	@git diff --exit-code -- k8s/ && test -z "$$(git ls-files --others --exclude-standard -- k8s/)" || { \
	  echo "k8s/ is stale: run make k8s-mods and commit" >&2; exit 1; }

## fuzz: every fuzz target for a fixed number of inputs each (about 5 s
## here; part of `make test`), or for FUZZTIME each when it is set.
## fuzz-long: 10m each (FUZZTIME=... overrides). A crasher is written to the
## package's testdata/fuzz/<Target>/: fix the bug and commit it there as a
## regression seed, which every `go test` then runs.
## Counts, not durations, by default: Go 1.26's fuzzing coordinator can
## report a spurious "context deadline exceeded" failure when a -fuzztime
## duration runs out while a worker is busy (golang/go#75804, fixed in Go
## 1.27); a count has no deadline to race.
FUZZTIME     ?=
FUZZ_TARGETS := ./guest:FuzzDispatch:20000x ./guest:FuzzIndexNode:30000x ./guest:FuzzValue:50000x ./guest/guesttest:FuzzParseQuantity:50000x ./host/engine:FuzzGuestAnswers:30000x ./host/interrupt:FuzzInstrument:3000x \
                ./host/source/cmformat:FuzzAssemble:30x ./host/source/cmformat:FuzzPackAssemble:200x
fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
	  pkg=$${t%%:*}; rest=$${t#*:}; name=$${rest%%:*}; budget=$(or $(FUZZTIME),$${rest#*:}); \
	  echo "fuzz $$name in $$pkg for $$budget"; \
	  $(GO) test $(TESTFLAGS) -run '^$$' -fuzz "^$$name\$$" -fuzztime $$budget $$pkg; \
	done

fuzz-long:
	$(MAKE) --no-print-directory fuzz FUZZTIME=$(if $(filter command line,$(origin FUZZTIME)),$(FUZZTIME),10m)

## bench: scheduler_perf, 500 nodes, every profile (default scheduler, native
## gpu plugin, gpu policy through WasmPolicy built with Go and, when `make
## tinygo` installed it, TinyGo), two rounds, the GPU mix, Churn (pending
## GPU pods, batching and requeues under churn) and Gang (gangs in NVLink
## cliques, Kubernetes 1.37: default is upstream's built-in placement, the
## others the topology rules); one line per profile, the batching, requeue
## and gang placement lines and the ratios. Results and logs in bin/perf/quick.
## bench-full: the 5000-node workloads (gpu, basic, quota, churn, gang), one round (bin/perf/full),
## every profile, TinyGo included (a case labelled slow would be left out; none is).
## bench-huge: the GPU mix at 15 000 nodes (bin/perf/huge), every profile, one round; not in CI.
## ROUNDS overrides the rounds; PERF_FLAGS adds test binary flags
## (-test.cpuprofile=/abs/path, -measured-cpuprofile=/abs/path for the measured
## part only, -measured-trace=/abs/path its execution trace,
## -perf-scheduling-label-filter=full,gpu).
PERF_OUT   ?= $(BIN)/perf
PERF_FLAGS ?=
bench: $(TOOLS)/etcd
	$(MAKE) --no-print-directory perf PERF_SET=quick PERF_WORKLOADS="gpu churn gang" PERF_TIMEOUT=30m PERF_ROUNDS=$(or $(ROUNDS),2)

bench-full: $(TOOLS)/etcd
	$(MAKE) --no-print-directory perf PERF_SET=full PERF_FILTER=full,-slow PERF_WORKLOADS="gpu basic quota churn gang" PERF_TIMEOUT=60m PERF_ROUNDS=$(or $(ROUNDS),1)

bench-huge: $(TOOLS)/etcd
	$(MAKE) --no-print-directory perf PERF_SET=huge PERF_FILTER=huge PERF_WORKLOADS=gpu PERF_TIMEOUT=180m PERF_ROUNDS=$(or $(ROUNDS),1)

perf:
	@PATH="$(TOOLS):$$PATH" GO="$(GO)" WORKLOADS="$(or $(PERF_WORKLOADS),gpu basic)" test/perf/run.sh $(PERF_OUT)/$(PERF_SET) \
	  $(or $(PERF_FILTER),$(PERF_SET)) $(PERF_ROUNDS) $(PERF_TIMEOUT) $(PERF_FLAGS)

## etcd for scheduler_perf, built from the module's tool directive
$(TOOLS)/etcd: go.mod
	$(GO) build -o $@ go.etcd.io/etcd/server/v3

## bench-host: host micro-benchmarks
bench-host:
	$(GO) test $(TESTFLAGS) -run '^$$' -bench . -benchmem -benchtime=1x ./host/ >/dev/null
	$(GO) test $(TESTFLAGS) -run '^$$' -bench . -benchmem ./host/

## sdk-proxy: serve this checkout's SDK modules (abi, guest) at the versions
## go.mod requires from a module proxy in .bin/sdk (outside ./... and git),
## and print the shell exports that build a module outside the workspace
## against it (guest/ or abi/ alone, an author's module):
## eval "$$(make -s sdk-proxy)"; see guest/COMPATIBILITY.md
sdk-proxy:
	@$(GO) run ./internal/sdkmod/sdkproxy $(TOOLS)/sdk

## sdk-tidy: go mod tidy in abi/ and guest/ on their own, through sdk-proxy;
## after a change to abi/, this refreshes the hash of abi in guest/go.sum
## (the hash of the abi/ that will be tagged)
sdk-tidy:
	@# The SDK's module cache keeps the abi zip of an earlier run: drop it.
	@chmod -R u+w $(TOOLS)/sdk/modcache/github.com/wasmsched 2>/dev/null; \
	  rm -rf $(TOOLS)/sdk/modcache/cache/download/github.com/wasmsched $(TOOLS)/sdk/modcache/github.com/wasmsched
	@eval "$$($(GO) run ./internal/sdkmod/sdkproxy $(TOOLS)/sdk 2>/dev/null)" && \
	  (cd abi && $(GO) mod tidy) && \
	  sed -i '/^github.com\/wasmsched\/wasmsched\/abi /d' guest/go.sum && \
	  (cd guest && $(GO) mod tidy)

clean:
	rm -rf $(BIN) $(TOOLS)
