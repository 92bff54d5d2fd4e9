// py_views.h - the memory of Python objects as byte spans, for the stratakv module.
//
// Accepted: any object with the buffer protocol (bytes, bytearray, memoryview, numpy arrays,
// stratakv.Buffer), which must be C-contiguous; and torch CPU tensors (anything with
// data_ptr/element_size/numel/is_contiguous and device.type == "cpu"), which must be
// contiguous. A View holds the object's buffer until it is destroyed; create and destroy it
// with the GIL held.
#pragma once

#include <pybind11/pybind11.h>

#include <cstddef>
#include <span>
#include <string>

namespace stratakv_py {

namespace py = pybind11;

class View {
 public:
  View(py::handle obj, bool writable) {
    if (PyObject_CheckBuffer(obj.ptr())) {
      const int flags = PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0);
      if (PyObject_GetBuffer(obj.ptr(), &view_, flags) != 0) throw py::error_already_set();
      has_view_ = true;
      data_ = static_cast<std::byte*>(view_.buf);
      size_ = static_cast<size_t>(view_.len);
      return;
    }
    if (py::hasattr(obj, "data_ptr") && py::hasattr(obj, "element_size") && py::hasattr(obj, "device")) {
      if (py::str(obj.attr("device").attr("type")).cast<std::string>() != "cpu")
        throw py::value_error("only CPU tensors can be stored or filled (move it with .cpu())");
      if (!obj.attr("is_contiguous")().cast<bool>())
        throw py::value_error("the tensor must be contiguous (use .contiguous())");
      keep_ = py::reinterpret_borrow<py::object>(obj);
      data_ = reinterpret_cast<std::byte*>(obj.attr("data_ptr")().cast<uintptr_t>());
      size_ = obj.attr("numel")().cast<size_t>() * obj.attr("element_size")().cast<size_t>();
      return;
    }
    throw py::type_error(std::string("expected bytes, a buffer (bytearray, memoryview, numpy array, "
                                     "stratakv.Buffer) or a torch CPU tensor, not ") +
                         Py_TYPE(obj.ptr())->tp_name);
  }
  ~View() {
    if (has_view_) PyBuffer_Release(&view_);
  }
  View(View&& o) noexcept : view_(o.view_), has_view_(o.has_view_), keep_(std::move(o.keep_)),
                            data_(o.data_), size_(o.size_) {
    o.has_view_ = false;
  }
  View(const View&) = delete;
  View& operator=(const View&) = delete;
  View& operator=(View&&) = delete;

  std::span<std::byte> bytes() const { return {data_, size_}; }

 private:
  Py_buffer view_{};
  bool has_view_ = false;
  py::object keep_;
  std::byte* data_ = nullptr;
  size_t size_ = 0;
};

/// A key given as str (UTF-8) or bytes.
inline std::string key_of(py::handle k) {
  if (PyBytes_Check(k.ptr())) return std::string(PyBytes_AS_STRING(k.ptr()), PyBytes_GET_SIZE(k.ptr()));
  if (PyUnicode_Check(k.ptr())) return k.cast<std::string>();
  throw py::type_error(std::string("a key must be str or bytes, not ") + Py_TYPE(k.ptr())->tp_name);
}

}  // namespace stratakv_py
