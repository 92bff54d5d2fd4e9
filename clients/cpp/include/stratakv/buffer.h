// stratakv/buffer.h - memory a Client can move values from and into.
#pragma once

#include <cstddef>
#include <memory>
#include <span>

namespace stratakv {

namespace detail {
struct BufferState;
}

/// A piece of memory known to a Client: made by `Client::alloc_buffer` (registered memory:
/// on the shm transport a memfd mapping that the server maps too) or `Client::register_buffer`
/// (caller memory, not owned).
///
/// A Buffer is a shared handle: copies name the same memory, which is unmapped (and, on the
/// shm transport, unregistered from the server's connections) when the last copy is
/// destroyed. It may outlive its Client; it is then plain memory. Any span inside `span()` can
/// be passed to the Client's calls, which recognise it by address: transfers from and into a
/// buffer with `zero_copy()` move the bytes once, between this memory and the value's home in
/// the server. Reading and writing the bytes while a transfer into or from them runs is the
/// caller's race, as with any memory.
///
/// Thread-safety: a Buffer handle may be copied and destroyed from any thread.
class Buffer {
 public:
  Buffer() = default;

  /// First byte; null for an empty handle.
  std::byte* data() const noexcept;
  /// Size in bytes.
  size_t size() const noexcept;
  std::span<std::byte> span() const noexcept { return {data(), size()}; }
  /// True when transfers from and into this memory need no staging copy in the client
  /// (alloc_buffer on shm; false for register_buffer on shm, and on the RESP transport the
  /// payload travels in the socket either way).
  bool zero_copy() const noexcept;
  explicit operator bool() const noexcept { return state_ != nullptr; }

 private:
  friend class Client;
  explicit Buffer(std::shared_ptr<detail::BufferState> s) : state_(std::move(s)) {}
  std::shared_ptr<detail::BufferState> state_;
};

}  // namespace stratakv
