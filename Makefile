# ratelimit: built with PGXS. `make && make install` builds and installs the extension;
# `make unit` builds and runs the core's unit tests; `make installcheck` runs pg_regress
# against a running server (test/run.sh starts a throwaway one and runs every suite).

# ratelimit_router (ratelimit_router.control, sql/router/) routes the calls to shards with
# PL/Proxy; its SQL installs whether or not PL/Proxy is there (without it, CREATE EXTENSION
# fails on the missing plproxy, and the extension's comment names the Debian package).
EXTENSION = ratelimit ratelimit_router ratelimit_rpc_limits ratelimit_endpoint_limits \
	ratelimit_sliding_window_limits
EXTVERSION = $(shell sed -n "s/^default_version = '\(.*\)'/\1/p" ratelimit.control)
ROUTER_VERSION = $(shell sed -n "s/^default_version = '\(.*\)'/\1/p" ratelimit_router.control)

MODULE_big = ratelimit
CORE_OBJS = \
	src/core/algorithms.o \
	src/core/drop_in_limits.o \
	src/core/engine.o \
	src/core/http_fields.o \
	src/core/instant_text.o \
	src/core/json_text.o \
	src/core/identity.o \
	src/core/key_hash.o \
	src/core/lease_table.o \
	src/core/limit_checks.o \
	src/core/memory_store.o \
	src/core/memory_store_saved.o \
	src/core/metrics_text.o \
	src/core/partition_key.o \
	src/core/offender_table.o \
	src/core/policy.o \
	src/core/policy_decision.o \
	src/core/request_routes.o \
	src/core/routing_key.o \
	src/core/reservation_table.o \
	src/core/second_buckets.o \
	src/core/validation.o
PG_OBJS = \
	src/pg/bridge/arguments.o \
	src/pg/bridge/calendar_window.o \
	src/pg/bridge/clock.o \
	src/pg/bridge/extension_schema.o \
	src/pg/bridge/guard.o \
	src/pg/bridge/result_row.o \
	src/pg/bridge/spi_statement.o \
	src/pg/drop_ins/drop_in_rules.o \
	src/pg/drop_ins/endpoint_limits.o \
	src/pg/drop_ins/rpc_limits.o \
	src/pg/drop_ins/sliding_window_limits.o \
	src/pg/engines/key_state_table.o \
	src/pg/engines/memory_engine.o \
	src/pg/engines/memory_store_file.o \
	src/pg/engines/memory_wal.o \
	src/pg/engines/memory_worker.o \
	src/pg/engines/state_engines.o \
	src/pg/module/module.o \
	src/pg/module/released_symbols.o \
	src/pg/module/settings.o \
	src/pg/native/leases.o \
	src/pg/native/native_api.o \
	src/pg/native/reservations.o \
	src/pg/observability/memory_stats.o \
	src/pg/observability/metrics.o \
	src/pg/policies/check.o \
	src/pg/policies/check_http.o \
	src/pg/policies/denial_log.o \
	src/pg/policies/denial_queue.o \
	src/pg/policies/policy_administration.o \
	src/pg/policies/policy_arguments.o \
	src/pg/policies/policy_cache.o \
	src/pg/policies/policy_counters.o \
	src/pg/policies/policy_effects.o \
	src/pg/policies/policy_http.o \
	src/pg/policies/subject_hash.o \
	src/pg/postgrest/jwt_caller.o \
	src/pg/postgrest/pre_request.o \
	src/pg/router/configuration.o \
	src/pg/router/drop_ins.o \
	src/pg/router/native_calls.o \
	src/pg/router/policy_calls.o \
	src/pg/shared_memory/shared_region.o
OBJS = $(CORE_OBJS) $(PG_OBJS)

