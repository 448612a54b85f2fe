# The two commands: `make run` and `make test`. Without DATABASE_URL, both start a throwaway
# PostgreSQL cluster under target/ (scripts/devpg) and stop it afterwards.

CARGO ?= cargo
DEV_SECRET ?= whsec_dev_only_not_secret
export LOG_FORMAT ?= pretty

.PHONY: run serve test lint fmt check-deploy clean-db

## run: the whole story in about a minute: PostgreSQL, the Sume simulator, two daemon
## instances and an application submitting a few hundred jobs; ends with a report
## (`sume-dev demo`, the development tools' binary)
run:
	$(CARGO) build --release -p sume-dev
	@scripts/devpg destroy target/devpg-run >/dev/null 2>&1 || true
	@DEVPG_DIR=target/devpg-run RUST_LOG=$${RUST_LOG:-warn} scripts/with-devpg $${CARGO_TARGET_DIR:-target}/release/sume-dev demo

## serve: the daemon alone, in the foreground, with a development secret
serve:
	$(CARGO) build --release -p sume-inbox
	@DEVPG_DIR=target/devpg-serve scripts/with-devpg scripts/run-dev target/release/sume-inbox $(DEV_SECRET)

## test: every test, against a fresh throwaway PostgreSQL (or DATABASE_URL); first, when openssl
## is installed, the signature vectors of fixtures/sume/vectors are recomputed with it, and what
## the suite drives from outside is built or installed once (the previous release's binary,
## Chromium, the OpenAPI generators: scripts/prev-release, chromium, openapi-tools), so that no
## build or install competes with the suite's timing for the cores (a failure there is said
## again by the test that needs it); then the core and end-to-end suites again with their
## daemons behind PgBouncer in transaction mode (scripts/devbouncer; skipped with DATABASE_URL
## set), on a new cluster: the first pass's databases are thrown away first, so the two passes
## never hold the disk at once. Warns when under 6 GiB is free (README, "What `make test`
## needs")
test:
	@scripts/warn-low-disk 6 "make test" "the suite"
	@if command -v openssl >/dev/null 2>&1; then scripts/sume-vectors --check; \
	else echo "openssl not installed: fixtures/sume/vectors not recomputed (the tests still read them)"; fi
	$(CARGO) build --workspace --all-targets
	@scripts/prev-release >/dev/null || true
	@scripts/chromium ensure >/dev/null || true
	@scripts/openapi-tools ensure >/dev/null || true
	@scripts/devpg destroy target/devpg-test >/dev/null 2>&1 || true
	@DEVPG_DIR=target/devpg-test scripts/with-devpg $(CARGO) test --workspace --no-fail-fast
	@scripts/devpg destroy target/devpg-test >/dev/null 2>&1 || true
	@DEVPG_DIR=target/devpg-test DEVPG_POOLER=1 scripts/with-devpg \
		$(CARGO) test -p sume-inbox -p sume-dev --test it --no-fail-fast

## screenshots: refreshes docs/console/*.png from the console's browser test (headless
## Chromium, installed by scripts/chromium when missing); the test alone writes under target/
.PHONY: screenshots
screenshots:
	@scripts/devpg destroy target/devpg-shots >/dev/null 2>&1 || true
	@CONSOLE_SCREENSHOTS=$(CURDIR)/docs/console DEVPG_DIR=target/devpg-shots scripts/with-devpg \
		$(CARGO) test -p sume-inbox --test it console_browser -- --exact \
		console_browser::an_operator_signs_in_finds_a_raced_job_and_replays_a_dead_letter_in_chromium
	@scripts/devpg destroy target/devpg-shots >/dev/null 2>&1 || true
	@ls -l docs/console/*.png

## lint: formatting, clippy (no function over 80 lines, no source file over 400), the API
## docs' links, as CI runs them
lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings -W clippy::too_many_lines
	@find crates/*/src -name '*.rs' -exec wc -l {} + | awk '$$2 != "total" && $$1 > 400 \
	  { print "lint: " $$2 " has " $$1 " lines, more than 400: split it by what it holds"; bad = 1 } \
	  END { exit bad }'
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc --workspace --no-deps

