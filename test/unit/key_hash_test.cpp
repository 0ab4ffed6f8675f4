#include "ratelimit/key_hash.hpp"

#include <gtest/gtest.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace ratelimit {
namespace {

// The SipHash-2-4 128-bit test vectors of the reference implementation (vectors_sip128 in its
// vectors.h), one hex string of the 16 output bytes in order per row: row i is the output for
// the message 00 01 .. (i-1) under the key 00 01 .. 0f.
constexpr const char* kSip128Vectors[64] = {
    "a3817f04ba25a8e66df67214c7550293", "da87c1d86b99af44347659119b22fc45",
    "8177228da4a45dc7fca38bdef60affe4", "9c70b60c5267a94e5f33b6b02985ed51",
    "f88164c12d9c8faf7d0f6e7c7bcd5579", "1368875980776f8854527a07690e9627",
    "14eeca338b208613485ea0308fd7a15e", "a1f1ebbed8dbc153c0b84aa61ff08239",
    "3b62a9ba6258f5610f83e264f31497b4", "264499060ad9baabc47f8b02bb6d71ed",
    "00110dc378146956c95447d3f3d0fbba", "0151c568386b6677a2b4dc6f81e5dc18",
    "d626b266905ef35882634df68532c125", "9869e247e9c08b10d029934fc4b952f7",
    "31fcefac66d7de9c7ec7485fe4494902", "5493e99933b0a8117e08ec0f97cfc3d9",
    "6ee2a4ca67b054bbfd3315bf85230577", "473d06e8738db89854c066c47ae47740",
    "a426e5e423bf4885294da481feaef723", "78017731cf65fab074d5208952512eb1",
    "9e25fc833f2290733e9344a5e83839eb", "568e495abe525a218a2214cd3e071d12",
    "4a29b54552d16b9a469c10528eff0aae", "c9d184ddd5a9f5e0cf8ce29a9abf691c",
    "2db479ae78bd50d8882a8a178a6132ad", "8ece5f042d5e447b5051b9eacb8d8f6f",
    "9c0b53b4b3c307e87eaee08678141f66", "abf248af69a6eae4bfd3eb2f129eeb94",
    "0664da1668574b88b935f3027358aef4", "aa4b9dc4bf337de90cd4fd3c467c6ab7",
    "ea5c7f471faf6bde2b1ad7d4686d2287", "2939b0183223fafc1723de4f52c43d35",
    "7c3956ca5eeafc3e363e9d556546eb68", "77c6077146f01c32b6b69d5f4ea9ffcf",
    "37a6986cb8847edf0925f0f1309b54de", "a705f0e69da9a8f907241a2e923c8cc8",
    "3dc47d1f29c448461e9e76ed904f6711", "0d62bf01e6fc0e1a0d3c4751c5d3692b",
    "8c03468bca7c669ee4fd5e084bbee7b5", "528a5bb93baf2c9c4473cce5d0d22bd9",
    "df6a301e95c95dad97ae0cc8c6913bd8", "801189902c857f39e73591285e70b6db",
    "e617346ac9c231bb3650ae34ccca0c5b", "27d93437efb721aa401821dcec5adf89",
    "89237d9ded9c5e78d8b1c9b166cc7342", "4a6d8091bf5e7d651189fa94a250b14c",
    "0e33f96055e7ae893ffc0e3dcf492902", "e61c432b720b19d18ec8d84bdc63151b",
    "f7e5aef549f782cf379055a608269b16", "438d030fd0b7a54fa837f2ad201a6403",
    "a590d3ee4fbf04e3247e0d27f286423f", "5fe2c1a172fe93c4b15cd37caef9f538",
    "2c97325cbd06b36eb2133dd08b3a017c", "92c814227a6bca949ff0659f002ad39e",
    "dce850110bd8328cfbd50841d6911d87", "67f14984c7da791248e32bb5922583da",
    "1938f2cf72d54ee97e94166fa91d2a36", "74481e9646ed49fe0f6224301604698e",
    "57fca5de98a9d6d8006438d0583d8a1d", "9fecde1cefdc1cbed4763674d9575359",
    "e3040c00eb28f15366ca73cbd872e740", "7697009a6a831dfecca91c5993670f7a",
    "5853542321f567a005d547a4f04759bd", "5150d1772f50834a503e069a973fbd7c",
};

// Little-endian, as the interface defines both the secret and the hash.
std::uint64_t le64(const std::uint8_t* p) {
    std::uint64_t word = 0;
    for (int i = 7; i >= 0; --i) {
        word = (word << 8) | p[i];
    }
    return word;
}

int hex_digit(char c) {
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    ADD_FAILURE() << "bad hex digit " << c;
    return 0;
}

// The expected hash of row `length` of the table: bytes 0..7 little-endian in `low`, 8..15 in
// `high`.
KeyHash expected_hash(std::size_t length) {
    const std::string hex = kSip128Vectors[length];
    EXPECT_EQ(hex.size(), 32u) << "row " << length;
    std::uint8_t bytes[16] = {};
    for (std::size_t i = 0; i < 16 && 2 * i + 1 < hex.size(); ++i) {
        bytes[i] =
            static_cast<std::uint8_t>(hex_digit(hex[2 * i]) * 16 + hex_digit(hex[2 * i + 1]));
    }
    KeyHash hash;
    hash.low = le64(bytes);
    hash.high = le64(bytes + 8);
    return hash;
}

// The key of the reference vectors, 00 01 .. 0f.
HashSecret reference_secret() {
    std::uint8_t key[16];
    for (int i = 0; i < 16; ++i) {
        key[i] = static_cast<std::uint8_t>(i);
    }
    return HashSecret{le64(key), le64(key + 8)};
}

// The first row worked by hand, so a mistake in the parsing above cannot hide one in the hash.
TEST(KeyHash, ExpectedHashReadsBytesLittleEndian) {
    const KeyHash first = expected_hash(0);
    EXPECT_EQ(first.low, 0xe6a825ba047f81a3ULL);
    EXPECT_EQ(first.high, 0x930255c71472f66dULL);
}

TEST(KeyHash, MatchesAllReferenceVectors) {
    const HashSecret secret = reference_secret();
    std::uint8_t message[64];
    for (int i = 0; i < 64; ++i) {
        message[i] = static_cast<std::uint8_t>(i);
    }
    int checked = 0;
    for (std::size_t length = 0; length < 64; ++length) {
        const KeyHash expected = expected_hash(length);
        const KeyHash actual = hash_key(secret, message, length);
        EXPECT_EQ(actual.low, expected.low) << "message length " << length;
        EXPECT_EQ(actual.high, expected.high) << "message length " << length;
        EXPECT_TRUE(actual == expected);
        ++checked;
    }
    EXPECT_EQ(checked, 64);
}

// Loads assemble words from bytes, so a message at an odd address gives the same answer.
TEST(KeyHash, MisalignedInputGivesTheSameHash) {
    const HashSecret secret = reference_secret();
    std::array<std::uint8_t, 65> buffer{};
    for (int i = 0; i < 64; ++i) {
        buffer[i + 1] = static_cast<std::uint8_t>(i);
    }
    for (std::size_t length = 0; length < 64; ++length) {
        const KeyHash expected = expected_hash(length);
        EXPECT_EQ(hash_key(secret, buffer.data() + 1, length), expected) << "length " << length;
    }
}

TEST(KeyHash, EmptyInputMayBeNull) {
    const HashSecret secret = reference_secret();
    const KeyHash expected = expected_hash(0);
    EXPECT_EQ(hash_key(secret, nullptr, 0), expected);
}

TEST(KeyHash, DifferentSecretsGiveDifferentHashes) {
    const std::string key = "user:42:login";
    const HashSecret a{0x0706050403020100ULL, 0x0f0e0d0c0b0a0908ULL};
    const HashSecret b{0x0706050403020101ULL, 0x0f0e0d0c0b0a0908ULL};  // k0 differs in one bit
    const HashSecret c{0x0706050403020100ULL, 0x8f0e0d0c0b0a0908ULL};  // k1 differs in one bit
    const KeyHash ha = hash_key(a, key.data(), key.size());
    const KeyHash hb = hash_key(b, key.data(), key.size());
    const KeyHash hc = hash_key(c, key.data(), key.size());
    EXPECT_NE(ha, hb);
    EXPECT_NE(ha, hc);
    EXPECT_NE(hb, hc);
    // Both halves change, not only one of them.
    EXPECT_NE(ha.low, hb.low);
    EXPECT_NE(ha.high, hb.high);
    // The same secret and key always give the same hash.
    EXPECT_EQ(hash_key(a, key.data(), key.size()), ha);
}

TEST(KeyHash, LengthIsPartOfTheInput) {
    const HashSecret secret{0x243f6a8885a308d3ULL, 0x13198a2e03707344ULL};
    const std::string key = "api-key";
    std::string padded = key;
    padded.push_back('\0');
    ASSERT_EQ(padded.size(), key.size() + 1);
    EXPECT_NE(hash_key(secret, key.data(), key.size()),
              hash_key(secret, padded.data(), padded.size()));

    // Also across a word boundary (7, 8 and 9 bytes) and for the empty key.
    const std::string seven(7, 'x');
    std::string eight = seven + '\0';
    std::string nine = eight + '\0';
    const KeyHash h7 = hash_key(secret, seven.data(), seven.size());
    const KeyHash h8 = hash_key(secret, eight.data(), eight.size());
    const KeyHash h9 = hash_key(secret, nine.data(), nine.size());
    EXPECT_NE(h7, h8);
    EXPECT_NE(h8, h9);
    EXPECT_NE(h7, h9);
    const char zero = '\0';
    EXPECT_NE(hash_key(secret, nullptr, 0), hash_key(secret, &zero, 1));
}

TEST(KeyHash, EqualityComparesBothHalves) {
    const KeyHash a{1, 2};
    EXPECT_TRUE(a == (KeyHash{1, 2}));
    EXPECT_FALSE(a != (KeyHash{1, 2}));
    EXPECT_TRUE(a != (KeyHash{1, 3}));
    EXPECT_TRUE(a != (KeyHash{0, 2}));
    EXPECT_FALSE(a == (KeyHash{2, 1}));
}

}  // namespace
}  // namespace ratelimit
