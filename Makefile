GO      ?= go
BIN     ?= bin/bridge
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)

.PHONY: build test deploy-test image bench bench-quick bench-go run lint fuzz soak clean

build:
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/bridge

# The default suite: every package under the race detector, end-to-end tests
# against the real binary included. Kept under ten minutes.
test:
	@command -v chromium >/dev/null || command -v chromium-browser >/dev/null || command -v google-chrome >/dev/null || \
		echo "make test: no Chromium on PATH (chromium, chromium-browser or google-chrome), so the console's browser test (test/e2e/console_test.go) is skipped; apt-get install -y chromium runs it"
	$(GO) vet ./...
	$(GO) test -race -count=1 -timeout 9m ./...

# The image and the Helm chart (deploy/, a Go module of its own so the
# product's go.mod carries no Kubernetes dependency): the image built twice
# (one digest), unpacked and run until /readyz answers; helm lint and helm
# template of the pinned helm, every object decoded strictly into the
# Kubernetes types, the container args parsed by bridge run's own parser.
# deploy/go.mod replaces the bridge's module with this checkout, so a module
# the bridge comes to require is added there as the tests need it (-mod=mod).
deploy-test:
	cd deploy && GOFLAGS='$(GOFLAGS) -mod=mod' $(GO) vet ./... && GOFLAGS='$(GOFLAGS) -mod=mod' $(GO) test -count=1 -timeout 20m ./...

# The OCI image as an archive (podman load, docker load, skopeo copy
# oci-archive:...), built without a daemon or a base image; the last line
# printed is its digest. The same commit gives the same digest.
IMAGE             ?= bin/bridge-image.tar
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
image:
	@mkdir -p $(dir $(IMAGE))
	@cd deploy && SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) $(GO) run ./cmd/image -module .. -version $(VERSION) -o $(abspath $(IMAGE))

# The scenario benchmarks of the real bridge, each beside the raw limit it
# sits on (test/bench); about 20 minutes with the cluster scenarios, bench-quick a tenth the size.
bench:
	$(GO) run ./test/bench

bench-quick:
	$(GO) run ./test/bench -quick

# The Go micro-benchmarks of every package.
bench-go:
	$(GO) test -run '^$$' -bench . -benchmem -count=1 ./...

# Built, then run in make's place: under `go run`, a Ctrl-C that stops
# the bridge cleanly still ends go run, and so make, with status 1.
run:
	$(GO) build -ldflags '$(LDFLAGS)' -o bin/bridge ./cmd/bridge && exec ./bin/bridge run

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

FUZZTIME ?= 30s
fuzz:
	@for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg 2>/dev/null | grep '^Fuzz'); do \
	    echo "== $$pkg $$f ($(FUZZTIME))"; \
	    $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	  done; \
	done

# Many more crash-and-restart rounds than the default suite runs, the
# drills of a cluster under churn 20 times each, then every end-to-end
# drill once; the bridge binary the drills run is built
# with the race detector (BRIDGE_E2E_RACE), and a race it reports fails
# the drill. The second run goes ahead when the first failed.
soak:
	status=0; \
	BRIDGE_SOAK=1 BRIDGE_E2E_RACE=1 $(GO) test -race -count=1 -timeout 60m -run 'TestCrashKillNineLosesNothing|TestStreamRecreatedUnderRunningBridge|TestClusterSurvivesLossOfNATSLeaders' -v ./test/e2e/ || status=1; \
	BRIDGE_E2E_RACE=1 $(GO) test -race -count=20 -timeout 45m -run 'TestClusterCreatesWhileSharesMove|TestClusterResumesAfterJournalLeaderKilled|TestTokenRevokedAfterANodeLoss|TestTokenRevokedAfterTheLossOfAWatchesNode' ./test/e2e/ || status=1; \
	BRIDGE_E2E_RACE=1 $(GO) test -race -count=1 -timeout 30m ./test/e2e/ || status=1; \
	exit $$status

clean:
	rm -rf bin
