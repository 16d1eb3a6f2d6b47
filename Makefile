# forged: build, test, sanitize, fuzz.
#
#   make            build build/forged
#   make deps       install the Debian packages of design.md section 3, Debian's chromium
#                   and node for the dashboard's browser tests, and their node package
#                   (npm ci in tests/browser); idempotent, offline once all is there
#   make test       build and run every test (unit, e2e, the dashboard in Chromium:
#                   skipped, saying why, without Chromium or tests/browser/node_modules);
#                   installs deps if missing; ends with "tests: N passed, N failed";
#                   the browser tests leave screenshots in build/ui-shots
#   make SANITIZE=address,undefined test    the same under ASan+UBSan (in build/san)
#   make demo       generate a fixture checkpoint and run forged on it
#   make fuzz       run the libFuzzer header target for FUZZ_SECONDS (clang)
#   make check-src  refuse banned libc functions, bare -1 returns in forge/, and
#                   branches on error message text
#   make check-layers  refuse an include of a layer above the including file's
#   make deb        build the Debian package (dpkg-buildpackage) in a copy of the tree
#   make check-deb  build it and run lintian on it (tests/e2e/deb_check.sh)
#   make bench      every benchmark, ratios in build/bench/results.json (BENCH_QUICK=1: small, minutes)

CC      ?= cc
PYTHON  ?= python3
DEPS_PKGS := libmicrohttpd-dev libsqlite3-dev libcjson-dev libzstd-dev \
	libcurl4-openssl-dev libssl-dev libxxhash-dev libcmocka-dev curl jq clang \
	python3-numpy libclang-rt-14-dev zstd nginx groff-base man-db zsh \
	libpq-dev postgresql
# What `make deb` and `make check-deb` need on top (not installed by `make test`).
DEB_PKGS := build-essential debhelper dpkg-dev fakeroot lintian
# The dashboard's browser tests (tests/browser, README "Dashboard"): Debian's
# Chromium driven by playwright-core, which downloads no browser; node and npm
# come from Debian when the machine has none.
BROWSER_PKGS := chromium fonts-dejavu-core

ifeq ($(SANITIZE),)
BUILD   := build
SANFLAGS :=
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
LDLIBS  := -lmicrohttpd -lsqlite3 -lpq -lcjson -lzstd -lcurl -lcrypto -lm -lpthread
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
# Shell completions, generated from the binary's command table.
COMPLETIONS := $(BUILD)/completion/forged.bash $(BUILD)/completion/_forged

.PHONY: all deps deps-deb browser-deps test test-build run demo fuzz check-src check-layers clean deb check-deb FORCE
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

