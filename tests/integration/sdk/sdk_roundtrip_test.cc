// sdk_roundtrip_test.cc - values from 1 byte to 64 MiB, scatter-gather of 1 to 64 pieces,
// batches of 256 keys, mixed with plain RESP SET/GET; byte-exact every time.
#include <sys/resource.h>

#include "sdk_test_util.h"

using namespace sdktest;
using stratakv::ConstBytes;
using stratakv::MutableBytes;
using stratakv::Result;

namespace {

const std::vector<size_t> kSizes = {1, 2, 100, 4095, 4096, 16385, 65536 + 7, 1 << 20,
                                    (4 << 20) + 3, 32 << 20, 64 << 20};

}  // namespace

TEST_CASE("transport follows the URL") {
  auto& kv = client();
  MESSAGE("url " << url() << " transport " << kv.transport());
  CHECK(kv.transport() == (expect_shm() ? "shm" : "resp"));
  CHECK(url().starts_with("rediss://") == tls_mode());  // tls: every payload goes through TLS
  stratakv::Client resp(url(), {.transport = stratakv::TransportKind::kResp});
  CHECK(resp.transport() == "resp");
}

TEST_CASE("put/get from plain memory, 1 B to 64 MiB, read back by SDK and by RESP GET") {
  auto& kv = client();
  Redis redis;
  for (size_t n : kSizes) {
    CAPTURE(n);
    const std::string k = key("plain:" + std::to_string(n));
    std::string v = pattern(n, n);
    CHECK(kv.put(k, v));
    auto got = kv.get(k);
    REQUIRE(got.has_value());
    CHECK((*got == v));
    std::string into(n + 5, 'x');
    auto len = kv.get_into(k, bytes_of(into));
    REQUIRE(len.has_value());
    CHECK(*len == n);
    CHECK(std::memcmp(into.data(), v.data(), n) == 0);
    CHECK(into.substr(n) == "xxxxx");  // nothing past the value is written
    if (n <= (4 << 20) + 3) CHECK((redis.str({"GET", k}) == v));
    kv.remove(k);
  }
}

TEST_CASE("plain-memory puts and gets reuse the staging buffer: no page faults per call") {
  // Issue 17: a staging buffer made anew for each call would fault in 32 MiB (8192 pages) per
  // call. After the first round, which grows it, the rounds fault next to nothing in this
  // process (the server's faults are its own).
  auto& kv = client();
  const size_t n = 32 << 20;
  std::string v = pattern(n, 3);
  std::string into(n, 'x');  // touched once here, reused
  const std::string k = key("staging-reuse");
  auto faults = [] {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return static_cast<long>(u.ru_minflt + u.ru_majflt);
  };
  REQUIRE(kv.put(k, v));
  REQUIRE(kv.get_into(k, bytes_of(into)).has_value());
  const long before = faults();
  const int rounds = 8;
  for (int i = 0; i < rounds; ++i) {
    REQUIRE(kv.put(k, v));
    auto len = kv.get_into(k, bytes_of(into));
    REQUIRE(len.has_value());
    REQUIRE(*len == n);
  }
  const long per_round = (faults() - before) / rounds;
  MESSAGE("page faults per 32 MiB put+get: " << per_round);
  CHECK(per_round < 256);  // a fresh buffer would be 2 x 8192
  CHECK(std::memcmp(into.data(), v.data(), n) == 0);
  kv.remove(k);
}