# The install script of the current version is built from sql/install/, the current definitions
# in files named by what they hold, concatenated in this order (each runs after what it uses).
# sql/released/ holds the scripts of released versions, never edited: ratelimit--0.1.0.sql, the
# first released version's full script, from which PostgreSQL installs any older version
# (CREATE EXTENSION ratelimit VERSION '0.x.0') through the chain, and the updates
# ratelimit--A--B.sql, which hold only changes. sql/updates/ holds the sources of the updates to
# the current version, not released yet, which are built into build/ (UPDATES_BUILT, below).
# sql/upgrade.sql checks that an upgraded install equals a fresh one.
INSTALL_SOURCES = \
	sql/install/schema_and_clock.sql \
	sql/install/state_tables.sql \
	sql/install/native_api.sql \
	sql/install/memory_engine.sql \
	sql/install/leases.sql \
	sql/install/reservations.sql \
	sql/install/policies.sql \
	sql/install/policy_leases.sql \
	sql/install/observability.sql \
	sql/install/presets.sql \
	sql/install/postgrest.sql \
	sql/install/declared_limiters.sql \
	sql/install/insert_limits.sql \
	sql/install/row_security_limits.sql \
	sql/install/drop_in_extensions.sql \
	sql/install/cleanup.sql \
	sql/install/moving.sql \
	sql/install/privileges.sql
