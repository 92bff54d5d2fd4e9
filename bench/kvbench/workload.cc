// bench/kvbench/workload.cc - the conversation generator and chunk keys.
#include "workload.h"


#include "hash.h"

namespace kvbench {
namespace {

constexpr uint64_t kVocab = 128256;  // Llama 3

class ConversationSource : public RequestSource {
 public:
  explicit ConversationSource(const Options& o) : o_(o), seed_(chain_seed(o)), streams_(o.streams) {
    for (uint64_t u = 0; u < o.users; ++u) streams_[u % o.streams].users.push_back(User{u, {}, 0});
    for (auto& s : streams_) reset(s);
  }

  bool next(int stream, Request& out) override {
    StreamState& s = streams_[static_cast<size_t>(stream)];
    if (s.users.empty()) return false;
    if (s.next_user == s.users.size()) {
      s.next_user = 0;
      if (s.users[0].round == o_.rounds) {
        if (++s.pass == o_.repeat) {
          s.users.clear();
          return false;
        }
        reset(s);
      }
    }
    User& u = s.users[s.next_user++];
    append_tokens(u.tokens, mix_in(mix_in(seed_, u.id), u.round * 2), message_length(u));
    out.seq = ((s.pass * o_.rounds + u.round) * o_.users) + u.id;
    out.at_secs = -1;
    out.chunks.clear();
    out.prompt_tokens = u.tokens.size();
    uint64_t h = seed_;
    const size_t full = u.tokens.size() / o_.chunk_tokens;
    for (size_t c = 0; c < full; ++c) {
      for (size_t t = c * o_.chunk_tokens; t < (c + 1) * o_.chunk_tokens; ++t) h = mix_in(h, u.tokens[t]);
      out.chunks.push_back(h);
    }
    // The answer becomes part of the next round's prompt.
    append_tokens(u.tokens, mix_in(mix_in(seed_, u.id), u.round * 2 + 1), o_.output_tokens);
    ++u.round;
    return true;
  }

  uint64_t total() const override { return o_.users * o_.rounds * o_.repeat; }

 private:
  struct User {
    uint64_t id;
    std::vector<uint32_t> tokens;  // the conversation so far
    uint64_t round;
  };
  struct StreamState {
    std::vector<User> users;
    size_t next_user = 0;
    uint64_t pass = 0;
  };

  void reset(StreamState& s) {
    s.next_user = 0;
    for (User& u : s.users) {
      u.round = 0;
      u.tokens.clear();
      append_tokens(u.tokens, mix_in(seed_ ^ 0x5157E111ull, u.id % o_.system_prompts), o_.system_tokens);
    }
  }

  uint64_t message_length(const User& u) const {
    Rng rng(mix_in(mix_in(seed_, u.id), 0x1E46 + u.round));
    return o_.user_tokens / 2 + rng.below(o_.user_tokens + 1);
  }

  static void append_tokens(std::vector<uint32_t>& tokens, uint64_t stream_seed, uint64_t n) {
    Rng rng(stream_seed);
    for (uint64_t i = 0; i < n; ++i) tokens.push_back(static_cast<uint32_t>(rng.below(kVocab)));
  }

  const Options& o_;
  const uint64_t seed_;
  std::vector<StreamState> streams_;
};

}  // namespace

uint64_t chain_seed(const Options& o) {
  return mix_in(mix_in(mix64(o.seed), o.chunk_bytes()), o.mode == Mode::kTrace ? o.block_tokens : o.chunk_tokens);
}

std::string chunk_key(const std::string& key_prefix, uint64_t chunk_hash) {
  std::string k;
  k.reserve(key_prefix.size() + 22);
  k += key_prefix;
  k += '@';
  k += hex64(chunk_hash);
  k += "@bf16";
  return k;
}

std::unique_ptr<RequestSource> make_conversation_source(const Options& o) {
  return std::make_unique<ConversationSource>(o);
}

}  // namespace kvbench
