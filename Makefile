# presenced — see README.md.
GO ?= go

.PHONY: test deps check build run bench bench-team bench-resilience bench-lifecycle image

# test: what CI runs. gofmt and go vet must be clean, and every test runs with
# the race detector. The single-node integration suite runs a second time
# against the Redis store (a redis-server per test, started by the tests),
# and a third time against the embedded form: presence attached to a mochi
# server of the test's own, behind mochi's own listeners.
# ONCE lists the tests that do not depend on the store or the form, which
# the second and third runs skip: the failover and interest tests
# (TestFailover, TestInterest), which start a Redis Cluster of their own
# whatever the store; and the tests of what a newcomer runs, each against
# the binary with its in-memory store whatever INTEGRATION_STORE says: the
# examples (TestExamples: examples/js, examples/python, examples/browser)
# and the documentation's recipes (TestDocs).
# The third run also skips
# the tests that run processes of their own (the binary, several nodes, the
# example program) or measure Redis: they do not depend on the form; and
# those of what only the binary configures: its authentication and TLS
# (TestAuth, TestTLS), mochi's capabilities (TestCaps: packet size,
# connections, session expiry) and the admin port's token in front of the
# profiles (TestPprofToken), which an embedding program sets itself.
# The deployment tests (TestImage, TestCompose, TestSystemd: the image, the
# compose file and the systemd unit) are in ONCE too, and so are the
# monitoring tests (TestMonitoring: deploy/prometheus and deploy/grafana
# against prometheus scraping the binary, with the memory store and with a
# redis-server of their own; TestMonitoringReadiness: admin.unready_after
# with a redis-server stopped and started), which start the binary and
# their own Redis whatever INTEGRATION_STORE says; and the console's
# browser test of the binary (TestConsoleBinary: one binary in memory, two on
# a Redis of its own); TestConsoleInProcess runs in every pass.
# -timeout 40m: the integration package's first run takes 6-7 minutes on an
# idle 2-core machine and more on a busy one; go test's default of 10
# minutes was reached once on a loaded machine (issue 19).
ONCE = TestFailover|TestInterest|TestExamples|TestDocs|TestImage|TestCompose|TestSystemd|TestMonitoring|TestListMultiNode|TestConsoleBinary|TestLifecycleExampleRule|TestLifecycleMultiNode|TestLifecycleChaos|TestPrivacyMultiNode|TestCanarySLODrill
NOT_EMBEDDED = $(ONCE)|TestNotifyFlapping|TestBinary|TestMultiNode|TestNodeRestart|TestRedisOutage|TestClockSkew|TestCluster|TestHeartbeatCost|TestEmbedExample|TestAuth|TestTLS|TestCaps|TestGroupsMultiNode|TestGroupsLeader|TestGraceMultiNode|TestGraceDrainThreeNodes|TestPprofToken|TestServiceAccounts|TestActions|TestLifecycleOutputs|TestPrivacyMatrix|TestPrivacySetRefused
test: deps check
	$(GO) test -race -count=1 -timeout 40m ./...
	INTEGRATION_STORE=redis $(GO) test -race -count=1 -timeout 40m -skip '$(ONCE)' ./integration/
	INTEGRATION_FORM=embedded $(GO) test -race -count=1 -timeout 40m -skip '$(NOT_EMBEDDED)' ./integration/