TEST_CASE("put/get from and into registered buffers, 1 B to 64 MiB") {
  auto& kv = client();
  stratakv::Buffer src = kv.alloc_buffer(64 << 20);
  stratakv::Buffer dst = kv.alloc_buffer((64 << 20) + 4096);
  CHECK(src.zero_copy() == expect_shm());
  Redis redis;
  auto moved = [&](const char* field) { return std::stoull("0" + redis.info_field("fastpath", field)); };
  const uint64_t put0 = moved("kv_put_bytes"), get0 = moved("kv_get_bytes");
  uint64_t total = 0;
  for (size_t n : kSizes) {
    total += n;
    CAPTURE(n);
    const std::string k = key("buf:" + std::to_string(n));
    // at an offset inside the buffer, so descriptors carry nonzero offsets
    const size_t off = n + 4095 <= src.size() ? 4095 : 0;
    auto in = src.span().subspan(off, n);
    fill(in, n + 1);
    CHECK(kv.put(k, ConstBytes(in)));
    auto out = dst.span().subspan(4096 - n % 2, n);
    std::memset(out.data(), 0, n);
    auto len = kv.get_into(k, out);
    REQUIRE(len.has_value());
    CHECK(*len == n);
    CHECK(same(in, out));
    if (n <= 65543) {
      std::string g = redis.str({"GET", k});
      CHECK(same(as_bytes(std::span(g.data(), g.size())), in));
    }
    kv.remove(k);
  }
  if (expect_shm()) {  // the payloads really went out of band
    CHECK(moved("kv_put_bytes") - put0 >= total);
    CHECK(moved("kv_get_bytes") - get0 >= total);
  }
}

TEST_CASE("values written by RESP SET are read by the SDK, and the reverse") {
  auto& kv = client();
  Redis redis;
  for (size_t n : {size_t{1}, size_t{1000}, size_t{300000}, size_t{3} << 20}) {
    CAPTURE(n);
    const std::string a = key("mixed:a:" + std::to_string(n)), b = key("mixed:b:" + std::to_string(n));
    std::string v = pattern(n, 7 * n);
    CHECK(redis.str({"SET", a, v}) == "OK");
    auto got = kv.get(a);
    REQUIRE(got);
    CHECK((*got == v));
    stratakv::Buffer buf = kv.alloc_buffer(n);
    REQUIRE(kv.get_into(a, buf.span()) == n);
    CHECK(same(buf.span(), bytes_of(v)));
    CHECK(kv.put(b, ConstBytes(buf.span())));
    CHECK((redis.str({"GET", b}) == v));
    CHECK(kv.batch_remove(std::vector<std::string_view>{a, b}) == 2);
  }
  CHECK_FALSE(kv.get(key("mixed:never")).has_value());
  std::string small(10, '\0');
  CHECK_FALSE(kv.get_into(key("mixed:never"), bytes_of(small)).has_value());
}

TEST_CASE("scatter-gather: 1 to 64 pieces, from buffers and plain memory, split differently") {
  auto& kv = client();
  stratakv::Buffer buf = kv.alloc_buffer(8 << 20);
  for (size_t pieces : {1, 2, 3, 16, 63, 64}) {
    for (bool registered : {true, false}) {
      CAPTURE(pieces);
      CAPTURE(registered);
      const std::string k = key("sg:" + std::to_string(pieces) + (registered ? ":r" : ":p"));
      // pieces of varied sizes, scattered through the source with gaps between them
      std::string plain(8 << 20, '\0');
      std::span<std::byte> space = registered ? buf.span() : bytes_of(plain);
      fill(space, pieces);
      std::vector<ConstBytes> in;
      std::string expect;
      size_t at = 0;
      for (size_t i = 0; i < pieces; ++i) {
        const size_t len = 1 + (i * 7919 + pieces * 104729) % 60000;
        in.push_back(space.subspan(at, len));
        expect.append(reinterpret_cast<const char*>(space.data() + at), len);
        at += len + 13;
      }
      REQUIRE(kv.put(k, std::span<const ConstBytes>(in)));
      CHECK((kv.get(k).value() == expect));
      // read back scattered into other piece sizes (a window larger than the value)
      std::vector<std::string> outs;
      std::vector<MutableBytes> out;
      size_t window = 0;
      for (size_t i = 0; window < expect.size() + 100; ++i) {
        outs.emplace_back(1 + (i * 31337) % 90000, '\0');
        window += outs.back().size();
      }
      for (auto& o : outs) out.push_back(bytes_of(o));
      auto len = kv.get_into(k, std::span<const MutableBytes>(out));
      REQUIRE(len == expect.size());
      std::string joined;
      for (auto& o : outs) joined += o;
      CHECK((joined.substr(0, expect.size()) == expect));
      kv.remove(k);
    }
  }
}