$(BUILD)/tests/%: $(BUILD)/tests/unit/%.o $(LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< $(LIBS) -lcmocka $(LDLIBS)

# Installs only when something is missing, so `make test` stays fast and offline
# on a machine that has everything.
deps deps-deb:
	@missing=""; for p in $(if $(filter deps-deb,$@),$(DEB_PKGS),$(DEPS_PKGS) $(BROWSER_PKGS)); do \
		dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'ok installed' || missing="$$missing $$p"; \
	done; \
	command -v npm >/dev/null 2>&1 || missing="$$missing nodejs npm"; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
		$$SUDO apt-get update && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y --no-install-recommends $$missing; \
	fi
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

# Dequantization goldens: an independent numpy reading of the notes' format rules.
DEQUANT_GOLDEN := $(BUILD)/fixtures/dequant_golden
$(DEQUANT_GOLDEN)/index.json: tests/fixtures/dequant_golden.py
	/usr/bin/python3 tests/fixtures/dequant_golden.py $(DEQUANT_GOLDEN)

test: deps
	@$(MAKE) --no-print-directory check-src check-layers test-build
	@PYTHON=$(PYTHON) FORGED_QUANT_GOLDEN=$(QUANT_GOLDEN) FORGED_DEQUANT_GOLDEN=$(DEQUANT_GOLDEN) \
		bash tests/run_all.sh $(BUILD)

test-build: $(FORGED) $(COMPLETIONS) $(UNIT_BIN) $(FIXTURES)/manifest.json $(QUANT_GOLDEN)/index.json \
	$(DEQUANT_GOLDEN)/index.json

# The service on 127.0.0.1:8470 with the generated fixtures as its allowed root.
run: deps
	@$(MAKE) --no-print-directory $(FORGED) $(FIXTURES)/manifest.json
	@echo "forged serve on 127.0.0.1:8470; in another terminal, for example:"
	@echo "  $(FORGED) jobs submit qwen35_hf --wait"
	@echo "  $(FORGED) artifacts list"
	$(FORGED) serve --allow-roots $(CURDIR)/$(FIXTURES) --allow-roots $(CURDIR)

demo: deps
	@$(MAKE) --no-print-directory $(FORGED) $(FIXTURES)/manifest.json
	$(FORGED) version
	$(FORGED) inspect $(FIXTURES)/qwen35_mlx_sidecar
	-$(FORGED) inspect $(FIXTURES)/qwen35_mlx_embedded

FUZZ_SECONDS ?= 60
FUZZ_BIN := build/fuzz/fuzz_st_header
$(FUZZ_BIN): tests/fuzz/fuzz_st_header.c $(FORGE_SRC)
	@mkdir -p $(dir $@)
	clang -std=c11 -D_GNU_SOURCE -g -O1 -I. -fsanitize=fuzzer,address,undefined \
		-o $@ tests/fuzz/fuzz_st_header.c $(FORGE_SRC) $(LDLIBS)

fuzz: deps $(FUZZ_BIN)
	@mkdir -p build/fuzz/corpus
	$(FUZZ_BIN) -max_total_time=$(FUZZ_SECONDS) -max_len=65536 \
		build/fuzz/corpus tests/hostile tests/fuzz/seeds

# Benchmarks (bench/run_all.sh): figures and ratios against references run in
# the same run, never asserted.
.PHONY: bench
bench: $(FORGED) $(LIBS)
	@BENCH_QUICK=$(BENCH_QUICK) bash bench/run_all.sh

# Layers point down (docs/architecture.md): a file may include its own folder
# and the layers below it.
check-layers:
	@bash tests/tools/check_layers.sh

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
deb: deps deps-deb
	@bash tests/e2e/deb_check.sh --no-lintian

check-deb: deps deps-deb
	@bash tests/e2e/deb_check.sh

-include $(FORGE_OBJ:.o=.d) $(STORE_OBJ:.o=.d) $(API_OBJ:.o=.d) $(DAEMON_OBJ:.o=.d) $(UNIT_SRC:%.c=$(BUILD)/%.d)

# ---- install: binary, systemd unit, example config (design.md section 10) ----
# `make install DESTDIR=/tmp/root` stages; PREFIX, UNITDIR and SYSCONFDIR
# move things and the unit's paths follow.  An existing config.json or tokens
# file is never overwritten.  Man pages go to MANDIR, completions to
# BASHCOMPDIR and ZSHCOMPDIR.  SERVICE_USER=NAME runs the unit as that
# (static) user instead of a DynamicUser= one (the Debian package does).
PREFIX      ?= /usr/local
UNITDIR     ?= /lib/systemd/system
SYSCONFDIR  ?= /etc
MANDIR      ?= $(PREFIX)/share/man
BASHCOMPDIR ?= $(PREFIX)/share/bash-completion/completions
ZSHCOMPDIR  ?= $(PREFIX)/share/zsh/site-functions
SERVICE_USER ?=
.PHONY: install
install: $(FORGED) $(COMPLETIONS)
	install -D -m 0755 $(FORGED) $(DESTDIR)$(PREFIX)/bin/forged
	install -d -m 0755 $(DESTDIR)$(UNITDIR) $(DESTDIR)$(SYSCONFDIR)/forged $(DESTDIR)$(PREFIX)/share/doc/forged
	install -D -m 0644 man/forged.1 $(DESTDIR)$(MANDIR)/man1/forged.1
	install -D -m 0644 man/forged.conf.5 $(DESTDIR)$(MANDIR)/man5/forged.conf.5
	install -D -m 0644 $(BUILD)/completion/forged.bash $(DESTDIR)$(BASHCOMPDIR)/forged
	install -D -m 0644 $(BUILD)/completion/_forged $(DESTDIR)$(ZSHCOMPDIR)/_forged
	sed -e 's|/usr/local/|$(PREFIX)/|g' -e 's|/etc/forged/|$(SYSCONFDIR)/forged/|g' \
		$(if $(SERVICE_USER),-e 's|^DynamicUser=yes$$|User=$(SERVICE_USER)\nGroup=$(SERVICE_USER)|' \
			-e 's|(owned by a dynamic user)|(owned by the user $(SERVICE_USER))|') \
		systemd/forged.service >$(DESTDIR)$(UNITDIR)/forged.service && chmod 0644 $(DESTDIR)$(UNITDIR)/forged.service
	install -m 0644 README.md systemd/config.example.json $(DESTDIR)$(PREFIX)/share/doc/forged/
	[ -e $(DESTDIR)$(SYSCONFDIR)/forged/config.json ] || \
		sed 's|"/etc/forged/|"$(SYSCONFDIR)/forged/|' systemd/config.example.json >$(DESTDIR)$(SYSCONFDIR)/forged/config.json
	[ -e $(DESTDIR)$(SYSCONFDIR)/forged/tokens ] || \
		install -m 0644 systemd/tokens.example $(DESTDIR)$(SYSCONFDIR)/forged/tokens