# deps: the programs the tests and the benchmark run. The Redis store's tests
# start their own redis-server processes (integration/redistest), so Debian's
# redis-server and redis-tools are installed when missing (as root), and the
# service the package starts is stopped and disabled again: nothing may be left
# on port 6379. The benchmark compares against Debian's mosquitto, installed
# the same way; its package starts a daemon on port 1883, which would collide
# with `go run ./cmd/presenced`, so that service is stopped and disabled too.
# TestMQTTJSReconnectNeverOffline runs MQTT.js (integration/mqttjs) under
# Node.js: Debian's nodejs and npm are installed when missing (bookworm's
# Node 18 will do), and `npm ci` installs the pinned package-lock.json into
# integration/mqttjs/node_modules when it is missing or older than the lock.
# The examples' tests (TestExamples) run examples/js under node with MQTT.js
# (`npm ci` in examples/js, the same way), examples/python under Debian's
# /usr/bin/python3 with python3-paho-mqtt, and examples/browser in Debian's
# chromium (headless, driven with chromedp): each is installed when missing.
# The deployment tests build and run the image (Debian's podman, buildah,
# runc, and iptables for podman's port publishing), read the compose file
# (podman-compose) and verify the systemd unit (systemd-analyze); the image
# takes its CA roots from ca-certificates. The monitoring tests run Debian's
# prometheus and promtool (package prometheus), installed when missing; its
# package starts a Prometheus service on port 9090, which is stopped and
# disabled as redis-server's is. make test sets
# INTEGRATION_REQUIRE_IMAGE=1: those tests fail instead of skipping when a
# tool is missing or the run is not root.
export INTEGRATION_REQUIRE_IMAGE = 1
deps:
	@if ! command -v redis-server >/dev/null 2>&1 || ! command -v redis-cli >/dev/null 2>&1; then \
		echo "deps: installing redis-server and redis-tools"; \
		apt-get update && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends redis-server redis-tools || exit 1; \
		service redis-server stop >/dev/null 2>&1 || true; \
		systemctl disable --now redis-server 2>/dev/null || true; \
		pids="$$(ps -eo pid=,args= | awk '$$2 ~ /(^|\/)redis-server$$/ && $$3 ~ /:6379$$/ {print $$1}')"; \
		if [ -n "$$pids" ]; then echo "deps: killing leftover redis-server on 6379: $$pids"; kill -9 $$pids || true; fi; \
	fi
	@if ! command -v mosquitto >/dev/null 2>&1 && [ ! -x /usr/sbin/mosquitto ]; then \
		echo "deps: installing mosquitto"; \
		apt-get update && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends mosquitto || exit 1; \
		service mosquitto stop >/dev/null 2>&1 || true; \
		systemctl disable --now mosquitto 2>/dev/null || true; \
		pids="$$(ss -Hltnp 'sport = :1883' 2>/dev/null | grep -o '"mosquitto",pid=[0-9]*' | sed 's/.*pid=//' | sort -u)"; \
		if [ -n "$$pids" ]; then echo "deps: killing leftover mosquitto on 1883: $$pids"; kill -9 $$pids || true; fi; \
	fi
	@if ! command -v mosquitto_sub >/dev/null 2>&1 || ! command -v mosquitto_pub >/dev/null 2>&1; then \
		echo "deps: installing mosquitto-clients (TestDocsRecipes runs the docs' mosquitto_sub and mosquitto_pub)"; \
		apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends mosquitto-clients >/dev/null || exit 1; \
	fi
	@pkgs=""; command -v node >/dev/null 2>&1 || pkgs="nodejs"; command -v npm >/dev/null 2>&1 || pkgs="$$pkgs npm"; \
	if [ -n "$$pkgs" ]; then \
		echo "deps: installing$$(echo " $$pkgs" | tr -s ' ')"; \
		apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$pkgs >/dev/null || exit 1; \
	fi
	@cd integration/mqttjs && \
	if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ] || [ package.json -nt node_modules/.package-lock.json ]; then \
		echo "deps: npm ci in integration/mqttjs (MQTT.js)"; \
		npm ci --ignore-scripts --no-audit --no-fund --loglevel=error >/dev/null || exit 1; \
	fi
	@cd examples/js && \
	if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ] || [ package.json -nt node_modules/.package-lock.json ]; then \
		echo "deps: npm ci in examples/js (MQTT.js for the examples)"; \
		npm ci --ignore-scripts --no-audit --no-fund --loglevel=error >/dev/null || exit 1; \
	fi
	@if ! /usr/bin/python3 -c 'import paho.mqtt.client' >/dev/null 2>&1; then \
		echo "deps: installing python3-paho-mqtt (examples/python)"; \
		apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3 python3-paho-mqtt >/dev/null || exit 1; \
	fi
	@if ! command -v chromium >/dev/null 2>&1; then \
		echo "deps: installing chromium (examples/browser)"; \
		apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null || exit 1; \
	fi
	@pkgs=""; for t in podman:podman buildah:buildah runc:runc iptables:iptables podman-compose:podman-compose systemd-analyze:systemd; do \
		command -v "$${t%%:*}" >/dev/null 2>&1 || [ -x "/usr/sbin/$${t%%:*}" ] || pkgs="$$pkgs $${t#*:}"; \
	done; [ -f /etc/ssl/certs/ca-certificates.crt ] || pkgs="$$pkgs ca-certificates"; \
	if [ -n "$$pkgs" ]; then \
		echo "deps: installing$$pkgs (the image, compose and systemd tests)"; \
		apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$pkgs >/dev/null || exit 1; \
	fi
	@if ! command -v prometheus >/dev/null 2>&1 || ! command -v promtool >/dev/null 2>&1; then \
		echo "deps: installing prometheus (TestMonitoring: prometheus and promtool)"; \
		apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null || exit 1; \
		service prometheus stop >/dev/null 2>&1 || true; \
		systemctl disable --now prometheus 2>/dev/null || true; \
		pids="$$(ss -Hltnp 'sport = :9090' 2>/dev/null | grep -o '"prometheus",pid=[0-9]*' | sed 's/.*pid=//' | sort -u)"; \
		if [ -n "$$pids" ]; then echo "deps: killing leftover prometheus on 9090: $$pids"; kill -9 $$pids || true; fi; \
	fi
	@command -v redis-server >/dev/null && command -v redis-cli >/dev/null
	@command -v mosquitto >/dev/null || [ -x /usr/sbin/mosquitto ]
	@command -v node >/dev/null && [ -f integration/mqttjs/node_modules/mqtt/package.json ]
	@[ -f examples/js/node_modules/mqtt/dist/mqtt.min.js ] && /usr/bin/python3 -c 'import paho.mqtt.client' && command -v chromium >/dev/null
	@command -v prometheus >/dev/null && command -v promtool >/dev/null

