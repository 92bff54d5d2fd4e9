// Unit tests of what cluster_etcd does without a server: splitting the watch stream into JSON
// objects (cluster/json_stream.h) and the gateway's encodings (cluster/etcd_transport.h).
#include <doctest.h>

#include <string>
#include <vector>

#include "cluster/etcd_transport.h"
#include "cluster/json_stream.h"

using cluster::JsonStream;
namespace detail = cluster::etcd_detail;

namespace {

const std::string kStream =
    "{\"result\":{\"created\":true}}\n"
    "{\"result\":{\"events\":[{\"kv\":{\"key\":\"YQ==\",\"value\":\"e30=\"}}]}}\r\n"
    "  {\"s\":\"braces } { ] [ and \\\"quotes\\\" and \\\\\"}[1,[2,{\"x\":3}]]"
    "{\"error\":{\"grpc_code\":14,\"message\":\"etcdserver: no leader\"}}";
const std::vector<std::string> kObjects = {
    "{\"result\":{\"created\":true}}",
    "{\"result\":{\"events\":[{\"kv\":{\"key\":\"YQ==\",\"value\":\"e30=\"}}]}}",
    "{\"s\":\"braces } { ] [ and \\\"quotes\\\" and \\\\\"}",
    "[1,[2,{\"x\":3}]]",
    "{\"error\":{\"grpc_code\":14,\"message\":\"etcdserver: no leader\"}}"};

}  // namespace

TEST_CASE("JsonStream: several objects in one chunk") {
  JsonStream s;
  std::vector<std::string> out;
  s.feed(kStream, out);
  CHECK(out == kObjects);
  CHECK(s.buffered() == 0);
  CHECK(s.skipped() == 5);  // "\n", "\r\n", two spaces
}

TEST_CASE("JsonStream: objects cut at every byte boundary") {
  for (size_t cut = 0; cut <= kStream.size(); ++cut) {
    CAPTURE(cut);
    JsonStream s;
    std::vector<std::string> out;
    s.feed(kStream.substr(0, cut), out);
    s.feed(kStream.substr(cut), out);
    CHECK(out == kObjects);
  }
  JsonStream s;  // one byte at a time
  std::vector<std::string> out;
  for (char c : kStream) s.feed(std::string(1, c), out);
  CHECK(out == kObjects);
}

TEST_CASE("JsonStream: an incomplete object stays buffered; stray text is skipped") {
  JsonStream s;
  std::vector<std::string> out;
  s.feed("404 page not found\n{\"a\":", out);
  CHECK(out.empty());
  CHECK(s.buffered() == 5);
  CHECK(s.skipped() == 19);
  s.feed("\"}\"}", out);
  CHECK(out == std::vector<std::string>{"{\"a\":\"}\"}"});
}

TEST_CASE("base64 as the gateway uses it") {
  for (const std::string& s : {std::string(), std::string("f"), std::string("fo"), std::string("foo"),
                               std::string("foob"), std::string("\0\xff\x80 bin", 7)})
    CHECK(detail::base64_decode(detail::base64_encode(s)) == s);
  CHECK(detail::base64_encode("foo") == "Zm9v");
  CHECK(detail::base64_encode("fo") == "Zm8=");
  CHECK(detail::base64_encode("/stratakv/x") == "L3N0cmF0YWt2L3g=");
  CHECK(detail::base64_decode("Zm8") == "fo");  // padding optional
  CHECK_THROWS_AS(detail::base64_decode("Zm9v!"), cluster::EtcdError);
}

TEST_CASE("prefix_range_end as clientv3's GetPrefixRangeEnd") {
  CHECK(detail::prefix_range_end("/a/") == "/a0");
  CHECK(detail::prefix_range_end("ab\xff") == "ac");
  CHECK(detail::prefix_range_end("\xff\xff") == std::string(1, '\0'));
  CHECK(detail::prefix_range_end("") == std::string(1, '\0'));
}

TEST_CASE("gateway replies: 64-bit integers as strings, errors in both forms") {
  using Json = detail::Json;
  const Json kv = Json::parse(R"({"key":"Zm9v","create_revision":"2","mod_revision":"9223372036854775807",
                                  "version":"1","lease":"7587869384023918346"})");
  const cluster::KeyValue d = detail::decode_kv(kv);
  CHECK(d.key == "foo");
  CHECK(d.value.empty());  // an empty value is left out
  CHECK(d.mod_revision == INT64_MAX);
  CHECK(d.lease == 7587869384023918346);
  CHECK(detail::int_field(Json::parse(R"({"TTL":5})"), "TTL") == 5);
  CHECK(detail::int_field(Json::parse("{}"), "TTL") == 0);
  CHECK_THROWS_AS(detail::int_field(Json::parse(R"({"TTL":"x"})"), "TTL"), cluster::EtcdError);

  int code = 0;
  std::string message;
  CHECK(detail::error_of(Json::parse(R"({"error":"etcdserver: invalid auth token","code":16})"), code, message));
  CHECK(code == 16);
  CHECK(message == "etcdserver: invalid auth token");
  CHECK(detail::error_of(Json::parse(R"({"error":{"grpc_code":14,"http_code":503,"message":"no leader"}})"),
                         code, message));
  CHECK(code == 14);
  CHECK(message == "no leader");
  CHECK_FALSE(detail::error_of(Json::parse(R"({"header":{}})"), code, message));
}

TEST_CASE("parse_endpoints: comma-separated, trimmed, http:// where no scheme") {
  using V = std::vector<std::string>;
  CHECK(cluster::parse_endpoints("") == V{});
  CHECK(cluster::parse_endpoints("127.0.0.1:2379") == V{"http://127.0.0.1:2379"});
  CHECK(cluster::parse_endpoints(" a:1 , https://b:2,,c:3 ") ==
        V{"http://a:1", "https://b:2", "http://c:3"});
  CHECK(cluster::parse_endpoints(",") == V{});
}