TEST_CASE("batches of 256 keys: put, get, a missing key and a small window fail only themselves") {
  auto& kv = client();
  constexpr size_t kKeys = 256;
  std::vector<std::string> keys;
  std::vector<std::string> values;
  for (size_t i = 0; i < kKeys; ++i) {
    keys.push_back(key("batch:" + std::to_string(i)));
    values.push_back(pattern(1 + (i * 2654435761u) % 200000, i + 99));
  }
  std::vector<std::string_view> kv_keys(keys.begin(), keys.end());
  std::vector<ConstBytes> vals;
  for (auto& v : values) vals.push_back(stratakv::as_bytes(v));
  auto put = kv.batch_put(kv_keys, vals);
  REQUIRE(put.size() == kKeys);
  for (auto& r : put) CHECK(r.ok());

  // into registered memory, packed one after another
  size_t total = 0;
  for (auto& v : values) total += v.size();
  stratakv::Buffer buf = kv.alloc_buffer(total + kKeys);
  std::vector<MutableBytes> dsts;
  size_t at = 0;
  for (auto& v : values) dsts.push_back(buf.span().subspan(at, v.size())), at += v.size() + 1;
  kv.remove(keys[17]);                      // missing
  dsts[42] = dsts[42].first(dsts[42].size() - 1);  // one byte too small
  auto got = kv.batch_get_into(kv_keys, dsts);
  REQUIRE(got.size() == kKeys);
  for (size_t i = 0; i < kKeys; ++i) {
    CAPTURE(i);
    if (i == 17) {
      CHECK(got[i].status == Result::Status::kMiss);
    } else if (i == 42) {
      CHECK(got[i].status == Result::Status::kError);
      CHECK(got[i].error == "ERR window of " + std::to_string(values[i].size() - 1) +
                                " bytes is smaller than the value (" + std::to_string(values[i].size()) +
                                " bytes)");
    } else {
      REQUIRE(got[i].ok());
      CHECK(got[i].length == values[i].size());
      CHECK(same(dsts[i], stratakv::as_bytes(values[i])));
    }
  }
  // into plain memory
  std::vector<std::string> plain(kKeys);
  std::vector<MutableBytes> pdst;
  for (size_t i = 0; i < kKeys; ++i) plain[i].assign(values[i].size(), '\0'), pdst.push_back(bytes_of(plain[i]));
  got = kv.batch_get_into(kv_keys, pdst);
  for (size_t i = 0; i < kKeys; ++i)
    if (i != 17) CHECK((got[i].ok() && plain[i] == values[i]));
  auto ex = kv.batch_exists(kv_keys);
  for (size_t i = 0; i < kKeys; ++i) CHECK(ex[i] == (i != 17));
  CHECK(kv.batch_remove(kv_keys) == kKeys - 1);
}

TEST_CASE("a batch larger than the staging limit is split and still byte-exact") {
  stratakv::Client kv(url(), {.initial_staging_bytes = 1 << 20, .max_staging_bytes = 4 << 20});
  std::vector<std::string> keys, values;
  for (size_t i = 0; i < 24; ++i) {
    keys.push_back(key("split:" + std::to_string(i)));
    values.push_back(pattern(i == 5 ? (6 << 20) : (700 << 10) + i, 3 * i));  // #5 > the limit
  }
  std::vector<std::string_view> ks(keys.begin(), keys.end());
  std::vector<ConstBytes> vs;
  for (auto& v : values) vs.push_back(stratakv::as_bytes(v));
  for (auto& r : kv.batch_put(ks, vs)) CHECK(r.ok());
  std::vector<std::string> outs(keys.size());
  std::vector<MutableBytes> ds;
  for (size_t i = 0; i < keys.size(); ++i) outs[i].assign(values[i].size(), '\0'), ds.push_back(bytes_of(outs[i]));
  auto got = kv.batch_get_into(ks, ds);
  for (size_t i = 0; i < keys.size(); ++i) CHECK((got[i].ok() && outs[i] == values[i]));
  CHECK((kv.get(keys[5]).value() == values[5]));
  kv.batch_remove(ks);
}
