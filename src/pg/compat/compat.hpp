// What differs between the PostgreSQL majors the extension is built for (15, 17 and 18), in
// one place: the rest of src/ calls the names below and never tests PG_VERSION_NUM itself.
// Each entry says which major changed what. A file that needs one includes this header after
// pg/bridge/postgres.hpp.
#pragma once

#include <cstddef>

#include "pg/bridge/postgres.hpp"

extern "C" {
#include "access/heapam.h"
#include "common/jsonapi.h"
#include "nodes/execnodes.h"
#include "postmaster/bgworker_internals.h"
}

#if PG_VERSION_NUM < 150000
// 15 brought shmem_request_hook, where the memory engine asks for its shared memory.
#error "ratelimit needs PostgreSQL 15 or later"
#endif

namespace ratelimit::pg::compat {

// A JSON lexer over `length` bytes of `json`, unescaping strings. 17 added a first argument, a
// context to fill (NULL: allocate one), and took the length as size_t.
inline JsonLexContext* json_lexer(const char* json, std::size_t length, int encoding) {
#if PG_VERSION_NUM >= 170000
    return makeJsonLexContextCstringLen(nullptr, json, length, encoding, true);
#else
    return makeJsonLexContextCstringLen(const_cast<char*>(json), static_cast<int>(length), encoding,
                                        true);
#endif
}

// What a JSON semantic action returns: 16 made the callbacks return a JsonParseErrorType (so
// that one can stop the parse); before, they returned nothing.
#if PG_VERSION_NUM >= 160000
#define RATELIMIT_JSON_ACTION_RESULT JsonParseErrorType
#define RATELIMIT_JSON_ACTION_DONE return JSON_SUCCESS
#else
#define RATELIMIT_JSON_ACTION_RESULT void
#define RATELIMIT_JSON_ACTION_DONE return
#endif

// Which indexes need an entry for a new row version.
enum class IndexUpdate { kNone, kAll, kSummarizing };

// heap_update of the version at `tid`, with which indexes the new version needs entries in.
// 16 has heap_update say so (a HOT update still needs entries in summarizing indexes, such as
// BRIN); before, a heap-only version needs none and any other needs all.
inline TM_Result heap_update_row(Relation heap, ItemPointer tid, HeapTuple tuple, CommandId command,
                                 TM_FailureData* failure, LockTupleMode* lock_mode,
                                 IndexUpdate* update) {
#if PG_VERSION_NUM >= 160000
    TU_UpdateIndexes update_indexes = TU_None;
    const TM_Result result = heap_update(heap, tid, tuple, command, InvalidSnapshot, true, failure,
                                         lock_mode, &update_indexes);
    *update = update_indexes == TU_All           ? IndexUpdate::kAll
              : update_indexes == TU_Summarizing ? IndexUpdate::kSummarizing
                                                 : IndexUpdate::kNone;
#else
    const TM_Result result =
        heap_update(heap, tid, tuple, command, InvalidSnapshot, true, failure, lock_mode);
    *update = HeapTupleIsHeapOnly(tuple) ? IndexUpdate::kNone : IndexUpdate::kAll;
#endif
    return result;
}

// Whether an index is summarizing (16 added the notion; before, none is).
inline bool index_is_summarizing(const IndexInfo* info) {
#if PG_VERSION_NUM >= 160000
    return info->ii_Summarizing;
#else
    (void)info;
    return false;
#endif
}

// Whether an interval is finite: 17 added 'infinity' and '-infinity' intervals.
inline bool interval_is_finite(const Interval* span) {
#if PG_VERSION_NUM >= 170000
    return !INTERVAL_NOT_FINITE(span);
#else
    (void)span;
    return true;
#endif
}

// Memory for a GUC check hook's "extra" data, which the GUC machinery frees: with free() before
// 16, with guc_free() (its own memory context) from 16. Null when out of memory.
inline void* guc_extra_malloc(std::size_t size) {
#if PG_VERSION_NUM >= 160000
    return guc_malloc(LOG, size);
#else
    return malloc(size);
#endif
}

// Whether the postmaster registered a background worker running `function` of `library` (after
// RegisterBackgroundWorker, which only logs a worker it has no slot for). The postmaster's list
// of workers was an slist until 17 and a dlist after: the overload for the list's type is taken.
// (The lists' iteration macros check types in a way only C compiles: walked by hand.)
inline bool is_worker(const void* list_node, const char* library, const char* function) {
    const auto* registered = reinterpret_cast<const RegisteredBgWorker*>(
        static_cast<const char*>(list_node) - offsetof(RegisteredBgWorker, rw_lnode));
    return strcmp(registered->rw_worker.bgw_library_name, library) == 0 &&
           strcmp(registered->rw_worker.bgw_function_name, function) == 0;
}
inline bool worker_in(slist_head& list, const char* library, const char* function) {
    for (const slist_node* node = list.head.next; node != nullptr; node = node->next) {
        if (is_worker(node, library, function))
            return true;
    }
    return false;
}
inline bool worker_in(dlist_head& list, const char* library, const char* function) {
    for (const dlist_node* node = list.head.next; node != nullptr && node != &list.head;
         node = node->next) {
        if (is_worker(node, library, function))
            return true;
    }
    return false;
}
inline bool background_worker_registered(const char* library, const char* function) {
    return worker_in(BackgroundWorkerList, library, function);
}

}  // namespace ratelimit::pg::compat
