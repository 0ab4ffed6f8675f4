// SHA-256 against FIPS 180-4's examples and lengths around its padding's block boundaries, and
// the partition key built on it.
#include "ratelimit/partition_key.hpp"

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace ratelimit {
namespace {

std::string hex(const std::uint8_t* bytes, std::size_t length) {
    static const char* const kDigits = "0123456789abcdef";
    std::string text;
    for (std::size_t i = 0; i < length; ++i) {
        text.push_back(kDigits[bytes[i] >> 4]);
        text.push_back(kDigits[bytes[i] & 15]);
    }
    return text;
}

std::string sha256_hex(const std::string& message) {
    return hex(sha256(message.data(), message.size()).data(), 32);
}

TEST(Sha256, FipsExamples) {
    EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    EXPECT_EQ(sha256_hex("abc"),
              "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
              "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    EXPECT_EQ(sha256_hex(std::string(1000000, 'a')),
              "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

// Bytes i % 251: the padding takes one block or two, and the message one block or two.
TEST(Sha256, LengthsAroundTheBlockBoundaries) {
    auto message = [](std::size_t length) {
        std::string bytes;
        for (std::size_t i = 0; i < length; ++i)
            bytes.push_back(static_cast<char>(i % 251));
        return bytes;
    };
    EXPECT_EQ(sha256_hex(message(55)),
              "463eb28e72f82e0a96c0a4cc53690c571281131f672aa229e0d45ae59b598b59");
    EXPECT_EQ(sha256_hex(message(56)),
              "da2ae4d6b36748f2a318f23e7ab1dfdf45acdc9d049bd80e59de82a60895f562");
    EXPECT_EQ(sha256_hex(message(63)),
              "29af2686fd53374a36b0846694cc342177e428d1647515f078784d69cdb9e488");
    EXPECT_EQ(sha256_hex(message(64)),
              "fdeab9acf3710362bd2658cdc9a29e8f9c757fcf9811603a8c447cd1d9151108");
    EXPECT_EQ(sha256_hex(message(119)),
              "da18797ed7c3a777f0847f429724a2d8cd5138e6ed2895c3fa1a6d39d18f7ec6");
    EXPECT_EQ(sha256_hex(message(120)),
              "f52b23db1fbb6ded89ef42a23ce0c8922c45f25c50b568a93bf1c075420bbb7c");
}

TEST(PartitionKey, TheFirstTwelveBytesOfTheHashOfSecretNameZeroAndSubject) {
    std::string seeded;  // the bytes 5eed repeated 16 times, as docs/policies.md sets them
    for (int i = 0; i < 32; ++i)
        seeded.push_back(static_cast<char>(i % 2 == 0 ? 0x5e : 0xed));
    const auto key = partition_key(seeded, "bench.http", "subject-1");
    ASSERT_TRUE(key.has_value());
    EXPECT_EQ(hex(reinterpret_cast<const std::uint8_t*>(key->data()), key->size()),
              "db0c31f82f5aebfa66b86771");
}

TEST(PartitionKey, ASecretShorterThanSixteenBytesGivesNone) {
    EXPECT_FALSE(partition_key(std::string(15, 'x'), "api", "user").has_value());
    EXPECT_TRUE(partition_key(std::string(16, 'x'), "api", "user").has_value());
}

// The zero byte keeps the name and the subject apart; the secret and the name change the key.
TEST(PartitionKey, NameSubjectAndSecretEachChangeTheKey) {
    const std::string secret(32, 's');
    EXPECT_NE(partition_key(secret, "api.a", "bc"), partition_key(secret, "api.ab", "c"));
    EXPECT_NE(partition_key(secret, "api.minute", "u1"), partition_key(secret, "api.hour", "u1"));
    EXPECT_NE(partition_key(secret, "api", "u1"), partition_key(std::string(32, 't'), "api", "u1"));
    EXPECT_EQ(partition_key(secret, "api", "u1"), partition_key(secret, "api", "u1"));
}

}  // namespace
}  // namespace ratelimit
