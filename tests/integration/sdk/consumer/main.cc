// An application of the installed libstratakv: runs without a server (a bad URL must throw
// stratakv::Error of kind kUsage), or, given a URL, stores and reads back one value.
#include <stratakv/client.h>

#include <cstdio>
#include <cstring>

int main(int argc, char** argv) {
  try {
    stratakv::Client bad("nope://");
    return 1;
  } catch (const stratakv::Error& e) {
    if (e.kind() != stratakv::Error::Kind::kUsage) return 1;
  }
  if (argc > 1) {
    stratakv::Client kv(argv[1]);
    stratakv::Buffer buf = kv.alloc_buffer(1 << 20);
    std::memset(buf.data(), 7, buf.size());
    kv.put("consumer", stratakv::ConstBytes(buf.span()));
    auto v = kv.get("consumer");
    if (!v || v->size() != buf.size() || (*v)[123] != 7) return 1;
    std::printf("%s ok\n", std::string(kv.transport()).c_str());
  }
  std::printf("consumer ok\n");
  return 0;
}