check:
	@out="$$(gofmt -l .)"; if [ -n "$$out" ]; then echo "gofmt -l reports:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

# bench-go: the regression guard of docs/performance.md, the first step of
# make bench: the Go benchmarks of the hot paths (the hook, the tracker, the
# publisher and its pacer, the pure core, the memory store), 6 runs each,
# into bench/results/gobench/current.txt; then benchstat's comparison with
# the last release's figures (GOBENCH_RELEASE: bench/results/gobench/
# $(GOBENCH_RELEASE).txt) and the docs' table of both, current.md (made by
# bench/gobench). benchstat is run at a pinned version from the module proxy
# (go run pkg@version: nothing added to go.mod). -benchtime 500ms keeps the
# whole under 2 minutes on 2 cores (84 s); the 6 runs give benchstat its
# confidence intervals. The store's Redis benchmarks need a redis-server and
# are left out (-skip Redis): docs/performance.md, "The Redis scripts".
GOBENCH_PKGS = ./hooks/ ./tracker/ ./publisher/ ./presence/ ./store/
GOBENCH_RELEASE ?= 0.9.0
GOBENCH_DIR = bench/results/gobench
BENCHSTAT = $(GO) run golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da
.PHONY: bench-go
bench-go:
	@mkdir -p $(GOBENCH_DIR)
	$(GO) test -run '^$$' -bench . -skip Redis -benchtime 500ms -benchmem -count 6 $(GOBENCH_PKGS) > $(GOBENCH_DIR)/current.txt.tmp || { cat $(GOBENCH_DIR)/current.txt.tmp; rm -f $(GOBENCH_DIR)/current.txt.tmp; exit 1; }
	@mv $(GOBENCH_DIR)/current.txt.tmp $(GOBENCH_DIR)/current.txt
	$(BENCHSTAT) $(GOBENCH_DIR)/$(GOBENCH_RELEASE).txt $(GOBENCH_DIR)/current.txt
	{ $(GO) run ./bench/gobench $(GOBENCH_DIR)/$(GOBENCH_RELEASE).txt $(GOBENCH_DIR)/current.txt && echo && \
	  $(GO) run ./bench/gobench -units ns/change,allocs/change $(GOBENCH_DIR)/$(GOBENCH_RELEASE).txt $(GOBENCH_DIR)/current.txt; } > $(GOBENCH_DIR)/current.md

