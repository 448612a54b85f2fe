# The two commands: `make run` and `make test`. Without DATABASE_URL, both start a throwaway
# PostgreSQL cluster under target/ (scripts/devpg) and stop it afterwards.

CARGO ?= cargo
DEV_SECRET ?= whsec_dev_only_not_secret
export LOG_FORMAT ?= pretty

.PHONY: run test lint fmt clean-db

## run: the daemon against a throwaway PostgreSQL, with a development secret
run:
	$(CARGO) build --release -p sume-inbox
	@DEVPG_DIR=target/devpg-run scripts/with-devpg scripts/run-dev target/release/sume-inbox $(DEV_SECRET)

## test: every test, against a fresh throwaway PostgreSQL (or DATABASE_URL)
test:
	$(CARGO) build --workspace --all-targets
	@scripts/devpg destroy target/devpg-test >/dev/null 2>&1 || true
	@DEVPG_DIR=target/devpg-test scripts/with-devpg $(CARGO) test --workspace --no-fail-fast

## lint: formatting and clippy, as CI runs them
lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

fmt:
	$(CARGO) fmt --all

clean-db:
	scripts/devpg destroy target/devpg-run; scripts/devpg destroy target/devpg-test
