// module.cc - stratakv._native: the pybind11 binding of libstratakv (stratakv::Client).
//
// Values and targets are anything py_views.h accepts (bytes, buffers, numpy arrays, torch CPU
// tensors, stratakv.Buffer), or a list/tuple of those as scatter-gather pieces. Every call
// releases the GIL while it talks to the server. Errors raise stratakv.Error, whose message is
// the server's text and whose `kind` is "server", "connection", "protocol" or "usage"; a
// failed key of a batch raises it too, with `key` (the first failed key) and `results` (every
// key's outcome; an Error instance for the failed ones).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <optional>
#include <vector>

#include "py_views.h"
#include "stratakv/client.h"

namespace stratakv_py {
namespace {

using stratakv::Client;
using stratakv::ConstBytes;
using stratakv::MutableBytes;
using stratakv::Result;

py::handle error_type;  // stratakv.Error (kept for the life of the interpreter)

const char* kind_name(stratakv::Error::Kind k) {
  switch (k) {
    case stratakv::Error::Kind::kServer: return "server";
    case stratakv::Error::Kind::kConnection: return "connection";
    case stratakv::Error::Kind::kProtocol: return "protocol";
    case stratakv::Error::Kind::kUsage: return "usage";
  }
  return "server";
}

py::object make_error(const std::string& message, const char* kind) {
  py::object e = error_type(message);
  e.attr("kind") = kind;
  return e;
}

[[noreturn]] void raise(const py::object& e) {
  PyErr_SetObject(error_type.ptr(), e.ptr());
  throw py::error_already_set();
}

// One value or target: its views (GIL held) and its pieces as spans.
struct Pieces {
  std::vector<View> views;
  std::vector<ConstBytes> in;
  std::vector<MutableBytes> out;
  Pieces(py::handle obj, bool writable) {
    if (py::isinstance<py::list>(obj) || py::isinstance<py::tuple>(obj)) {
      for (py::handle p : obj) views.emplace_back(p, writable);
    } else {
      views.emplace_back(obj, writable);
    }
    for (const View& v : views) in.push_back(v.bytes()), out.push_back(v.bytes());
  }
};

stratakv::PutOptions put_options(std::optional<uint64_t> ttl_ms, bool nx, uint32_t stripes) {
  return {.ttl_ms = ttl_ms.value_or(0), .nx = nx, .stripes = stripes};
}

std::vector<std::string> keys_of(const py::sequence& keys) {
  std::vector<std::string> out;
  out.reserve(keys.size());
  for (py::handle k : keys) out.push_back(key_of(k));
  return out;
}

// Raises when a key failed; otherwise converts: put -> bool, get -> int | None.
py::list results(const std::vector<Result>& rs, const std::vector<std::string>& keys, bool get) {
  py::list out;
  py::object first;
  size_t first_at = 0;
  for (size_t i = 0; i < rs.size(); ++i) {
    const Result& r = rs[i];
    if (r.status == Result::Status::kError) {
      py::object e = make_error(r.error, "server");
      if (!first) first = e, first_at = i;
      out.append(e);
    } else if (get) {
      out.append(r.ok() ? py::object(py::int_(r.length)) : py::object(py::none()));
    } else {
      out.append(py::bool_(r.ok()));
    }
  }
  if (first) {
    first.attr("key") = py::bytes(keys[first_at]);
    first.attr("results") = out;
    raise(first);
  }
  return out;
}

class PyBuffer {
 public:
  PyBuffer(stratakv::Buffer b, std::unique_ptr<View> v = nullptr) : buf(std::move(b)), view(std::move(v)) {}
  stratakv::Buffer buf;
  std::unique_ptr<View> view;  // register_buffer: the caller's object, held while this lives
};

std::unique_ptr<Client> make_client(const std::string& url, size_t max_connections,
                                    const std::string& transport, int connect_timeout_ms,
                                    int io_timeout_ms, size_t max_staging_bytes,
                                    std::optional<std::string> password, int cluster_max_attempts,
                                    bool cluster_unix_sockets, uint64_t stripe_ttl_ms,
                                    std::optional<std::string> read_from,
                                    std::optional<std::string> ssl_ca_certs,
                                    std::optional<std::string> ssl_certfile,
                                    std::optional<std::string> ssl_keyfile,
                                    std::optional<std::string> ssl_cert_reqs,
                                    std::optional<bool> ssl_check_hostname) {
  stratakv::Options o;
  // TLS (rediss:// URLs), redis-py's names; None: the URL's ssl_* parameter, else the default.
  if (ssl_ca_certs) o.ssl_ca_certs = *ssl_ca_certs;
  if (ssl_certfile) o.ssl_certfile = *ssl_certfile;
  if (ssl_keyfile) o.ssl_keyfile = *ssl_keyfile;
  if (ssl_cert_reqs) {
    if (*ssl_cert_reqs == "required") o.ssl_verify_peer = true;
    else if (*ssl_cert_reqs == "none") o.ssl_verify_peer = false;
    else throw py::value_error("ssl_cert_reqs must be 'required' or 'none'");
  }
  o.ssl_check_hostname = ssl_check_hostname;
  // None: the URL's ?read_from= (or primary); a name overrides the URL's.
  if (!read_from || *read_from == "primary") o.read_from = stratakv::ReadFrom::kPrimary;
  else if (*read_from == "replicas") o.read_from = stratakv::ReadFrom::kReplicas;
  else if (*read_from == "nearest") o.read_from = stratakv::ReadFrom::kNearest;
  else throw py::value_error("read_from must be 'primary', 'replicas' or 'nearest'");
  o.cluster_max_attempts = cluster_max_attempts;
  o.cluster_unix_sockets = cluster_unix_sockets;
  o.stripe_ttl_ms = stripe_ttl_ms;
  o.max_connections = max_connections;
  o.connect_timeout_ms = connect_timeout_ms;
  o.io_timeout_ms = io_timeout_ms;
  o.max_staging_bytes = max_staging_bytes;
  if (o.initial_staging_bytes > max_staging_bytes) o.initial_staging_bytes = max_staging_bytes;
  if (password) o.password = *password;
  if (transport == "auto") o.transport = stratakv::TransportKind::kAuto;
  else if (transport == "shm") o.transport = stratakv::TransportKind::kShm;
  else if (transport == "resp") o.transport = stratakv::TransportKind::kResp;
  else if (transport == "verbs") o.transport = stratakv::TransportKind::kVerbs;
  else throw py::value_error("transport must be 'auto', 'verbs', 'shm' or 'resp'");
  py::gil_scoped_release unlock;
  return std::make_unique<Client>(url, std::move(o));
}

bool put(Client& c, py::handle key, py::handle value, std::optional<uint64_t> ttl_ms, bool nx,
         uint32_t stripes) {
  const std::string k = key_of(key);
  Pieces p(value, false);
  py::gil_scoped_release unlock;
  return c.put(k, std::span<const ConstBytes>(p.in), put_options(ttl_ms, nx, stripes));
}

// A value of unknown length into a new object made by make(n) (bytes or a numpy array).
template <class Make>
py::object get_new(Client& c, py::handle key, Make&& make) {
  const std::string k = key_of(key);
  py::object result;
  std::optional<size_t> n;
  {
    py::gil_scoped_release unlock;
    n = c.get_with(k, [&](size_t len) {
      py::gil_scoped_acquire lock;
      return make(len, result);
    });
  }
  if (!n) return py::none();
  return result;
}

py::object get(Client& c, py::handle key) {
  return get_new(c, key, [](size_t n, py::object& out) {
    PyObject* b = PyBytes_FromStringAndSize(nullptr, static_cast<Py_ssize_t>(n));
    if (!b) throw py::error_already_set();
    out = py::reinterpret_steal<py::object>(b);
    return MutableBytes(reinterpret_cast<std::byte*>(PyBytes_AS_STRING(b)), n);
  });
}

py::object get_uint8(Client& c, py::handle key) {
  return get_new(c, key, [](size_t n, py::object& out) {
    py::array_t<uint8_t> a(static_cast<py::ssize_t>(n));
    auto* p = reinterpret_cast<std::byte*>(a.mutable_data());
    out = std::move(a);
    return MutableBytes(p, n);
  });
}

py::object get_into(Client& c, py::handle key, py::handle target) {
  const std::string k = key_of(key);
  Pieces p(target, true);
  std::optional<size_t> n;
  {
    py::gil_scoped_release unlock;
    n = c.get_into(k, std::span<const MutableBytes>(p.out));
  }
  return n ? py::object(py::int_(*n)) : py::object(py::none());
}

py::list batch_put(Client& c, const py::sequence& keys, const py::sequence& values,
                   std::optional<uint64_t> ttl_ms, bool nx, uint32_t stripes) {
  if (keys.size() != values.size()) throw py::value_error("batch_put needs as many values as keys");
  std::vector<std::string> ks = keys_of(keys);
  std::vector<Pieces> ps;
  ps.reserve(ks.size());
  for (py::handle v : values) ps.emplace_back(v, false);
  std::vector<stratakv::PutRequest> reqs;
  for (size_t i = 0; i < ks.size(); ++i) reqs.push_back({ks[i], ps[i].in});
  std::vector<Result> rs;
  {
    py::gil_scoped_release unlock;
    rs = c.batch_put(reqs, put_options(ttl_ms, nx, stripes));
  }
  return results(rs, ks, false);
}

py::list batch_get_into(Client& c, const py::sequence& keys, const py::sequence& targets) {
  if (keys.size() != targets.size()) throw py::value_error("batch_get_into needs as many targets as keys");
  std::vector<std::string> ks = keys_of(keys);
  std::vector<Pieces> ps;
  ps.reserve(ks.size());
  for (py::handle t : targets) ps.emplace_back(t, true);
  std::vector<stratakv::GetRequest> reqs;
  for (size_t i = 0; i < ks.size(); ++i) reqs.push_back({ks[i], ps[i].out});
  std::vector<Result> rs;
  {
    py::gil_scoped_release unlock;
    rs = c.batch_get_into(reqs);
  }
  return results(rs, ks, true);
}

// Calls f(span of string_view keys) without the GIL.
template <class F>
auto with_keys(const py::sequence& keys, F&& f) {
  std::vector<std::string> ks = keys_of(keys);
  std::vector<std::string_view> views(ks.begin(), ks.end());
  py::gil_scoped_release unlock;
  return f(std::span<const std::string_view>(views));
}

}  // namespace
}  // namespace stratakv_py

