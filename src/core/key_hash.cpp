// SipHash-2-4 with 128-bit output, from the definition by Aumasson and Bernstein ("SipHash: a
// fast short-input PRF", 2012, and the 128-bit variant of the reference implementation): two
// compression rounds per 8-byte message word, four finalization rounds per output word.
#include "ratelimit/key_hash.hpp"

namespace ratelimit {
namespace {

constexpr std::uint64_t rotate_left(std::uint64_t x, int bits) noexcept {
    return (x << bits) | (x >> (64 - bits));
}

// Assembled from single bytes so that the result is the same on every byte order and no
// pointer is ever read at a type or alignment the buffer does not have.
std::uint64_t load_le64(const unsigned char* p) noexcept {
    std::uint64_t word = 0;
    for (int i = 7; i >= 0; --i) {
        word = (word << 8) | p[i];
    }
    return word;
}

struct SipState {
    std::uint64_t v0;
    std::uint64_t v1;
    std::uint64_t v2;
    std::uint64_t v3;

    void round() noexcept {
        v0 += v1;
        v1 = rotate_left(v1, 13);
        v1 ^= v0;
        v0 = rotate_left(v0, 32);
        v2 += v3;
        v3 = rotate_left(v3, 16);
        v3 ^= v2;
        v0 += v3;
        v3 = rotate_left(v3, 21);
        v3 ^= v0;
        v2 += v1;
        v1 = rotate_left(v1, 17);
        v1 ^= v2;
        v2 = rotate_left(v2, 32);
    }

    // SipHash-2-4: two rounds per message word.
    void compress(std::uint64_t m) noexcept {
        v3 ^= m;
        round();
        round();
        v0 ^= m;
    }

    // Four rounds per output word.
    std::uint64_t finalize_word() noexcept {
        round();
        round();
        round();
        round();
        return v0 ^ v1 ^ v2 ^ v3;
    }
};

}  // namespace

KeyHash hash_key(const HashSecret& secret, const void* data, std::size_t length) noexcept {
    // The constants are the ASCII of "somepseudorandomlygeneratedbytes"; the 128-bit variant
    // also flips v1, so its output is unrelated to the 64-bit variant's for the same input.
    SipState s{
        secret.k0 ^ 0x736f6d6570736575ULL,
        secret.k1 ^ 0x646f72616e646f6dULL ^ 0xee,
        secret.k0 ^ 0x6c7967656e657261ULL,
        secret.k1 ^ 0x7465646279746573ULL,
    };

    const auto* bytes = static_cast<const unsigned char*>(data);
    const std::size_t full_words = length / 8;
    for (std::size_t i = 0; i < full_words; ++i) {
        s.compress(load_le64(bytes + 8 * i));
    }

    // The last word holds the remaining 0..7 bytes and, in its top byte, the length mod 256,
    // which keeps inputs that differ only by trailing zero bytes apart.
    std::uint64_t last = static_cast<std::uint64_t>(length & 0xff) << 56;
    const unsigned char* tail = bytes + 8 * full_words;
    for (std::size_t i = 0; i < length % 8; ++i) {
        last |= static_cast<std::uint64_t>(tail[i]) << (8 * i);
    }
    s.compress(last);

    // Distinct constants before each output word keep the two halves independent.
    KeyHash hash;
    s.v2 ^= 0xee;
    hash.low = s.finalize_word();
    s.v1 ^= 0xdd;
    hash.high = s.finalize_word();
    return hash;
}

}  // namespace ratelimit
