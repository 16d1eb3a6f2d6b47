# forged: build, test, sanitize, fuzz.
#
#   make            build build/forged
#   make deps-run   install what building and running forged needs (RUN_PKGS) and no more
#   make deps       that, what the tests need (TEST_PKGS), Debian's chromium and node for
#                   the dashboard's browser tests, and their node package (npm ci in
#                   tests/browser); idempotent, offline once all is there; a system
#                   nginx it installs is left stopped and disabled (tests/tools/apt_install.sh)
#   make test       build and run every test (unit, e2e, the dashboard in Chromium:
#                   skipped, saying why, without Chromium or tests/browser/node_modules);
#                   installs deps if missing; ends with "tests: N passed, N failed";
#                   the browser tests leave screenshots in build/ui-shots
#   make SANITIZE=address,undefined test    the same under ASan+UBSan (in build/san)
#   make tsan-test  ThreadSanitizer (in build/tsan) on the store's unit test and the
#                   serve e2e tests (test_serve, test_hostile_api, test_conventions,
#                   test_write_suspend, test_health_build);
#                   any report fails it (TSAN_OPTIONS halt_on_error=1, exitcode=66)
#   make demo       generate a fixture checkpoint and run forged on it
#   make fuzz       run every libFuzzer target (tests/fuzz) for FUZZ_SECONDS each (clang)
#   make fuzz-smoke the same for FUZZ_SMOKE_SECONDS (5) each: part of make test when clang links libFuzzer
#   make check-src  refuse banned libc functions, bare -1 returns in forge/, and
#                   branches on error message text
#   make check-layers  refuse an include of a layer above the including file's
#   make check-docs refuse docs/interfaces.md tables that differ from the code
#   make deb        build the Debian package (dpkg-buildpackage) in a copy of the tree
#   make check-deb  build it and run lintian on it (tests/e2e/deb_check.sh)
#   make bench      every benchmark, ratios in build/bench/results.json (BENCH_QUICK=1: small, minutes)

CC      ?= cc
PYTHON  ?= python3
# What building and running forged needs (`make run`, `make demo`, `make deb`): the
# compiler, python3 (tests/embed.py, the fixture generator), the libraries it links,
# the CA certificates of https:// sources (the Hugging Face Hub by default), and
# libpq (a PostgreSQL store_url).
RUN_PKGS := gcc libc6-dev python3 ca-certificates libmicrohttpd-dev libsqlite3-dev \
	libcjson-dev libzstd-dev libcurl4-openssl-dev libssl-dev libpq-dev
# What the tests need on top (`make test`, `make fuzz`): cmocka, curl and jq, numpy
# for the goldens, nginx as the test hub (run by the tests on loopback only), the
# man page and completion checks, strace (test_forge_files.sh), clang for the fuzzer,
# PostgreSQL for the store tests' second backend (a throwaway cluster the tests start
# as an unprivileged user: tests/pg_cluster.sh; the package's own cluster is left stopped).
TEST_PKGS := libcmocka-dev curl jq python3-numpy zstd nginx groff-base man-db zsh strace \
	clang libclang-rt-14-dev postgresql
# What `make deb` and `make check-deb` need on top (not installed by `make test`).
DEB_PKGS := build-essential debhelper dpkg-dev fakeroot lintian
# The dashboard's browser tests (tests/browser, README "Dashboard"): Debian's
# Chromium driven by playwright-core, which downloads no browser; node and npm
# come from Debian when the machine has none.
BROWSER_PKGS := chromium fonts-dejavu-core

ifeq ($(SANITIZE),)
BUILD   := build
SANFLAGS :=
else ifeq ($(SANITIZE),thread)
# ThreadSanitizer cannot share objects with ASan: its own folder.
BUILD   := build/tsan
SANFLAGS := -fsanitize=thread -fno-omit-frame-pointer
else
BUILD   := build/san
SANFLAGS := -fsanitize=$(SANITIZE) -fno-omit-frame-pointer -fno-sanitize-recover=all
endif

