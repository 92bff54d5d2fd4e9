// rdma/verbs_transport.cc - addresses, MTUs, completion texts and RDMA segment resolution.
// VerbsDevice is in verbs_device.cc, VerbsEndpoint in verbs_endpoint.cc.
#include "rdma/verbs_transport.h"

namespace rdma {

std::string QpAddress::gid_hex() const {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string s(32, '0');
  for (size_t i = 0; i < gid.size(); ++i) {
    s[2 * i] = kDigits[gid[i] >> 4];
    s[2 * i + 1] = kDigits[gid[i] & 0xf];
  }
  return s;
}

bool QpAddress::parse_gid(std::string_view hex, std::array<uint8_t, 16>& gid) {
  if (hex.size() != 32) return false;
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::array<uint8_t, 16> out{};
  for (size_t i = 0; i < out.size(); ++i) {
    const int hi = nibble(hex[2 * i]), lo = nibble(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    out[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  gid = out;
  return true;
}

uint32_t mtu_bytes(ibv_mtu mtu) {
  switch (mtu) {
    case IBV_MTU_256: return 256;
    case IBV_MTU_512: return 512;
    case IBV_MTU_1024: return 1024;
    case IBV_MTU_2048: return 2048;
    case IBV_MTU_4096: return 4096;
  }
  return 0;
}

ibv_mtu mtu_from_bytes(uint32_t bytes) {
  switch (bytes) {
    case 256: return IBV_MTU_256;
    case 512: return IBV_MTU_512;
    case 1024: return IBV_MTU_1024;
    case 2048: return IBV_MTU_2048;
    case 4096: return IBV_MTU_4096;
  }
  return static_cast<ibv_mtu>(0);
}

const char* wc_status_text(ibv_wc_status status) {
  switch (status) {
    case IBV_WC_SUCCESS: return "success";
    case IBV_WC_LOC_LEN_ERR: return "local length error";
    case IBV_WC_LOC_QP_OP_ERR: return "local queue pair operation error";
    case IBV_WC_LOC_PROT_ERR: return "local protection error";
    case IBV_WC_WR_FLUSH_ERR: return "work request flushed (queue pair in error state)";
    case IBV_WC_REM_INV_REQ_ERR: return "remote invalid request";
    case IBV_WC_REM_ACCESS_ERR: return "remote access error";
    case IBV_WC_REM_OP_ERR: return "remote operation error";
    case IBV_WC_RETRY_EXC_ERR: return "transport retry counter exceeded (peer unreachable)";
    case IBV_WC_RNR_RETRY_EXC_ERR: return "receiver-not-ready retry counter exceeded";
    case IBV_WC_FATAL_ERR: return "fatal error";
    case IBV_WC_GENERAL_ERR: return "general error";
    default: return "unexpected completion status";
  }
}

bool resolve_remote(const SegmentTable& table, std::span<const Descriptor> sgl,
                    std::vector<RemotePiece>& out, uint64_t& total, std::string& error) {
  out.clear();
  out.reserve(sgl.size());
  total = 0;
  for (const Descriptor& d : sgl) {
    const Segment* s = table.check(d, SegmentKind::kVerbs, error);
    if (s == nullptr) return false;
    if (!add_length(total, d.length, error)) return false;
    out.push_back({s->remote_addr + d.offset, s->rkey, d.length});
  }
  return true;
}

}  // namespace rdma
