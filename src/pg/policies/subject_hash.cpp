#include "pg/policies/subject_hash.hpp"

namespace ratelimit::pg {

Datum sha256_hex(const char* prefix, const char* bytes, int length) {
    bytea* input = static_cast<bytea*>(palloc(VARHDRSZ + length));
    SET_VARSIZE(input, VARHDRSZ + length);
    memcpy(VARDATA(input), bytes, length);
    bytea* digest = DatumGetByteaPP(DirectFunctionCall1(sha256_bytea, PointerGetDatum(input)));
    const auto* hash = reinterpret_cast<const unsigned char*>(VARDATA_ANY(digest));
    const int hash_length = static_cast<int>(VARSIZE_ANY_EXHDR(digest));
    const int prefix_length = prefix == nullptr ? 0 : static_cast<int>(strlen(prefix)) + 1;
    const int out_length = prefix_length + 2 * hash_length;
    text* out = static_cast<text*>(palloc(VARHDRSZ + out_length));
    SET_VARSIZE(out, VARHDRSZ + out_length);
    char* p = VARDATA(out);
    if (prefix != nullptr) {
        memcpy(p, prefix, prefix_length - 1);
        p[prefix_length - 1] = ':';
        p += prefix_length;
    }
    static const char kHex[] = "0123456789abcdef";
    for (int i = 0; i < hash_length; ++i) {
        *p++ = kHex[hash[i] >> 4];
        *p++ = kHex[hash[i] & 15];
    }
    return PointerGetDatum(out);
}

}  // namespace ratelimit::pg
