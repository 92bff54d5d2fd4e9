// tests/unit/test_keepalive.h - a resp::Keepalive over a std::shared_ptr, for the codec's tests:
// the keepalive holds one count of the shared_ptr, so use_count() shows what the parser and the
// writer still hold. (The server's keepalives hold a ValueRef's count directly, with no box.)
#pragma once

#include <memory>
#include <utility>

#include "resp/keepalive.h"

template <class T>
resp::Keepalive keep(std::shared_ptr<T> p) {
  return resp::Keepalive(new std::shared_ptr<T>(std::move(p)),
                         [](void* box) noexcept { delete static_cast<std::shared_ptr<T>*>(box); });
}

/// The shared_ptr inside a keepalive made by keep<T>().
template <class T>
const std::shared_ptr<T>& kept(const resp::Keepalive& k) {
  return *static_cast<const std::shared_ptr<T>*>(k.get());
}
