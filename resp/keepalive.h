// resp/keepalive.h - a type-erased, move-only owning reference, as the codec needs it.
//
// The parser hands large bulk buffers back with their owner, and the writer holds whatever
// keeps a referenced reply's bytes alive until the socket write completes. resp/ knows no
// value type: a Keepalive is an object pointer and the function that releases it, two words,
// with no allocation of its own. The owner of the object (the server) hands over one reference
// it already counted (tiering::ValueRef::detach) and gets it back or released here.
#pragma once

#include <utility>

namespace resp {

class Keepalive {
 public:
  /// Releases one reference to `object`. Must not throw.
  using Release = void (*)(void* object) noexcept;

  constexpr Keepalive() noexcept = default;
  /// Takes over one reference to `object`, dropped by calling `release(object)` exactly once
  /// (on destruction or reset()). A null `object` holds nothing.
  Keepalive(void* object, Release release) noexcept : object_(object), release_(release) {}
  Keepalive(Keepalive&& o) noexcept
      : object_(std::exchange(o.object_, nullptr)), release_(std::exchange(o.release_, nullptr)) {}
  Keepalive& operator=(Keepalive&& o) noexcept {
    Keepalive(std::move(o)).swap(*this);  // the old reference is released after the swap
    return *this;
  }
  Keepalive(const Keepalive&) = delete;
  Keepalive& operator=(const Keepalive&) = delete;
  ~Keepalive() { reset(); }

  /// The object held (null when empty). The holder keeps it alive.
  void* get() const noexcept { return object_; }
  /// The function that releases it; lets an owner check the object is of its kind.
  Release releaser() const noexcept { return release_; }
  explicit operator bool() const noexcept { return object_ != nullptr; }

  /// Drops the reference now.
  void reset() noexcept {
    if (object_ != nullptr && release_ != nullptr) release_(object_);
    object_ = nullptr;
    release_ = nullptr;
  }
  void swap(Keepalive& o) noexcept {
    std::swap(object_, o.object_);
    std::swap(release_, o.release_);
  }

 private:
  void* object_ = nullptr;
  Release release_ = nullptr;
};

}  // namespace resp