fmt:
	$(CARGO) fmt --all

## settings-docs: rewrites README's configuration tables from the declarations in
## crates/sume-inbox/src/config/declared/ (a test fails while they differ)
.PHONY: settings-docs
settings-docs:
	UPDATE_SETTINGS_DOCS=1 $(CARGO) test -q -p sume-inbox --lib config::docs

## check-deploy: validate deploy/ (systemd, Dockerfile steps, compose, Kubernetes, alerts)
check-deploy:
	scripts/check-deploy

## test-deploy: the deploy artifacts, run on a Docker engine (scripts/test-deploy): dockerd
## started when none answers (as root, with no bridge network: containers on the host network,
## ports on 127.0.0.1), the base images pulled or stood in for (scripts/deploy-base-images), the
## image built from deploy/Dockerfile, the compose stack run and checked (deploy/README.md, "The
## live test"). Skipped, saying so, where no engine can start. Not part of `make test`.
.PHONY: test-deploy
test-deploy:
	scripts/test-deploy

clean-db:
	for d in target/devpg-*-bouncer; do [ -d $$d ] && scripts/devbouncer destroy $$d; done; true
	for d in target/devpg-*; do scripts/devpg destroy $$d; done

## bench: the benchmark of docs/benchmarks.md, in about 23 minutes after the build: a throwaway
## PostgreSQL under target/, the release daemon, a per-request baseline and the PostgreSQL
## ceiling, measured in one run (about 3 minutes); then the fleet (`sume-bench fleet`, about 7
## minutes): 1, 2 and 4 instances, direct and through a throwaway PgBouncer, 3 rounds; then the
## sweep's reads at Sume (`sume-bench sweep`, about 20 minutes, see bench-sweep); then one
## daemon from an empty database (bench-from-empty, about 6 minutes). Each prints its table
## and appends it to docs/benchmarks.md.
## Options: BENCH_ARGS="--duration 20s --connections 16,64,256 --rate 1000" (see --help),
## FLEET_ARGS="--rounds 1 --duration 5s --instances 1,2" (see `sume-bench fleet --help`),
## SWEEP_ARGS as for bench-sweep.
.PHONY: bench bench-fleet bench-sweep
bench:
	$(CARGO) build --release -p sume-inbox -p sume-bench
	$${CARGO_TARGET_DIR:-target}/release/sume-bench run $(BENCH_ARGS)
	$${CARGO_TARGET_DIR:-target}/release/sume-bench fleet $(FLEET_ARGS)
	MAKE_TARGET=bench-sweep $${CARGO_TARGET_DIR:-target}/release/sume-bench sweep $(SWEEP_ARGS)
	$(MAKE) --no-print-directory bench-from-empty

## bench-from-empty: one daemon on a fresh database under 256 connections for about five
## minutes, every body and header shape in turn, no TRUNCATE and no ANALYZE: each 35 s window
## is a row (events/s, p99, server and PostgreSQL CPU per event) of one growing inbox.
.PHONY: bench-from-empty
bench-from-empty:
	$(CARGO) build --release -p sume-inbox -p sume-bench
	$${CARGO_TARGET_DIR:-target}/release/sume-bench run --from-empty --mixed-shapes --no-baseline \
		--connections 256 --rounds 9 --duration 35s --warmup 0s --rate 0 --ceiling-duration 0s \
		--attach-jobs 0 --attach-rate 0 --sweep-due 0 --work-dir target/bench-empty $(EMPTY_ARGS)