# build: bin/presenced, static (CGO_ENABLED=0) and without this machine's
# paths (-trimpath), stamped with the version of the VERSION file and the git
# revision, its commit time (not the build's: two builds of one commit are the
# same bytes) and whether the working tree had changes; `bin/presenced
# --version` prints them. Without git (or outside a clone) the revision is
# "unknown". The build reads the VERSION file with make's $(file), so it needs
# nothing but go.
VERSION := $(strip $(file < VERSION))
REVISION := $(or $(shell git rev-parse HEAD 2>/dev/null),unknown)
REVISION_TIME := $(shell TZ=UTC0 git show -s --format=%cd --date=format-local:%Y-%m-%dT%H:%M:%SZ HEAD 2>/dev/null)
MODIFIED := $(if $(shell git status --porcelain --untracked-files=no 2>/dev/null),true,false)
LDFLAGS := -s -w -X main.version=$(VERSION) -X main.revision=$(REVISION) -X main.revisionTime=$(REVISION_TIME) -X main.modified=$(MODIFIED)
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/presenced ./cmd/presenced

run:
	$(GO) run ./cmd/presenced

# image: the container image localhost/presenced:$(VERSION), built with
# buildah from the Dockerfile's final stage around bin/presenced, pulling
# nothing (deploy/image/build.sh), into the local containers storage; also
# bin/presenced-$(VERSION).image.tar, a docker-archive (docker load, podman
# load). See docs/deployment.md.
# IMAGE and IMAGE_ARCHIVE name them (TestImage builds a tag of its own;
# IMAGE_ARCHIVE= writes no archive).
IMAGE ?= localhost/presenced:$(VERSION)
IMAGE_ARCHIVE ?= bin/presenced-$(VERSION).image.tar
image: build
	BINARY=bin/presenced IMAGE=$(IMAGE) VERSION=$(VERSION) REVISION=$(REVISION) CREATED=$(REVISION_TIME) \
		EPOCH=$(shell git show -s --format=%ct HEAD 2>/dev/null) ARCHIVE=$(IMAGE_ARCHIVE) \
		deploy/image/build.sh

