// The memory engine's file. At a clean shutdown the postmaster writes the store to pg_stat/ (a temp
// file, then durable_rename); at start it reads it back, checks its magic, version, sizes and CRC,
// and restores the keys that have not expired, oldest first, so the order of use survives too. The
// states hold absolute instants of the server clock (microseconds since the Unix epoch), so
// restoring them needs no translation: a key whose window ended while the server was down
// decides as fresh, and a clock that went back is time standing still, as everywhere else.
// With ratelimit.memory_snapshot_interval set, the worker also writes the file every so many
// seconds and the file is kept after loading, so a crash loses at most that interval;
// otherwise the file is deleted once loaded and a crash starts empty. Each server has its own
// store: a file that came with a base backup (a new standby, a restore) is not loaded.
//
// With ratelimit.memory_wal on, the store has a file of its own instead, the checkpoint file:
// the store as of the last checkpoint, from which recovery replays the WAL after it
// (pg/engines/memory_wal.hpp). It is loaded at every start, clean or not, and kept; one that
// came with a base backup is loaded too, since it is the store as of the backup's checkpoint.
//
// The file is written and read by the postmaster (at shutdown, at start) and by the worker (the
// snapshots), which have no error recovery to unwind into: the code here creates no C++ object
// with a destructor, calls PostgreSQL directly and reports a problem with the file as a LOG
// line. It takes no lock: memory_save() (src/pg/engines/memory_engine.cpp) holds the partition
// locks while the keys are written.
#include "pg/engines/memory_store_file.hpp"

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "pg/bridge/clock.hpp"
#include "pg/bridge/settings.hpp"
#include "pg/engines/memory_wal.hpp"

extern "C" {
#include "catalog/pg_control.h"
#include "common/controldata_utils.h"
#include "storage/fd.h"
}