WARN    := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
	-Wformat=2 -Wvla -Wconversion -Werror
CFLAGS  ?= -O2 -g
# libpq's header lives in its own folder (Debian's libpq-dev: /usr/include/postgresql).
PQ_INC  := $(shell pg_config --includedir 2>/dev/null || echo /usr/include/postgresql)
ALL_CFLAGS := -std=c11 -D_GNU_SOURCE -D_FILE_OFFSET_BITS=64 $(CPPFLAGS) $(CFLAGS) $(WARN) \
	$(SANFLAGS) -I. -isystem $(PQ_INC) -MMD -MP
# libcurl, libmicrohttpd, libcrypto and libpq are not linked: forged loads them on first use
# (forge/core/lazylib.h), so a command that needs none of them (a local inspect) does
# not load the 30-odd libraries they pull in.  Their SONAMEs come from this machine's
# development links; the stubs fall back to Debian bookworm's.
soname = $(shell objdump -p "$$($(CC) -print-file-name=lib$(1).so)" 2>/dev/null | sed -n 's/^ *SONAME *//p')
SONAME_CURL := $(call soname,curl)
SONAME_MHD := $(call soname,microhttpd)
SONAME_CRYPTO := $(call soname,crypto)
SONAME_PQ := $(call soname,pq)
SONAME_FLAGS := $(if $(SONAME_CURL),-DFG_SONAME_CURL='"$(SONAME_CURL)"') \
	$(if $(SONAME_MHD),-DFG_SONAME_MHD='"$(SONAME_MHD)"') \
	$(if $(SONAME_CRYPTO),-DFG_SONAME_CRYPTO='"$(SONAME_CRYPTO)"') \
	$(if $(SONAME_PQ),-DFG_SONAME_PQ='"$(SONAME_PQ)"')
ALL_CFLAGS += $(SONAME_FLAGS)
LDLIBS  := -lsqlite3 -lcjson -lzstd -lm -lpthread
LDFLAGS += $(SANFLAGS)

