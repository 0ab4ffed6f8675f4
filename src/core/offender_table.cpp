#include "ratelimit/offender_table.hpp"

#include <algorithm>
#include <cstring>

namespace ratelimit {
namespace {

bool holds(const OffenderSlot& slot, std::uint32_t database, std::string_view policy,
           std::string_view subject) noexcept {
    return slot.denials > 0 && slot.database == database &&
           std::string_view(slot.policy, slot.policy_bytes) == policy &&
           std::string_view(slot.subject, slot.subject_bytes) == subject;
}

}  // namespace

std::string_view utf8_prefix(std::string_view text, std::size_t max_bytes) noexcept {
    if (text.size() <= max_bytes)
        return text;
    std::size_t end = max_bytes;
    // Back off over continuation bytes (10xxxxxx) to the start of the cut character.
    while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80)
        --end;
    return text.substr(0, end);
}

void OffenderTable::record(std::string_view policy, std::string_view subject, Micros now,
                           std::uint32_t database, int database_share) noexcept {
    policy = utf8_prefix(policy, kOffenderPolicyBytes);
    subject = utf8_prefix(subject, kOffenderSubjectBytes);
    OffenderSlot* fewest = &slots_[0];   // of all entries, a free one first
    OffenderSlot* fewest_own = nullptr;  // of this database's
    int own = 0;
    for (int i = 0; i < kOffenderSlots; ++i) {
        OffenderSlot& slot = slots_[i];
        if (holds(slot, database, policy, subject)) {
            ++slot.denials;
            slot.last_at = now;
            return;
        }
        if (slot.denials < fewest->denials)
            fewest = &slot;
        if (slot.denials > 0 && slot.database == database) {
            ++own;
            if (fewest_own == nullptr || slot.denials < fewest_own->denials)
                fewest_own = &slot;
        }
    }
    if (fewest_own != nullptr && own >= std::max(1, database_share))
        fewest = fewest_own;
    // Not in the table: take a free entry (denials 0) or the one with the fewest denials, whose
    // count the newcomer inherits, since it may have been denied that often unseen.
    const std::int64_t inherited = fewest->denials;
    fewest->overcount = inherited;
    fewest->denials = inherited + 1;
    fewest->database = database;
    fewest->first_at = now;
    fewest->last_at = now;
    fewest->policy_bytes = static_cast<std::uint16_t>(policy.size());
    fewest->subject_bytes = static_cast<std::uint16_t>(subject.size());
    std::memcpy(fewest->policy, policy.data(), policy.size());
    std::memcpy(fewest->subject, subject.data(), subject.size());
}

std::vector<Offender> OffenderTable::snapshot(std::uint32_t database) const {
    std::vector<Offender> result;
    for (int i = 0; i < kOffenderSlots; ++i) {
        const OffenderSlot& slot = slots_[i];
        if (slot.denials == 0 || slot.database != database)
            continue;
        result.push_back(Offender{std::string_view(slot.policy, slot.policy_bytes),
                                  std::string_view(slot.subject, slot.subject_bytes), slot.denials,
                                  slot.overcount, slot.first_at, slot.last_at});
    }
    std::stable_sort(result.begin(), result.end(),
                     [](const Offender& a, const Offender& b) { return a.denials > b.denials; });
    return result;
}

void OffenderTable::clear() noexcept {
    std::memset(static_cast<void*>(slots_), 0, kBytes);
}

void OffenderTable::clear(std::uint32_t database) noexcept {
    for (int i = 0; i < kOffenderSlots; ++i) {
        if (slots_[i].database == database)
            std::memset(static_cast<void*>(&slots_[i]), 0, sizeof(OffenderSlot));
    }
}

}  // namespace ratelimit