# bench: the benchmark of bench/README.md, in parts that end in one
# report (bench/results/latest.json, latest.md, the plots latency.svg,
# memory.svg, ceiling.svg, detection.svg, and a timestamped copy of the JSON):
#   1. memory: 15,000 idle sessions per system, RSS read after an idle
#      minute; every system and round in a process of its own, at the same
#      time (--parallel), so the idle minute is spent once (about 2 min);
#      then the same with nobody watching the sessions' users on presenced
#      (--memory-watch none), against bare mochi: memory-nowatch.{json,md};
#   2. scale and interest (issue 17), side by side round by round: 3
#      presenced nodes on a 3-master Redis Cluster, 15,000 sessions each,
#      every node a firehose; then 4 nodes of 10,000 sessions whose
#      observers watch 5 % of the users each by name, and a firehose node;
#      3 runs (about 8 min; a run may take 400 s on a loaded machine);
#   3. join (issue 17): a node joining a cluster that holds 100,000 and
#      1,000,000 seeded users, against the empty cluster, 3 runs (about 5
#      min); JOIN_OLD=<presenced binary> joins an older build side by side
#      (the pre-interest build: git worktree add /tmp/old 53da37f);
#   4. the standard scenarios and the throughput ceiling, 3 rounds, systems
#      side by side in each round; parts 1 (all watched) and 2 join the
#      report (--include). Every figure is the median of the 3 rounds with
#      min–max. mochi-bare runs bare mochi's cycle in churn and ceiling
#      (presence off, its devices on the classic last-will pattern), so the
#      ceiling searches presenced-memory, presenced-redis, mochi-bare and
#      mosquitto-lastwill in each round, and the report gives presenced's
#      ceiling and CPU per change as ratios to mochi-bare's, round by round
#      (issue 23; bench/README.md "Ceilings as ratios").
# It takes about 30 minutes on 2 cores. It is not part of `make test`. The
# team scenario has a target of its own: make bench-team.
BENCH = bin/presence-bench --presenced bin/presenced --out-dir bench/results
bench: deps bench-go
	$(GO) build -buildvcs=auto -o bin/presenced ./cmd/presenced && $(GO) build -o bin/presence-bench ./cmd/presence-bench
	$(BENCH) --scenarios memory --parallel --repeat 3 --out-name memory
	$(BENCH) --systems presenced-memory,presenced-redis,mochi-bare --scenarios memory --memory-watch none --parallel --repeat 3 --out-name memory-nowatch
	$(BENCH) --systems presenced-redis --scenarios scale,interest --repeat 3 --run-timeout 400s --out-name scale
	$(BENCH) --systems presenced-redis --scenarios join --repeat 3 --out-name join $(if $(JOIN_OLD),--join-old $(JOIN_OLD))
	$(BENCH) --repeat 3 --scenarios steady,churn,storm,silent,fanout,flap,ceiling \
		--flap-duration 3s --fanout-interval 500ms --steady-ping-window 3s --ceiling-start 4000 --ceiling-step 2s \
		--include bench/results/memory.json,bench/results/scale.json

# bench-team: the team scenario (issue 9: a group topic against per-user
# topics), 3 rounds, into bench/results/team.{json,md}.
bench-team: deps
	$(GO) build -buildvcs=auto -o bin/presenced ./cmd/presenced && $(GO) build -o bin/presence-bench ./cmd/presence-bench
	$(BENCH) --scenarios team --repeat 3 --out-name team

# The resilience scenarios of issue 11 (crash, rolling restart, drop flaps,
# takeover battle), into bench/results/resilience.{json,md}; the standard
# outputs are left alone. PRESENCED_CONFIG_EXTRA is YAML merged into
# presenced's config (keys the binary knows only).
bench-resilience: deps
	$(GO) build -buildvcs=auto -o bin/presenced ./cmd/presenced && $(GO) build -o bin/presence-bench ./cmd/presence-bench
	bin/presence-bench --systems presenced-memory,presenced-redis,mosquitto-lastwill --scenarios crash,rolling,flap-drop,battle \
		--out-dir bench/results --out-name resilience --presenced bin/presenced \
		$(if $(PRESENCED_CONFIG_EXTRA),--presenced-config-extra '$(PRESENCED_CONFIG_EXTRA)')

# The lifecycle outputs at the churn ceiling (issue 21): no output, the AWS
# IoT output and the EMQX output, interleaved for 5 rounds, each with a tap
# counting the output's messages; into bench/results/lifecycle-*.{json,md}.
bench-lifecycle: deps
	$(GO) build -buildvcs=auto -o bin/presenced ./cmd/presenced && $(GO) build -o bin/presence-bench ./cmd/presence-bench
	for r in 1 2 3 4 5; do \
	  $(BENCH) --systems presenced-memory --scenarios ceiling --ceiling-start 4000 --ceiling-step 2s --out-name lifecycle-none-$$r && \
	  $(BENCH) --systems presenced-memory --scenarios ceiling --ceiling-start 4000 --ceiling-step 2s --out-name lifecycle-aws-$$r \
	    --presenced-config-extra 'lifecycle: {aws: {enabled: true}}' --ceiling-tap '$$aws/events/presence/#' && \
	  $(BENCH) --systems presenced-memory --scenarios ceiling --ceiling-start 4000 --ceiling-step 2s --out-name lifecycle-emqx-$$r \
	    --presenced-config-extra 'lifecycle: {emqx: {enabled: true}}' --ceiling-tap '$$SYS/brokers/#' || exit 1; \
	done