namespace ratelimit::pg {
namespace {

constexpr const char* kStateFile = "pg_stat/ratelimit_memory.state";
constexpr const char* kStateTempFile = "pg_stat/ratelimit_memory.state.tmp";
// ratelimit.memory_wal: the store as of the last checkpoint (pg/engines/memory_wal.hpp).
constexpr const char* kCheckpointFile = "pg_stat/ratelimit_memory.checkpoint";
constexpr const char* kCheckpointTempFile = "pg_stat/ratelimit_memory.checkpoint.tmp";
// The file of an earlier version of the logged store, kept only until its first pass.
constexpr const char* kRecoveredFile = "pg_stat/ratelimit_memory.recovered";
constexpr std::uint32_t kFileMagic = 0x524C4D53;  // "RLMS"
// 2: each key records its database, and a sliding_window log of any length follows its key
// (version 1 kept at most 6 entries inside the key's fixed record). A version 1 file is
// ignored with a LOG line: its keys cannot be told apart by database.
constexpr std::uint32_t kFileVersion = 2;

struct FileHeader {
    std::uint32_t magic;
    std::uint32_t version;
    std::uint32_t slot_bytes;  // the fixed part of each key (kSavedSlotFixedBytes)
    std::uint32_t partitions;
    HashSecret secret;
    Micros saved_at;
    std::int64_t count;
    // CRC-32C of the `count` keys that follow, each its fixed part then its log_count entries
    std::uint32_t entries_crc;
    std::uint32_t reserved;
};

// The file's header for what `writer` has written so far.
FileHeader file_header(const StoreFileWriter& writer, pg_crc32c entries_crc) {
    FileHeader header{};
    header.magic = kFileMagic;
    header.version = kFileVersion;
    header.slot_bytes = kSavedSlotFixedBytes;
    header.partitions = kMemoryPartitions;
    header.secret = writer.secret;
    header.saved_at = writer.saved_at;
    header.count = writer.count;
    header.entries_crc = entries_crc;
    return header;
}

// Reads one key of the file into `saved`, adding its bytes to `crc`: false at the end of the
// file, on a short read, or on a log longer than any this version writes.
bool read_saved(FILE* file, SavedSlot& saved, pg_crc32c* crc) {
    if (fread(&saved, kSavedSlotFixedBytes, 1, file) != 1 || saved.log_count > kMaxSlidingLog)
        return false;
    const std::size_t entries = saved.log_count;
    if (entries > 0 && fread(saved.log, sizeof(LogEntry), entries, file) != entries)
        return false;
    COMP_CRC32C(*crc, &saved, kSavedSlotFixedBytes);
    COMP_CRC32C(*crc, saved.log, entries * sizeof(LogEntry));
    return true;
}

}  // namespace

// Whether the server last stopped cleanly: the shutdown checkpoint marks the control file
// "shut down" (or "shut down in recovery" on a standby). An immediate stop or a crash leaves it
// "in production" or "in recovery", and then the store in shared memory may have been
// half-written by a backend killed under its partition lock.
bool stopped_cleanly() {
    bool crc_ok = false;
    ControlFileData* control = get_controlfile(DataDir, &crc_ok);
    const bool clean =
        crc_ok && (control->state == DB_SHUTDOWNED || control->state == DB_SHUTDOWNED_IN_RECOVERY);
    pfree(control);
    return clean;
}

namespace {

// Reads the store saved in `path` into the (just created, empty) block; deletes the file after
// unless `keep`. Any problem with the file is logged and leaves the store empty: a bad file
// must never stop the server from starting.
void read_store_file(const char* path, void* block, std::int64_t log_blocks, bool keep);

}  // namespace

// After a clean stop the file is what that stop saved. After a crash it can only be a
// snapshot, and it is used only while snapshots are on: one left from when they were on must
// not bring back old counts.
void load_store_file(void* block, std::int64_t log_blocks) {
    unlink(kRecoveredFile);
    if (setting::memory_wal) {
        // The logged store starts from the checkpoint file, whatever the last stop was (recovery
        // then replays the WAL after that checkpoint onto it). One that came with a base backup
        // was written for the backup's checkpoint or a later one, so it is the store the
        // backup's WAL continues. A file saved with the setting off hashed keys with a key of
        // its own: it cannot be used.
        if (unlink(kStateFile) == 0)
            ereport(LOG, (errmsg("ratelimit: \"%s\" was saved while ratelimit.memory_wal was off: "
                                 "the memory engine starts from the WAL",
                                 kStateFile)));
        const bool file = access(kCheckpointFile, F_OK) == 0;
        if (!stopped_cleanly())
            ereport(LOG, (errmsg("ratelimit: the server did not stop cleanly: the memory engine "
                                 "is rebuilt from the WAL"),
                          file ? errdetail("From the store as of the last checkpoint (\"%s\") "
                                           "and the WAL after that checkpoint.",
                                           kCheckpointFile)
                               : 0));
        if (file)
            read_store_file(kCheckpointFile, block, log_blocks, true);
        return;
    }
    // A checkpoint file left from when the setting was on would bring back old counts if it
    // were turned on again after a crash.
    unlink(kCheckpointFile);
    // A data directory made from a base backup starts with backup_label (its startup process
    // renames it only later): a file beside it was copied from the server backed up, whose store
    // it is, and would bring back counts that server may have reset since.
    if (access("backup_label", F_OK) == 0) {
        if (unlink(kStateFile) == 0)
            ereport(LOG, (errmsg("ratelimit: \"%s\" came with a base backup and is another "
                                 "server's: the memory engine starts empty",
                                 kStateFile)));
        return;
    }
    if (setting::memory_snapshot_interval == 0 && !stopped_cleanly()) {
        if (unlink(kStateFile) == 0)
            ereport(LOG, (errmsg("ratelimit: the server did not stop cleanly and snapshots are "
                                 "off: the memory engine starts empty")));
        return;
    }
    read_store_file(kStateFile, block, log_blocks, setting::memory_snapshot_interval != 0);
}

namespace {

void read_store_file(const char* path, void* block, std::int64_t log_blocks, bool keep) {
    FILE* file = AllocateFile(path, PG_BINARY_R);
    if (file == nullptr) {
        if (errno != ENOENT)
            ereport(LOG, (errcode_for_file_access(),
                          errmsg("ratelimit: could not read \"%s\": %m", path)));
        return;
    }
    char problem[160] = {0};
    FileHeader header;
    // Plain data only here (no destructor): the postmaster has no error recovery to unwind.
    static SavedSlot saved;
    if (fread(&header, sizeof header, 1, file) != 1 || header.magic != kFileMagic) {
        snprintf(problem, sizeof problem, "not a ratelimit memory engine file");
    } else if (header.version != kFileVersion) {
        snprintf(problem, sizeof problem,
                 "written in format version %u, and this version of ratelimit reads version %u",
                 header.version, kFileVersion);
    } else if (header.slot_bytes != kSavedSlotFixedBytes ||
               header.partitions != kMemoryPartitions || header.count < 0) {
        snprintf(problem, sizeof problem, "its header does not match this build");
    } else {
        // First pass: the whole file must be intact before anything from it is used.
        pg_crc32c crc;
        INIT_CRC32C(crc);
        std::int64_t read = 0;
        while (read < header.count && read_saved(file, saved, &crc))
            ++read;
        FIN_CRC32C(crc);
        if (read != header.count || fgetc(file) != EOF)
            snprintf(problem, sizeof problem, "its length does not match its header");
        else if (!EQ_CRC32C(crc, header.entries_crc))
            snprintf(problem, sizeof problem, "its checksum does not match");
    }
    if (problem[0] != '\0') {
        ereport(LOG, (errmsg("ratelimit: ignoring \"%s\": %s; the memory engine starts empty", path,
                             problem)));
        FreeFile(file);
        unlink(path);
        return;
    }
    // A logged store hashes with the key derived for the WAL; a file written with another (before
    // ratelimit.memory_wal was on) would hash differently from every standby.
    const HashSecret wal_secret = setting::memory_wal ? memory_wal_secret() : HashSecret{};
    if (setting::memory_wal && std::memcmp(&header.secret, &wal_secret, sizeof wal_secret) != 0) {
        ereport(LOG, (errmsg("ratelimit: ignoring \"%s\": it was written by another cluster or "
                             "before ratelimit.memory_wal was on; the memory engine starts from "
                             "the WAL",
                             path)));
        FreeFile(file);
        unlink(path);
        return;
    }
    // The keys were hashed with the saved secret: the store must keep using it.
    MemoryStore store =
        MemoryStore::create(block, setting::memory_capacity, log_blocks, header.secret);
    const Micros now = clock_now();
    std::int64_t restored = 0;
    if (fseeko(file, static_cast<off_t>(sizeof header), SEEK_SET) == 0) {
        pg_crc32c ignored;
        INIT_CRC32C(ignored);
        for (std::int64_t i = 0; i < header.count && read_saved(file, saved, &ignored); ++i) {
            if (store.restore(saved, now))
                ++restored;
        }
    }
    FreeFile(file);
    if (!keep)
        unlink(path);
    ereport(LOG, (errmsg("ratelimit: memory engine restored %lld of %lld saved keys",
                         static_cast<long long>(restored), static_cast<long long>(header.count))));
}

}  // namespace

bool begin_store_file(StoreFileWriter* writer, const HashSecret& secret, bool checkpoint) {
    writer->path = checkpoint ? kCheckpointFile : kStateFile;
    writer->temp_path = checkpoint ? kCheckpointTempFile : kStateTempFile;
    writer->file = AllocateFile(writer->temp_path, PG_BINARY_W);
    if (writer->file == nullptr) {
        ereport(LOG, (errcode_for_file_access(),
                      errmsg("ratelimit: could not write \"%s\": %m", writer->temp_path)));
        return false;
    }
    writer->secret = secret;
    writer->saved_at = clock_now();
    writer->count = 0;
    writer->bytes = static_cast<std::int64_t>(sizeof(FileHeader));
    INIT_CRC32C(writer->crc);
    // The header again once the keys are written, with their count and CRC.
    const FileHeader header = file_header(*writer, 0);
    writer->written = fwrite(&header, sizeof header, 1, writer->file) == 1;
    return true;
}

void write_store_file_slot(StoreFileWriter* writer, const SavedSlot& saved) {
    const std::size_t entries = saved.log_count;
    FILE* file = writer->file;
    if (writer->written && fwrite(&saved, kSavedSlotFixedBytes, 1, file) == 1 &&
        (entries == 0 || fwrite(saved.log, sizeof(LogEntry), entries, file) == entries)) {
        COMP_CRC32C(writer->crc, &saved, kSavedSlotFixedBytes);
        COMP_CRC32C(writer->crc, saved.log, entries * sizeof(LogEntry));
        ++writer->count;
        writer->bytes +=
            static_cast<std::int64_t>(kSavedSlotFixedBytes + entries * sizeof(LogEntry));
    } else {
        writer->written = false;
    }
}

void write_store_file_keys(StoreFileWriter* writer, const char* bytes, std::size_t length,
                           std::int64_t count) {
    if (length == 0 || !writer->written)
        return;
    if (fwrite(bytes, 1, length, writer->file) == length) {
        COMP_CRC32C(writer->crc, bytes, length);
        writer->count += count;
        writer->bytes += static_cast<std::int64_t>(length);
    } else {
        writer->written = false;
    }
}

bool finish_store_file(StoreFileWriter* writer) {
    FILE* file = writer->file;
    FIN_CRC32C(writer->crc);
    const FileHeader header = file_header(*writer, writer->crc);
    bool written = writer->written && fseeko(file, 0, SEEK_SET) == 0 &&
                   fwrite(&header, sizeof header, 1, file) == 1 && fflush(file) == 0;
    if (FreeFile(file) != 0)
        written = false;
    if (!written) {
        ereport(LOG, (errcode_for_file_access(),
                      errmsg("ratelimit: could not write \"%s\": %m", writer->temp_path)));
        unlink(writer->temp_path);
        return false;
    }
    return durable_rename(writer->temp_path, writer->path, LOG) == 0;
}

void forget_checkpoint_store_file() {
    if (access(kCheckpointFile, F_OK) == 0 && durable_unlink(kCheckpointFile, LOG) == 0)
        ereport(LOG, (errmsg("ratelimit: \"%s\" was removed: a newer one could not be written, "
                             "and the memory engine's keys are in the WAL after the checkpoint "
                             "instead",
                             kCheckpointFile)));
}

}  // namespace ratelimit::pg
