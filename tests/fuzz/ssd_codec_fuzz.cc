// tests/fuzz/ssd_codec_fuzz.cc - libFuzzer target of the SSD store's record codec
// (tiering/ssd_store_codec.h, header-only). The input's first byte cuts it into a record key,
// a header value and an order key; each is decoded from a heap copy of exactly its size, and
// what decodes encodes back to the same bytes.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "tiering/ssd_store_codec.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace codec = tiering::ssd_codec;
  if (size < 1) return 0;
  const size_t cut = std::min<size_t>(data[0] % 40, size - 1);
  const std::string rk(reinterpret_cast<const char*>(data + 1), cut);
  const std::string rest(reinterpret_cast<const char*>(data + 1 + cut), size - 1 - cut);

  uint16_t slot = 0;
  std::string_view key;
  if (codec::decode_record_key(rocksdb::Slice(rk), &slot, &key)) {
    CHECK(codec::record_key(slot, key) == rk);
    CHECK(codec::encode_slot(slot) == rk.substr(0, codec::kSlotBytes));
  } else {
    CHECK(rk.size() < codec::kSlotBytes);
  }

  const std::string hv = rest.substr(0, std::min(rest.size(), codec::kHeaderSize));
  codec::Header h;
  if (codec::decode(rocksdb::Slice(hv), &h)) {
    CHECK(codec::encode(h) == hv);
  } else {
    CHECK(hv.size() != codec::kHeaderSize);
  }

  const std::string ok = rest.substr(std::min(rest.size(), codec::kHeaderSize));
  const uint64_t seq = codec::decode_seq(rocksdb::Slice(ok));
  if (ok.size() >= 8) CHECK(codec::encode_seq(seq) == ok.substr(0, 8));
  CHECK(codec::checksum(ok.data(), ok.size()) == codec::checksum(ok.data(), ok.size()));
  return 0;
}