DATA = $(wildcard sql/released/*.sql)
DATA_built = build/ratelimit--$(EXTVERSION).sql build/ratelimit_router--$(ROUTER_VERSION).sql \
	$(foreach app,$(DROP_IN_APPS),build/ratelimit_$(app)--$(EXTVERSION).sql) \
	$(UPDATES_BUILT)

# The updates to the current version: sql/updates/<name>.sql is the source of build/<name>.sql,
# whose include lines scripts/build-sql.sh replaces with the current definitions they name (in
# sql/install/ and sql/router/). Once released, an update is frozen: its built script goes to
# sql/released/ and its source goes (CONTRIBUTING.md, Versions).
UPDATES_BUILT = $(patsubst sql/updates/%,build/%,$(wildcard sql/updates/*.sql))
RELEASED_AND_UPDATED = $(filter $(notdir $(wildcard sql/released/*.sql)),$(notdir $(UPDATES_BUILT)))
$(if $(RELEASED_AND_UPDATED),$(error sql/released/ and sql/updates/ both hold $(RELEASED_AND_UPDATED)))

# Each app's drop-ins are an extension of their own, at ratelimit's version and requiring it,
# so a database gets only the drop-ins its app calls: sql/drop_ins/<app>.sql is the whole
# install script of ratelimit_<app>.
DROP_IN_APPS = rpc_limits endpoint_limits sliding_window_limits

# The router's install script, from sql/router/ in this order.
ROUTER_SOURCES = \
	sql/router/configuration.sql \
	sql/router/native_calls.sql \
	sql/router/policy_calls.sql \
	sql/router/drop_ins.sql \
	sql/router/cluster_views.sql \
	sql/router/policy_replication.sql \
	sql/router/privileges.sql

# The SQL edition (docs/sql-edition.md): extension ratelimit_sql, made of SQL and PL/pgSQL only,
# for servers that load no C extension of ours. Its script is built from the C edition's own
# sources (every table, grant and signature written once), with the PL/pgSQL bodies of
# sql/sql_edition/bodies/ in place of the C entry points (scripts/build-sql-edition.sh), and its
# own objects (sql/sql_edition/edition.sql) after the schema. It is not installed by `make
# install` (pg_tle refuses an extension name that has a control file on disk): `make
# sql-edition` builds its files in build/sql_edition/, `make dist` puts them in dist/.
# The edition's own sources run right after the file of the C edition named in their variable.
SQL_EDITION_AFTER_schema_and_clock = sql/sql_edition/edition.sql
SQL_EDITION_AFTER_native_api = $(wildcard sql/sql_edition/native_decisions.sql)
SQL_EDITION_AFTER_policies = $(wildcard sql/sql_edition/policy_decisions.sql)
SQL_EDITION_AFTER_drop_in_extensions = sql/sql_edition/drop_in_rules.sql sql/sql_edition/drop_in_plain.sql
SQL_EDITION_SOURCES = $(foreach source,$(INSTALL_SOURCES),$(source) \
	$(SQL_EDITION_AFTER_$(basename $(notdir $(source)))))
# The bodies of the drop-ins' C functions (sql/sql_edition/bodies/<app>.sql) are their
# extensions' (below), not ratelimit_sql's.
SQL_EDITION_DROP_IN_BODIES = $(foreach app,$(DROP_IN_APPS),sql/sql_edition/bodies/$(app).sql)
SQL_EDITION_BODIES = $(sort $(filter-out $(SQL_EDITION_DROP_IN_BODIES),$(wildcard sql/sql_edition/bodies/*.sql)))
SQL_EDITION_DIR = build/sql_edition
SQL_EDITION_FILES = $(SQL_EDITION_DIR)/ratelimit_sql--$(EXTVERSION).sql \
	$(SQL_EDITION_DIR)/ratelimit_sql.control \
	$(SQL_EDITION_DIR)/ratelimit_sql--$(EXTVERSION).plain.sql \
	$(SQL_EDITION_DIR)/ratelimit_sql--$(EXTVERSION).pg_tle.sql \
	$(foreach app,$(DROP_IN_APPS),$(SQL_EDITION_DIR)/ratelimit_sql_$(app)--$(EXTVERSION).sql \
		$(SQL_EDITION_DIR)/ratelimit_sql_$(app).control \
		$(SQL_EDITION_DIR)/ratelimit_sql_$(app)--$(EXTVERSION).plain.sql \
		$(SQL_EDITION_DIR)/ratelimit_sql_$(app)--$(EXTVERSION).pg_tle.sql)

.PHONY: sql-edition
sql-edition: $(SQL_EDITION_FILES)

$(SQL_EDITION_DIR)/ratelimit_sql--$(EXTVERSION).sql: $(SQL_EDITION_SOURCES) $(SQL_EDITION_BODIES) scripts/build-sql-edition.sh ratelimit.control
	@mkdir -p $(SQL_EDITION_DIR)
	sh scripts/build-sql-edition.sh extension $(EXTVERSION) "$(SQL_EDITION_BODIES)" $(SQL_EDITION_SOURCES) > $@.tmp
	mv $@.tmp $@

$(SQL_EDITION_DIR)/ratelimit_sql.control: ratelimit.control
	@mkdir -p $(SQL_EDITION_DIR)
	{ echo "# ratelimit_sql: the SQL edition of ratelimit (SQL and PL/pgSQL only)"; \
	  echo "comment = 'Rate limiting inside PostgreSQL, SQL edition: exact under concurrency, no C'"; \
	  echo "default_version = '$(EXTVERSION)'"; \
	  echo "relocatable = false"; \
	  echo "superuser = false"; } > $@

# The plain file: for servers without pg_tle, run with psql -f by a role that may create a schema.
$(SQL_EDITION_DIR)/ratelimit_sql--$(EXTVERSION).plain.sql: $(SQL_EDITION_SOURCES) $(SQL_EDITION_BODIES) scripts/build-sql-edition.sh sql/sql_edition/plain_file.psql ratelimit.control
	@mkdir -p $(SQL_EDITION_DIR)
	{ sed -n '/^-- @begin before$$/,/^-- @end before$$/{/^-- @/d;p}' sql/sql_edition/plain_file.psql \
	    | sed 's/@VERSION@/$(EXTVERSION)/g'; \
	  sh scripts/build-sql-edition.sh plain $(EXTVERSION) "$(SQL_EDITION_BODIES)" $(SQL_EDITION_SOURCES); \
	  sed -n '/^-- @begin after$$/,/^-- @end after$$/{/^-- @/d;p}' sql/sql_edition/plain_file.psql \
	    | sed 's/@VERSION@/$(EXTVERSION)/g'; } > $@.tmp
	mv $@.tmp $@

# The migration that installs it through pg_tle, as `dbdev add` writes one into
# supabase/migrations/ (and as RDS and Aurora take it): pgtle.install_extension, then CREATE
# EXTENSION.
$(SQL_EDITION_DIR)/ratelimit_sql--$(EXTVERSION).pg_tle.sql: $(SQL_EDITION_DIR)/ratelimit_sql--$(EXTVERSION).sql
	@! grep -qF '$$ratelimit_sql$$' $< || { echo "$< holds the migration's quote" >&2; exit 1; }
	{ echo "-- ratelimit_sql $(EXTVERSION): the SQL edition of ratelimit, installed through pg_tle."; \
	  echo "-- A migration file (supabase/migrations/, or psql -f on RDS and Aurora): docs/sql-edition.md."; \
	  echo "CREATE EXTENSION IF NOT EXISTS pg_tle;"; \
	  echo "SELECT pgtle.install_extension("; \
	  echo "    'ratelimit_sql',"; \
	  echo "    '$(EXTVERSION)',"; \
	  echo "    'Rate limiting inside PostgreSQL, SQL edition: exact under concurrency, no C',"; \
	  echo "\$$ratelimit_sql\$$"; \
	  cat $<; \
	  echo "\$$ratelimit_sql\$$,"; \
	  echo "    '{}');"; \
	  echo "CREATE EXTENSION ratelimit_sql;"; } > $@.tmp
	mv $@.tmp $@

# Each app's drop-ins in the SQL edition: the extension ratelimit_sql_<app>, at ratelimit_sql's
# version and requiring it, built from the C edition's sql/drop_ins/<app>.sql (written once)
# with the PL/pgSQL bodies of sql/sql_edition/bodies/<app>.sql in place of its C entry points;
# its install steps and grants name ratelimit_sql_<app> (scripts/build-sql-edition.sh
# --drop-in). As ratelimit_sql: its script and control file, its pg_tle migration (after
# ratelimit_sql's), and its plain file for a plain install of ratelimit_sql, which puts the
# drop-ins in schema public or the one psql's variable schema names (psql -v schema=api -f ...).
$(SQL_EDITION_DIR)/ratelimit_sql_%--$(EXTVERSION).sql: sql/drop_ins/%.sql sql/sql_edition/bodies/%.sql scripts/build-sql-edition.sh ratelimit.control
	@mkdir -p $(SQL_EDITION_DIR)
	sh scripts/build-sql-edition.sh extension $(EXTVERSION) sql/sql_edition/bodies/$*.sql --drop-in ratelimit_sql_$* $< > $@.tmp
	mv $@.tmp $@

$(SQL_EDITION_DIR)/ratelimit_sql_%.control: ratelimit_%.control ratelimit.control
	@mkdir -p $(SQL_EDITION_DIR)
	{ echo "# ratelimit_sql_$*: ratelimit_$*, for the SQL edition of ratelimit (SQL and PL/pgSQL only)"; \
	  sed -n "s/^comment = '\(.*\)'$$/comment = '\1 (SQL edition)'/p" $<; \
	  echo "default_version = '$(EXTVERSION)'"; \
	  echo "requires = 'ratelimit_sql'"; \
	  echo "relocatable = false"; \
	  echo "superuser = false"; } > $@.tmp
	@grep -q "^comment = '[^']*'$$" $@.tmp || { echo "$@: the comment of $< cannot be carried over" >&2; exit 1; }
	mv $@.tmp $@

$(SQL_EDITION_DIR)/ratelimit_sql_%--$(EXTVERSION).pg_tle.sql: $(SQL_EDITION_DIR)/ratelimit_sql_%--$(EXTVERSION).sql $(SQL_EDITION_DIR)/ratelimit_sql_%.control
	@! grep -qF '$$ratelimit_sql_$*$$' $< || { echo "$< holds the migration's quote" >&2; exit 1; }
	{ echo "-- ratelimit_sql_$* $(EXTVERSION): ratelimit_$* for the SQL edition of ratelimit, installed through pg_tle"; \
	  echo "-- after ratelimit_sql's migration, into the first schema of search_path (public, normally): docs/sql-edition.md."; \
	  echo "CREATE EXTENSION IF NOT EXISTS pg_tle;"; \
	  echo "SELECT pgtle.install_extension("; \
	  echo "    'ratelimit_sql_$*',"; \
	  echo "    '$(EXTVERSION)',"; \
	  sed -n "s/^comment = \(.*\)$$/    \1,/p" $(word 2,$^); \
	  echo "\$$ratelimit_sql_$*\$$"; \
	  cat $<; \
	  echo "\$$ratelimit_sql_$*\$$,"; \
	  echo "    '{ratelimit_sql}');"; \
	  echo "CREATE EXTENSION ratelimit_sql_$*;"; } > $@.tmp
	mv $@.tmp $@

$(SQL_EDITION_DIR)/ratelimit_sql_%--$(EXTVERSION).plain.sql: sql/drop_ins/%.sql sql/sql_edition/bodies/%.sql scripts/build-sql-edition.sh sql/sql_edition/drop_in_plain_file.psql ratelimit_%.control ratelimit.control
	@mkdir -p $(SQL_EDITION_DIR)
	sh scripts/build-sql-edition.sh plain $(EXTVERSION) sql/sql_edition/bodies/$*.sql --drop-in ratelimit_sql_$* $< > $@.script
	@! grep -qF '$$ratelimit_sql_$*$$' $@.script || { echo "$@.script holds the plain file's quote" >&2; rm -f $@.script; exit 1; }
	functions="$$(sed -n "s/^CREATE FUNCTION @extschema@\.\([a-z_]*\)(.*/'\1'/p" $< | paste -sd, - | sed 's/,/, /g')"; \
	{ sed -n '/^-- @begin before$$/,/^-- @end before$$/{/^-- @/d;p}' sql/sql_edition/drop_in_plain_file.psql \
	    | sed -e 's/@VERSION@/$(EXTVERSION)/g' -e 's/@EXTENSION@/ratelimit_sql_$*/g' -e "s/@FUNCTIONS@/$$functions/g"; \
	  cat $@.script; \
	  sed -n '/^-- @begin after$$/,/^-- @end after$$/{/^-- @/d;p}' sql/sql_edition/drop_in_plain_file.psql \
	    | sed -e 's/@VERSION@/$(EXTVERSION)/g' -e 's/@EXTENSION@/ratelimit_sql_$*/g'; } > $@.tmp
	rm -f $@.script
	mv $@.tmp $@

# pg_regress: sql/<name>.sql against expected/<name>.out.
REGRESS = regress_setup rpc_limits error_guard test_clock endpoint_limits sliding_window_limits \
	upgrade

WARNINGS = -Wall -Wextra -Werror -Wno-register
PG_CONFIG ?= pg_config
# PostgreSQL's own headers are system headers to us: our warnings apply to our code only.
PG_CPPFLAGS = -Iinclude -Isrc -isystem $(shell $(PG_CONFIG) --includedir-server)
# -MMD: each object's header dependencies in a .d file beside it, so that a changed header
# rebuilds every object that includes it (PGXS tracks none without a server built for it).
PG_CXXFLAGS = -std=c++17 $(WARNINGS) -MMD -MP
SHLIB_LINK = -lstdc++

EXTRA_CLEAN = build $(OBJS:.o=.d) test/unit/core_unit_tests test/concurrency/concurrency_tests \
	test/sql_edition/differential_test results regression.diffs regression.out

# No JIT bitcode: the extension's functions are not inlining candidates, and this keeps the
# build free of a clang requirement.
override with_llvm = no

PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

-include $(OBJS:.o=.d)

# PGXS treats every target as secondary (.SECONDARY:), so an object added to the lists above
# would never be built while the library is newer than the objects that exist: a change to
# this file links the library again, and that builds what is missing first.
$(shlib): Makefile

build/ratelimit--$(EXTVERSION).sql: $(INSTALL_SOURCES) ratelimit.control
	@mkdir -p build
	{ printf '%s\n' '\echo Use "CREATE EXTENSION ratelimit" to load this file. \quit'; \
	  for source in $(INSTALL_SOURCES); do echo; cat "$$source"; done; } > $@

build/ratelimit_%--$(EXTVERSION).sql: sql/drop_ins/%.sql ratelimit_%.control
	@mkdir -p build
	{ printf '%s\n' '\echo Use "CREATE EXTENSION ratelimit_$*" to load this file. \quit'; \
	  echo; cat $<; } > $@

build/ratelimit_router--$(ROUTER_VERSION).sql: $(ROUTER_SOURCES) ratelimit_router.control
	@mkdir -p build
	{ printf '%s\n' '\echo Use "CREATE EXTENSION ratelimit_router" to load this file. \quit'; \
	  for source in $(ROUTER_SOURCES); do echo; cat "$$source"; done; } > $@

# Coarse but never stale: each depends on every file it may include.
$(UPDATES_BUILT): build/%.sql: sql/updates/%.sql scripts/build-sql.sh $(INSTALL_SOURCES) $(ROUTER_SOURCES)
	@mkdir -p build
	sh scripts/build-sql.sh $< > $@.tmp
	mv $@.tmp $@

# Core unit tests (GoogleTest). The core builds without any PostgreSQL header. The test
# programs are compiled one source at a time into build/ (make -j2 compiles two at once); each
# object depends on every header it may include, coarse but never stale.
UNIT_CXXFLAGS = -std=c++17 $(WARNINGS) -O1 -g -Iinclude
CORE_SOURCES = $(CORE_OBJS:.o=.cpp)
UNIT_SOURCES = $(wildcard test/unit/*.cpp)
UNIT_OBJECTS = $(patsubst %.cpp,build/unit/%.o,$(UNIT_SOURCES) $(CORE_SOURCES))

build/unit/%.o: %.cpp $(wildcard include/ratelimit/*.hpp test/unit/*.hpp)
	@mkdir -p $(dir $@)
	$(CXX) $(UNIT_CXXFLAGS) -c -o $@ $<

test/unit/core_unit_tests: $(UNIT_OBJECTS)
	$(CXX) $(UNIT_CXXFLAGS) -o $@ $(UNIT_OBJECTS) -lgtest -lgtest_main -pthread

.PHONY: unit
unit: test/unit/core_unit_tests
	test/unit/core_unit_tests

# Concurrency tests: many real libpq connections against a running server (PG* environment).
CONCURRENCY_CXXFLAGS = -std=c++17 $(WARNINGS) -O1 -g -I$(shell $(PG_CONFIG) --includedir)
CONCURRENCY_SOURCES = $(wildcard test/concurrency/*.cpp)
CONCURRENCY_OBJECTS = $(patsubst %.cpp,build/%.o,$(CONCURRENCY_SOURCES))

build/test/concurrency/%.o: test/concurrency/%.cpp $(wildcard test/concurrency/*.hpp)
	@mkdir -p $(dir $@)
	$(CXX) $(CONCURRENCY_CXXFLAGS) -c -o $@ $<

test/concurrency/concurrency_tests: $(CONCURRENCY_OBJECTS)
	$(CXX) $(CONCURRENCY_CXXFLAGS) -o $@ $(CONCURRENCY_OBJECTS) \
		-L$(shell $(PG_CONFIG) --libdir) -lpq -lgtest -lgtest_main -pthread

# The SQL edition's differential test (test/sql_edition/differential.sh): one libpq program
# that makes the same calls in a database of each edition and compares what they answer.
test/sql_edition/differential_test: test/sql_edition/differential_test.cpp
	$(CXX) $(CONCURRENCY_CXXFLAGS) -o $@ $< -L$(shell $(PG_CONFIG) --libdir) -lpq

# Fuzzing the core's decisions (libFuzzer, clang, no PostgreSQL): `make fuzz` builds
# test/fuzz/decision_fuzzer; `make fuzz-run` runs it for FUZZ_SECONDS from the committed seed
# corpus (test/fuzz/corpus), writing new inputs and any crash to FUZZ_WORK (ignored by git).
# A longer run: make fuzz-run FUZZ_SECONDS=3600
FUZZ_CXX ?= clang++
FUZZ_SECONDS ?= 60
FUZZ_WORK ?= test/fuzz/work
FUZZ_CXXFLAGS = -std=c++17 $(WARNINGS) -O1 -g -Iinclude -fsanitize=fuzzer,address,undefined \
	-fno-sanitize-recover=all

test/fuzz/decision_fuzzer: test/fuzz/decision_fuzzer.cpp $(CORE_SOURCES) $(wildcard include/ratelimit/*.hpp)
	$(FUZZ_CXX) $(FUZZ_CXXFLAGS) -o $@ test/fuzz/decision_fuzzer.cpp $(CORE_SOURCES)

.PHONY: fuzz fuzz-run
fuzz: test/fuzz/decision_fuzzer

fuzz-run: test/fuzz/decision_fuzzer
	mkdir -p $(FUZZ_WORK)
	test/fuzz/decision_fuzzer -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 \
		-artifact_prefix=$(FUZZ_WORK)/ $(FUZZ_WORK) test/fuzz/corpus

.PHONY: format-check
format-check: layout-check
	clang-format --dry-run --Werror $(wildcard include/ratelimit/*.hpp src/*/*.cpp src/*/*.hpp src/pg/*/*.cpp src/pg/*/*.hpp test/unit/*.cpp test/concurrency/*.cpp test/concurrency/*.hpp test/sql_edition/*.cpp test/fuzz/*.cpp)

# The rules of the rooms that a search can check (scripts/check-layout.sh, CONTRIBUTING.md's map).
.PHONY: layout-check
layout-check:
	@bash scripts/check-layout.sh

# The source archive for PGXN and for packagers: what git holds at HEAD (uncommitted changes are
# not in it), as dist/ratelimit-<version>.zip. META.json (PGXN) and debian/changelog must name
# the version of ratelimit.control.
.PHONY: dist
dist:
	@test "$$(grep -c '"version": "$(EXTVERSION)"' META.json)" = $$(( $(words $(EXTENSION)) + 1 )) || \
		{ echo "META.json does not say version $(EXTVERSION) (top level and each extension)" >&2; exit 1; }
	@head -1 debian/changelog | grep -qF "ratelimit ($(EXTVERSION)-" || \
		{ echo "debian/changelog does not start at $(EXTVERSION)" >&2; exit 1; }
	mkdir -p dist
	git archive --format=zip --prefix=ratelimit-$(EXTVERSION)/ -o dist/ratelimit-$(EXTVERSION).zip HEAD
	$(MAKE) -s sql-edition
	rm -rf dist/ratelimit_sql-$(EXTVERSION)
	mkdir -p dist/ratelimit_sql-$(EXTVERSION)
	cp $(SQL_EDITION_FILES) LICENSE dist/ratelimit_sql-$(EXTVERSION)/
	cp docs/sql-edition.md dist/ratelimit_sql-$(EXTVERSION)/README.md
	@echo "dist: dist/ratelimit-$(EXTVERSION).zip, dist/ratelimit_sql-$(EXTVERSION)/ (the SQL edition: database.dev's files, the pg_tle migration, the plain file)"