## bench-sweep: only the sweep's part of `make bench` (about 20 minutes): the reads the sweep
## spends at Sume (the simulator counts them) and how late a job whose webhook was lost is
## closed, LIST_WALKS=auto beside LIST_WALKS=off, in the issue's shape (600 jobs over 30 s) and
## at the shipped settings sixty times faster (100,000 jobs a day, some running for hours, the
## reads paced to 9,000 a day); 3 rounds, medians.
## Options: SWEEP_ARGS="--rounds 1 --shapes issue --shipped-for 1m" (see `sume-bench sweep --help`).
bench-sweep:
	$(CARGO) build --release -p sume-bench
	MAKE_TARGET=$@ $${CARGO_TARGET_DIR:-target}/release/sume-bench sweep $(SWEEP_ARGS)

## bench-fleet: only the fleet part of `make bench` (FLEET_ARGS as there)
bench-fleet:
	$(CARGO) build --release -p sume-inbox -p sume-bench
	MAKE_TARGET=$@ $${CARGO_TARGET_DIR:-target}/release/sume-bench fleet $(FLEET_ARGS)

## soak: 10 minutes at a fixed 2,000 events/s against one daemon with attach, the sweep and
## retention running (a throwaway PostgreSQL and the simulator, started by it); samples memory,
## p99, table sizes per live row and dead tuples every 30 s, draws docs/soak.svg, appends a
## section to docs/benchmarks.md, and fails when a series grows after the first 3 minutes.
## Options: SOAK_ARGS="--duration 2m --sample-every 10s" (see `sume-bench soak --help`).
.PHONY: soak
soak:
	$(CARGO) build --release -p sume-bench
	$${CARGO_TARGET_DIR:-target}/release/sume-bench soak $(SOAK_ARGS)

## bench-console: each console page's time beside a million closed jobs (scripts/bench-console:
## a throwaway cluster seeded, the release daemon, an operator signed in with curl); Markdown rows
.PHONY: bench-console
bench-console:
	@scripts/bench-console $(BENCH_CONSOLE_REQUESTS)

## chaos: the chaos suite of docs/reliability.md, in a few minutes after the build: a throwaway
## PostgreSQL under target/chaos (or DATABASE_URL's server, the crash then skipped) and the
## release daemon as child processes, on loopback. Under signed load: `kill -9` twice, every
## connection cut, the inbox locked past INGEST_TIMEOUT, a PostgreSQL crash (3 rounds each, over
## 50,000 acknowledged deliveries in all); then three instances racing 5,000 jobs, and 8,000
## stalled connections (2,000 of them uploads declaring 1 MiB) beside genuine deliveries, with
## the daemon's resident memory. Prints the figures; fails when a delivery
## answered 2xx is missing, a job is not closed exactly once, or a stalled socket stays open.
## A smaller run of the same code is part of `make test` (crates/sume-bench/tests/chaos.rs).
## Options: CHAOS_ARGS="--rounds 1 --size 20000 --scenarios kill,crash" (see --help).
.PHONY: chaos
chaos:
	$(CARGO) build --release -p sume-inbox -p sume-bench
	$${CARGO_TARGET_DIR:-target}/release/sume-bench chaos $(CHAOS_ARGS)

## fuzz: each cargo-fuzz target of sume-wire (crates/sume-wire/fuzz) for FUZZ_SECONDS on the
## nightly toolchain, from the seed corpus in the repository; new inputs go to target/fuzz-corpus.
## Not part of `make test`. Findings land in crates/sume-wire/fuzz/artifacts/.
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?= signature_header verify parse_event
.PHONY: fuzz
fuzz:
	@command -v cargo-fuzz >/dev/null 2>&1 || $(CARGO) install cargo-fuzz --locked
	@rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal
	@cd crates/sume-wire && for t in $(FUZZ_TARGETS); do \
		mkdir -p ../../target/fuzz-corpus/$$t && \
		$(CARGO) +nightly fuzz run $$t ../../target/fuzz-corpus/$$t fuzz/corpus/$$t -- \
			-max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 || exit 1; \
	done