FORGE_SRC  := $(wildcard forge/*/*.c forge/*/*/*.c)
STORE_SRC  := $(wildcard store/*.c store/*/*.c)
API_SRC    := $(wildcard api/*.c)
DAEMON_SRC := $(wildcard daemon/*.c)
UNIT_SRC   := $(wildcard tests/unit/test_*.c)

FORGE_OBJ  := $(FORGE_SRC:%.c=$(BUILD)/%.o)
STORE_OBJ  := $(STORE_SRC:%.c=$(BUILD)/%.o)
API_OBJ    := $(API_SRC:%.c=$(BUILD)/%.o) $(BUILD)/gen/openapi.o $(BUILD)/gen/web.o
# The dashboard's files (web/), compiled in: see $(BUILD)/gen/web.c below.
WEB_SRC    := $(sort $(wildcard web/*.html web/*.css web/*.js web/*.svg web/*.ico web/*.png))
DAEMON_OBJ := $(DAEMON_SRC:%.c=$(BUILD)/%.o)
UNIT_BIN   := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/%)
LIBFORGE   := $(BUILD)/libforge.a
LIBSTORE   := $(BUILD)/libstore.a
LIBAPI     := $(BUILD)/libapi.a
LIBS       := $(LIBAPI) $(LIBSTORE) $(LIBFORGE)
FORGED     := $(BUILD)/forged
FIXTURES   := $(BUILD)/fixtures
# libFuzzer targets (tests/fuzz/fuzz_NAME.c): see `make fuzz` below.
FUZZ_DIR := build/fuzz
FUZZ_TARGETS := st_header jsonlex_diff ckpt_open config tokens verify api
FUZZ_BINS := $(FUZZ_TARGETS:%=$(FUZZ_DIR)/fuzz_%)

# Shell completions, generated from the binary's command table.
COMPLETIONS := $(BUILD)/completion/forged.bash $(BUILD)/completion/_forged

.PHONY: all deps deps-run deps-deb browser-deps test test-build tsan-test run demo fuzz fuzz-build fuzz-smoke check-src check-layers check-docs clean deb check-deb FORCE
.DEFAULT_GOAL := all

all: $(FORGED) $(COMPLETIONS)

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -c $< -o $@

$(LIBFORGE): $(FORGE_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(LIBSTORE): $(STORE_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(LIBAPI): $(API_OBJ)
	@rm -f $@
	ar rcs $@ $^

# The OpenAPI document is kept in docs/ and compiled in, so the binary serves
# exactly the document CI checks.
$(BUILD)/gen/openapi.c: docs/openapi.json tests/embed.py
	@mkdir -p $(dir $@)
	$(PYTHON) tests/embed.py fg_openapi_json $< $@

$(BUILD)/gen/openapi.o: $(BUILD)/gen/openapi.c
	$(CC) -std=c11 $(CFLAGS) $(SANFLAGS) -c $< -o $@

# The dashboard (README "Dashboard"): every file of web/ becomes a row of
# fg_ui_assets (api/ui.h) with its bytes and an ETag, so `forged serve` reads
# no file at run time and `make` needs neither node nor the network.  web.list
# changes only when the set of files does, so a removed file rebuilds too.
$(BUILD)/gen/web.list: FORCE
	@mkdir -p $(dir $@)
	@echo $(WEB_SRC) | cmp -s - $@ || echo $(WEB_SRC) >$@

$(BUILD)/gen/web.c: $(WEB_SRC) $(BUILD)/gen/web.list tests/embed.py
	$(PYTHON) tests/embed.py --assets fg_ui_assets $@ $(WEB_SRC)

$(BUILD)/gen/web.o: $(BUILD)/gen/web.c api/ui.h
	$(CC) -std=c11 $(CFLAGS) $(SANFLAGS) -I. -c $< -o $@

$(FORGED): $(DAEMON_OBJ) $(LIBS)
	$(CC) $(LDFLAGS) -o $@ $(DAEMON_OBJ) $(LIBS) $(LDLIBS)

$(BUILD)/completion/forged.bash: $(FORGED)
	@mkdir -p $(dir $@)
	$(FORGED) completion bash >$@.tmp && mv $@.tmp $@

$(BUILD)/completion/_forged: $(FORGED)
	@mkdir -p $(dir $@)
	$(FORGED) completion zsh >$@.tmp && mv $@.tmp $@

# Every unit test links tests/unit/support.c (support.h), and the daemon/
# objects its rule below names (daemon/ is not a library).
UNIT_SUPPORT := $(BUILD)/tests/unit/support.o
$(BUILD)/tests/%: $(BUILD)/tests/unit/%.o $(UNIT_SUPPORT) $(LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< $(UNIT_SUPPORT) $(filter $(BUILD)/daemon/%.o,$^) $(LIBS) -lcmocka $(LDLIBS)
$(BUILD)/tests/test_config: $(BUILD)/daemon/config.o $(BUILD)/daemon/args.o
$(BUILD)/tests/test_workers: $(BUILD)/daemon/workers.o $(BUILD)/daemon/log.o $(BUILD)/daemon/notify.o \
	$(BUILD)/daemon/fault.o

# Installs only when something is missing, so `make test` stays fast and offline
# on a machine that has everything.
deps-run:
	@bash tests/tools/apt_install.sh $(RUN_PKGS)

deps-deb:
	@bash tests/tools/apt_install.sh $(DEB_PKGS)

deps:
	@bash tests/tools/apt_install.sh $(RUN_PKGS) $(TEST_PKGS) $(BROWSER_PKGS) \
		$$(command -v npm >/dev/null 2>&1 || echo nodejs npm)
	@$(MAKE) --no-print-directory browser-deps

# playwright-core, pinned in tests/browser/package-lock.json (node_modules is not
# committed): installed again only when the lock file is newer than the install.
# Without the registry the browser tests are skipped, saying why (CI fails them).
BROWSER_LOCK := tests/browser/node_modules/.package-lock.json
browser-deps:
	@if [ ! -f $(BROWSER_LOCK) ] || [ tests/browser/package-lock.json -nt $(BROWSER_LOCK) ]; then \
		echo "npm ci in tests/browser"; \
		(cd tests/browser && npm ci --no-audit --no-fund) || echo "browser-deps: npm ci failed: the browser tests will be skipped"; \
	fi

$(FIXTURES)/manifest.json: tests/fixtures/gen_fixtures.py
	$(PYTHON) tests/fixtures/gen_fixtures.py $(FIXTURES)

# Quantization goldens come from numpy (Debian's python3-numpy, hence /usr/bin/python3).
QUANT_GOLDEN := $(BUILD)/fixtures/quant_golden
$(QUANT_GOLDEN)/index.json: tests/fixtures/quant_golden.py
	/usr/bin/python3 tests/fixtures/quant_golden.py $(QUANT_GOLDEN)

# Quantized checkpoints (issue 12), packed by dequant_golden.py's packers: numpy, hence /usr/bin/python3.
QUANT_FIXTURES := $(FIXTURES)/quant_manifest.json
$(QUANT_FIXTURES): tests/fixtures/gen_quant_fixtures.py tests/fixtures/gen_fixtures.py tests/fixtures/dequant_golden.py
	/usr/bin/python3 tests/fixtures/gen_quant_fixtures.py $(FIXTURES)

# Dequantization goldens: an independent numpy reading of the notes' format rules.
DEQUANT_GOLDEN := $(BUILD)/fixtures/dequant_golden
$(DEQUANT_GOLDEN)/index.json: tests/fixtures/dequant_golden.py
	/usr/bin/python3 tests/fixtures/dequant_golden.py $(DEQUANT_GOLDEN)

test: deps
	@$(MAKE) --no-print-directory check-src check-layers check-docs test-build
	@$(if $(SANITIZE),echo "fuzz-smoke: skipped under SANITIZE (the plain make test runs it)",$(MAKE) --no-print-directory fuzz-smoke)
	@PYTHON=$(PYTHON) FORGED_QUANT_GOLDEN=$(QUANT_GOLDEN) FORGED_DEQUANT_GOLDEN=$(DEQUANT_GOLDEN) \
		bash tests/run_all.sh $(BUILD)

test-build: $(FORGED) $(COMPLETIONS) $(UNIT_BIN) $(FIXTURES)/manifest.json $(QUANT_GOLDEN)/index.json \
	$(DEQUANT_GOLDEN)/index.json $(QUANT_FIXTURES)

# ThreadSanitizer on the store and the server: build/tsan, then test_store and the
# serve scripts with a TSan-built forged.  A report makes the process exit 66 and
# the run fail; tests/tsan.supp names what is suppressed and why.
TSAN_TESTS ?= tests/e2e/test_serve.sh tests/e2e/test_hostile_api.sh tests/e2e/test_conventions.sh \
	tests/e2e/test_write_suspend.sh tests/e2e/test_health_build.sh
tsan-test: deps
	@$(MAKE) --no-print-directory SANITIZE=thread build/tsan/forged build/tsan/tests/test_store \
		build/tsan/fixtures/manifest.json build/tsan/fixtures/quant_manifest.json
	@TSAN_OPTIONS="halt_on_error=1 exitcode=66 second_deadlock_stack=1 suppressions=$(CURDIR)/tests/tsan.supp" \
		PYTHON=$(PYTHON) bash tests/run_all.sh build/tsan --only "tests/test_store $(TSAN_TESTS)"

# The service on 127.0.0.1:8470 with the generated fixtures as its allowed root.
run: deps-run
	@$(MAKE) --no-print-directory $(FORGED) $(FIXTURES)/manifest.json
	@echo "forged serve on 127.0.0.1:8470; in another terminal, for example:"
	@echo "  $(FORGED) jobs submit qwen35_hf --wait"
	@echo "  $(FORGED) artifacts list"
	$(FORGED) serve --allow-roots $(CURDIR)/$(FIXTURES) --allow-roots $(CURDIR)

demo: deps-run
	@$(MAKE) --no-print-directory $(FORGED) $(FIXTURES)/manifest.json
	$(FORGED) version
	$(FORGED) inspect $(FIXTURES)/qwen35_mlx_sidecar
	-$(FORGED) inspect $(FIXTURES)/qwen35_mlx_embedded

# ---- fuzzing (tests/fuzz, README of tests/fuzz/run.sh) ----
# libFuzzer targets built with clang under ASan+UBSan (every UB report aborts),
# always in build/fuzz whatever SANITIZE says: the sources are compiled once
# with coverage instrumentation into build/fuzz/obj, each target is one
# tests/fuzz/fuzz_NAME.c linked against the fuzz builds of the libraries.
# `make fuzz-smoke` (part of `make test` when clang can link -fsanitize=fuzzer,
# else skipped saying why) runs every target FUZZ_SMOKE_SECONDS each on its
# seeds (tests/fuzz/seeds/NAME); `make fuzz` runs them FUZZ_SECONDS each.  Any
# crash, leak, timeout or sanitizer report fails the run; the input is kept
# in build/fuzz/crashes.  New corpus entries go to build/fuzz/corpus/NAME.
FUZZ_SECONDS ?= 60
FUZZ_SMOKE_SECONDS ?= 5
FUZZ_CC ?= clang
FUZZ_SAN := -fsanitize=address,undefined -fno-sanitize-recover=all -fsanitize-recover=float-cast-overflow \
	-fno-omit-frame-pointer
FUZZ_CFLAGS := -std=c11 -D_GNU_SOURCE -D_FILE_OFFSET_BITS=64 -g -O1 -I. -isystem $(PQ_INC) $(FUZZ_SAN) $(SONAME_FLAGS)
FUZZ_LIB_SRC := $(FORGE_SRC) $(STORE_SRC) $(API_SRC) daemon/config.c daemon/args.c
FUZZ_OBJ := $(FUZZ_LIB_SRC:%.c=$(FUZZ_DIR)/obj/%.o)
FUZZ_GEN_OBJ := $(FUZZ_DIR)/obj/gen/openapi.o $(FUZZ_DIR)/obj/gen/web.o
FUZZ_LIBS := $(FUZZ_DIR)/libapi.a $(FUZZ_DIR)/libstore.a $(FUZZ_DIR)/libforge.a

$(FUZZ_DIR)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -MMD -MP -c $< -o $@

$(FUZZ_DIR)/obj/gen/%.o: $(BUILD)/gen/%.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -c $< -o $@

$(FUZZ_DIR)/libforge.a: $(filter $(FUZZ_DIR)/obj/forge/%,$(FUZZ_OBJ))
	@rm -f $@
	ar rcs $@ $^

$(FUZZ_DIR)/libstore.a: $(filter $(FUZZ_DIR)/obj/store/%,$(FUZZ_OBJ))
	@rm -f $@
	ar rcs $@ $^

$(FUZZ_DIR)/libapi.a: $(filter $(FUZZ_DIR)/obj/api/%,$(FUZZ_OBJ)) $(FUZZ_GEN_OBJ)
	@rm -f $@
	ar rcs $@ $^

# fuzz_config links the daemon's config reader and the option parser it reads
# its flags with, the daemon objects it needs;
# fuzz_jsonlex_diff its tree-based reference reader of safetensors headers.
$(FUZZ_DIR)/fuzz_config: $(FUZZ_DIR)/obj/daemon/config.o $(FUZZ_DIR)/obj/daemon/args.o
$(FUZZ_DIR)/fuzz_jsonlex_diff: $(FUZZ_DIR)/obj/tests/fuzz/ref_st_header.o tests/fuzz/ref_st_header.h

$(FUZZ_DIR)/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz_common.h $(FUZZ_LIBS)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -Wall -Wextra -Werror -fsanitize=fuzzer -o $@ $< \
		$(filter %.o,$^) $(FUZZ_LIBS) $(LDLIBS)

FUZZ_BIN := $(FUZZ_DIR)/fuzz_st_header
fuzz-build: $(FUZZ_BINS)

# The seeds of fuzz_api name fixture checkpoints (build/fixtures).
FUZZ_RUN = FUZZ_CC=$(FUZZ_CC) FORGED_FUZZ_FIXTURES=$(CURDIR)/$(FIXTURES) bash tests/fuzz/run.sh

fuzz-smoke:
	@if $(FUZZ_RUN) --probe; then \
		$(MAKE) --no-print-directory fuzz-build $(FIXTURES)/manifest.json && \
		$(FUZZ_RUN) $(FUZZ_SMOKE_SECONDS) $(FUZZ_TARGETS); \
	fi

fuzz: deps
	@$(MAKE) --no-print-directory fuzz-build $(FIXTURES)/manifest.json
	@$(FUZZ_RUN) $(FUZZ_SECONDS) $(FUZZ_TARGETS)

# Benchmarks (bench/run_all.sh): figures and ratios against references run in
# the same run, never asserted.
.PHONY: bench
bench: $(FORGED) $(LIBS)
	@BENCH_QUICK=$(BENCH_QUICK) bash bench/run_all.sh

# Layers point down (docs/architecture.md): a file may include its own folder
# and the layers below it.
check-layers:
	@bash tests/tools/check_layers.sh

# The checked tables of docs/interfaces.md (verdicts, error and exit codes,
# routes, problem types, config keys, environment, commands) against the code.
check-docs:
	@$(PYTHON) tests/tools/check_docs.py

# Also: no bare `return -1;` in forge/ (a -1 reads as FG_EUSAGE: failures
# return an FG_E* code, predicates bool, lookups NULL or a named "not found"),
# and no error message searched to decide what to do (the code decides).
check-src:
	@if grep -nE '(^|[^A-Za-z0-9_])(sprintf|strcpy|strcat|atoi|atol|strtok|gets)[[:space:]]*\(' \
		$$(find forge daemon store api tests bench -name '*.[ch]' 2>/dev/null); then \
		echo "check-src: banned function above"; exit 1; fi
	@if grep -nE 'return[[:space:]]+-1[[:space:]]*;' $$(find forge -name '*.c' 2>/dev/null); then \
		echo "check-src: bare 'return -1;' in forge/ above (return an FG_E* code, a bool or a named value)"; exit 1; fi
	@if grep -nE 'str(str|n?cmp|casecmp|ncasecmp)[[:space:]]*\([^;]*(msg|why)\b' \
		$$(find forge daemon store api -name '*.[ch]' 2>/dev/null); then \
		echo "check-src: an error message decides behaviour above (test err.code instead)"; exit 1; fi
	@echo "check-src: ok"

clean:
	rm -rf build

# The Debian package (debian/), built by dpkg-buildpackage in a copy of the
# tree under build/deb (so the work tree's build/ is left alone), then lintian.
deb: deps-run deps-deb
	@bash tests/e2e/deb_check.sh --no-lintian

check-deb: deps deps-deb
	@bash tests/e2e/deb_check.sh

-include $(FORGE_OBJ:.o=.d) $(STORE_OBJ:.o=.d) $(API_OBJ:.o=.d) $(DAEMON_OBJ:.o=.d) $(UNIT_SRC:%.c=$(BUILD)/%.d) \
	$(UNIT_SUPPORT:.o=.d) $(FUZZ_OBJ:.o=.d) $(FUZZ_DIR)/obj/tests/fuzz/ref_st_header.d

# ---- install: binary, systemd unit, example config (docs/interfaces.md section 7) ----
# `make install DESTDIR=/tmp/root` stages; PREFIX, UNITDIR and SYSCONFDIR
# move things and the unit's paths follow.  An existing config.json or tokens
# file is never overwritten.  Man pages go to MANDIR, completions to
# BASHCOMPDIR and ZSHCOMPDIR.  The unit runs as the system user and group
# SERVICE_USER (forged), which the sysusers.d file in SYSUSERSDIR declares;
# installing into the running system (no DESTDIR) creates them with
# systemd-sysusers when it is there (the Debian package's postinst uses adduser).
PREFIX      ?= /usr/local
UNITDIR     ?= /lib/systemd/system
SYSCONFDIR  ?= /etc
MANDIR      ?= $(PREFIX)/share/man
BASHCOMPDIR ?= $(PREFIX)/share/bash-completion/completions
ZSHCOMPDIR  ?= $(PREFIX)/share/zsh/site-functions
SYSUSERSDIR ?= /usr/lib/sysusers.d
SERVICE_USER ?= forged
.PHONY: install
install: $(FORGED) $(COMPLETIONS)
	install -D -m 0755 $(FORGED) $(DESTDIR)$(PREFIX)/bin/forged
	install -d -m 0755 $(DESTDIR)$(UNITDIR) $(DESTDIR)$(SYSCONFDIR)/forged $(DESTDIR)$(PREFIX)/share/doc/forged
	install -D -m 0644 man/forged.1 $(DESTDIR)$(MANDIR)/man1/forged.1
	install -D -m 0644 man/forged.conf.5 $(DESTDIR)$(MANDIR)/man5/forged.conf.5
	install -D -m 0644 $(BUILD)/completion/forged.bash $(DESTDIR)$(BASHCOMPDIR)/forged
	install -D -m 0644 $(BUILD)/completion/_forged $(DESTDIR)$(ZSHCOMPDIR)/_forged
	sed -e 's|/usr/local/|$(PREFIX)/|g' -e 's|/etc/forged/|$(SYSCONFDIR)/forged/|g' \
		-e 's|^User=forged$$|User=$(SERVICE_USER)|' -e 's|^Group=forged$$|Group=$(SERVICE_USER)|' \
		systemd/forged.service >$(DESTDIR)$(UNITDIR)/forged.service && chmod 0644 $(DESTDIR)$(UNITDIR)/forged.service
	install -d -m 0755 $(DESTDIR)$(SYSUSERSDIR)
	sed 's|^u forged |u $(SERVICE_USER) |' systemd/forged.sysusers >$(DESTDIR)$(SYSUSERSDIR)/forged.conf && \
		chmod 0644 $(DESTDIR)$(SYSUSERSDIR)/forged.conf
	install -m 0644 README.md systemd/config.example.json systemd/environment.example \
		$(DESTDIR)$(PREFIX)/share/doc/forged/
	[ -e $(DESTDIR)$(SYSCONFDIR)/forged/config.json ] || \
		sed 's|"/etc/forged/|"$(SYSCONFDIR)/forged/|' systemd/config.example.json >$(DESTDIR)$(SYSCONFDIR)/forged/config.json
	[ -e $(DESTDIR)$(SYSCONFDIR)/forged/tokens ] || \
		install -m 0644 systemd/tokens.example $(DESTDIR)$(SYSCONFDIR)/forged/tokens
	$(if $(DESTDIR),,! command -v systemd-sysusers >/dev/null 2>&1 || systemd-sysusers $(SYSUSERSDIR)/forged.conf)