PYBIND11_MODULE(_native, m) {
  using namespace stratakv_py;
  m.doc() = "stratakv._native: the C++ client bound for Python (use the stratakv package)";
  error_type = PyErr_NewExceptionWithDoc(
      "stratakv.Error",
      "A failed stratakv call. str(e) is the server's error text when the server replied one; "
      "e.kind is 'server', 'connection', 'protocol' or 'usage'.",
      PyExc_Exception, nullptr);
  m.attr("Error") = error_type;
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const stratakv::Error& e) {
      PyErr_SetObject(error_type.ptr(), make_error(e.what(), kind_name(e.kind())).ptr());
    }
  });

  py::class_<PyBuffer>(m, "Buffer", py::buffer_protocol(),
                       "Memory known to a Client (alloc_buffer / register_buffer). Supports the "
                       "buffer protocol: memoryview(b), numpy.frombuffer(b), torch.frombuffer(b).")
      .def_buffer([](PyBuffer& b) {
        return py::buffer_info(b.buf.data(), 1, py::format_descriptor<uint8_t>::format(), 1,
                               {static_cast<py::ssize_t>(b.buf.size())}, {py::ssize_t{1}}, false);
      })
      .def("__len__", [](const PyBuffer& b) { return b.buf.size(); })
      .def_property_readonly("zero_copy", [](const PyBuffer& b) { return b.buf.zero_copy(); },
                             "True when transfers from/into it need no staging copy")
      .def_property_readonly("address", [](const PyBuffer& b) { return reinterpret_cast<uintptr_t>(b.buf.data()); });

  py::class_<Client>(m, "Client")
      .def(py::init(&make_client), py::arg("url"), py::kw_only(), py::arg("max_connections") = 8,
           py::arg("transport") = "auto", py::arg("connect_timeout_ms") = 5000,
           py::arg("io_timeout_ms") = 60000, py::arg("max_staging_bytes") = size_t{256} << 20,
           py::arg("password") = py::none(), py::arg("cluster_max_attempts") = 5,
           py::arg("cluster_unix_sockets") = true, py::arg("stripe_ttl_ms") = uint64_t{3600} * 1000,
           py::arg("read_from") = py::none(), py::arg("ssl_ca_certs") = py::none(),
           py::arg("ssl_certfile") = py::none(), py::arg("ssl_keyfile") = py::none(),
           py::arg("ssl_cert_reqs") = py::none(), py::arg("ssl_check_hostname") = py::none())
      .def_property_readonly("transport", [](const Client& c) { return std::string(c.transport()); })
      .def_property_readonly("cluster", &Client::cluster)
      .def("put", &put, py::arg("key"), py::arg("value"), py::arg("ttl_ms") = py::none(), py::arg("nx") = false,
           py::arg("stripes") = 0)
      .def("get", &get, py::arg("key"))
      .def("_get_uint8", &get_uint8, py::arg("key"))
      .def("get_into", &get_into, py::arg("key"), py::arg("target"))
      .def("batch_put", &batch_put, py::arg("keys"), py::arg("values"), py::arg("ttl_ms") = py::none(),
           py::arg("nx") = false, py::arg("stripes") = 0)
      .def("batch_get_into", &batch_get_into, py::arg("keys"), py::arg("targets"))
      .def("exists", [](Client& c, py::handle k) {
        const std::string key = key_of(k);
        py::gil_scoped_release unlock;
        return c.exists(key);
      }, py::arg("key"))
      .def("batch_exists", [](Client& c, const py::sequence& keys) {
        return with_keys(keys, [&](auto ks) { return c.batch_exists(ks); });
      }, py::arg("keys"))
      .def("prefix_match", [](Client& c, const py::sequence& keys, std::optional<uint64_t> pin_ms) {
        return with_keys(keys, [&](auto ks) { return c.prefix_match(ks, pin_ms); });
      }, py::arg("keys"), py::arg("pin_ms") = py::none())
      .def("unpin", [](Client& c, const py::sequence& keys) {
        return with_keys(keys, [&](auto ks) { return c.unpin(ks); });
      }, py::arg("keys"))
      .def("remove", [](Client& c, py::handle k) {
        const std::string key = key_of(k);
        py::gil_scoped_release unlock;
        return c.remove(key);
      }, py::arg("key"))
      .def("batch_remove", [](Client& c, const py::sequence& keys) {
        return with_keys(keys, [&](auto ks) { return c.batch_remove(ks); });
      }, py::arg("keys"))
      .def("scan", [](Client& c, const std::string& pattern) {
        std::vector<std::string> ks;
        {
          py::gil_scoped_release unlock;
          ks = c.scan(pattern);
        }
        py::list out;
        for (const std::string& k : ks) out.append(py::bytes(k));
        return out;
      }, py::arg("pattern"), "Every key matching the glob pattern (SCAN MATCH on every node), as bytes")
      .def("alloc_buffer", [](Client& c, size_t size) { return PyBuffer(c.alloc_buffer(size)); },
           py::arg("size"))
      .def("register_buffer", [](Client& c, py::handle obj) {
        auto v = std::make_unique<View>(obj, true);
        auto b = c.register_buffer(v->bytes().data(), v->bytes().size());
        return PyBuffer(std::move(b), std::move(v));
      }, py::arg("obj"));
}
