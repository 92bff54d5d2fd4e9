// tests/fakes/faulty_fs.cc - FaultyFs: the switches, and the file wrappers that consult them.
#include "tests/fakes/faulty_fs.h"

#include <string_view>
#include <utility>

namespace fakes {
namespace {

using rocksdb::IODebugContext;
using rocksdb::IOOptions;
using rocksdb::IOStatus;
using rocksdb::Slice;
using Op = FaultyFs::Op;

bool ends_with(const std::string& s, std::string_view tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// A writable file whose appends, flushes and syncs may fail. Close and the rest pass through.
class FaultyWritableFile : public rocksdb::FSWritableFileOwnerWrapper {
 public:
  FaultyWritableFile(std::unique_ptr<rocksdb::FSWritableFile> f, std::string name,
                     std::shared_ptr<FaultyFs::State> state)
      : FSWritableFileOwnerWrapper(std::move(f)),
        name_(std::move(name)),
        kind_(FaultyFs::kind_of(name_)),
        state_(std::move(state)) {}

  IOStatus Append(const Slice& data, const IOOptions& o, IODebugContext* dbg) override {
    IOStatus s;
    if (state_->should_fail(Op::kWrite, kind_, name_, &s)) return s;
    return FSWritableFileOwnerWrapper::Append(data, o, dbg);
  }
  IOStatus Append(const Slice& data, const IOOptions& o,
                  const rocksdb::DataVerificationInfo& info, IODebugContext* dbg) override {
    IOStatus s;
    if (state_->should_fail(Op::kWrite, kind_, name_, &s)) return s;
    return FSWritableFileOwnerWrapper::Append(data, o, info, dbg);
  }
  IOStatus PositionedAppend(const Slice& data, uint64_t off, const IOOptions& o,
                            IODebugContext* dbg) override {
    IOStatus s;
    if (state_->should_fail(Op::kWrite, kind_, name_, &s)) return s;
    return FSWritableFileOwnerWrapper::PositionedAppend(data, off, o, dbg);
  }
  IOStatus PositionedAppend(const Slice& data, uint64_t off, const IOOptions& o,
                            const rocksdb::DataVerificationInfo& info,
                            IODebugContext* dbg) override {
    IOStatus s;
    if (state_->should_fail(Op::kWrite, kind_, name_, &s)) return s;
    return FSWritableFileOwnerWrapper::PositionedAppend(data, off, o, info, dbg);
  }
  IOStatus Flush(const IOOptions& o, IODebugContext* dbg) override {
    IOStatus s;
    if (state_->should_fail(Op::kWrite, kind_, name_, &s)) return s;
    return FSWritableFileOwnerWrapper::Flush(o, dbg);
  }
  IOStatus Sync(const IOOptions& o, IODebugContext* dbg) override {
    IOStatus s;
    if (state_->should_fail(Op::kSync, kind_, name_, &s)) return s;
    return FSWritableFileOwnerWrapper::Sync(o, dbg);
  }
  IOStatus Fsync(const IOOptions& o, IODebugContext* dbg) override {
    IOStatus s;
    if (state_->should_fail(Op::kSync, kind_, name_, &s)) return s;
    return FSWritableFileOwnerWrapper::Fsync(o, dbg);
  }
  IOStatus RangeSync(uint64_t off, uint64_t n, const IOOptions& o, IODebugContext* dbg) override {
    IOStatus s;
    if (state_->should_fail(Op::kSync, kind_, name_, &s)) return s;
    return FSWritableFileOwnerWrapper::RangeSync(off, n, o, dbg);
  }

 private:
  std::string name_;
  unsigned kind_;
  std::shared_ptr<FaultyFs::State> state_;
};

// A random-access file whose reads may fail (each request of a MultiRead fails alike).
class FaultyRandomAccessFile : public rocksdb::FSRandomAccessFileOwnerWrapper {
 public:
  FaultyRandomAccessFile(std::unique_ptr<rocksdb::FSRandomAccessFile> f, std::string name,
                         std::shared_ptr<FaultyFs::State> state)
      : FSRandomAccessFileOwnerWrapper(std::move(f)),
        name_(std::move(name)),
        kind_(FaultyFs::kind_of(name_)),
        state_(std::move(state)) {}

  IOStatus Read(uint64_t off, size_t n, const IOOptions& o, Slice* result, char* scratch,
                IODebugContext* dbg) const override {
    IOStatus s;
    if (state_->should_fail(Op::kRead, kind_, name_, &s)) {
      *result = Slice();
      return s;
    }
    return FSRandomAccessFileOwnerWrapper::Read(off, n, o, result, scratch, dbg);
  }
  IOStatus MultiRead(rocksdb::FSReadRequest* reqs, size_t n, const IOOptions& o,
                     IODebugContext* dbg) override {
    IOStatus s;
    if (state_->should_fail(Op::kRead, kind_, name_, &s)) {
      for (size_t i = 0; i < n; ++i) {
        reqs[i].status = s;
        reqs[i].result = Slice();
      }
      return s;
    }
    return FSRandomAccessFileOwnerWrapper::MultiRead(reqs, n, o, dbg);
  }

 private:
  std::string name_;
  unsigned kind_;
  std::shared_ptr<FaultyFs::State> state_;
};

}  // namespace

std::shared_ptr<FaultyFs> FaultyFs::make() {
  return std::shared_ptr<FaultyFs>(new FaultyFs(rocksdb::FileSystem::Default()));
}

FaultyFs::FaultyFs(std::shared_ptr<rocksdb::FileSystem> target)
    : rocksdb::FileSystemWrapper(target) {}

unsigned FaultyFs::kind_of(const std::string& name) {
  if (ends_with(name, ".log")) return kWal;
  if (ends_with(name, ".sst")) return kSst;
  if (ends_with(name, ".blob")) return kBlob;
  return kOther;
}

void FaultyFs::fail(Op op, unsigned files, int64_t times, Error error) {
  std::lock_guard lock(state_->mu);
  state_->switches[index(op)] = {times == 0 ? 0u : files, times, error};
}

void FaultyFs::heal_all() {
  std::lock_guard lock(state_->mu);
  state_->switches = {};
}

bool FaultyFs::State::should_fail(Op op, unsigned file, const std::string& name, IOStatus* out) {
  const size_t i = index(op);
  calls[i].fetch_add(1);
  Error error;
  {
    std::lock_guard lock(mu);
    Switch& sw = switches[i];
    if ((sw.files & file) == 0 || sw.left == 0) return false;
    if (sw.left > 0 && --sw.left == 0) sw.files = 0;
    error = sw.error;
  }
  failed[i].fetch_add(1);
  static constexpr const char* kNames[] = {"create", "write", "sync", "read"};
  const std::string what = std::string("injected ") + kNames[i] + " failure";
  *out = error == Error::kNoSpace ? IOStatus::NoSpace(what, name) : IOStatus::IOError(what, name);
  return true;
}

IOStatus FaultyFs::NewWritableFile(const std::string& f, const rocksdb::FileOptions& o,
                                   std::unique_ptr<rocksdb::FSWritableFile>* r,
                                   IODebugContext* dbg) {
  IOStatus s;
  if (state_->should_fail(Op::kCreate, kind_of(f), f, &s)) return s;
  std::unique_ptr<rocksdb::FSWritableFile> file;
  s = target()->NewWritableFile(f, o, &file, dbg);
  if (s.ok()) r->reset(new FaultyWritableFile(std::move(file), f, state_));
  return s;
}

IOStatus FaultyFs::ReopenWritableFile(const std::string& f, const rocksdb::FileOptions& o,
                                      std::unique_ptr<rocksdb::FSWritableFile>* r,
                                      IODebugContext* dbg) {
  IOStatus s;
  if (state_->should_fail(Op::kCreate, kind_of(f), f, &s)) return s;
  std::unique_ptr<rocksdb::FSWritableFile> file;
  s = target()->ReopenWritableFile(f, o, &file, dbg);
  if (s.ok()) r->reset(new FaultyWritableFile(std::move(file), f, state_));
  return s;
}

IOStatus FaultyFs::ReuseWritableFile(const std::string& f, const std::string& old,
                                     const rocksdb::FileOptions& o,
                                     std::unique_ptr<rocksdb::FSWritableFile>* r,
                                     IODebugContext* dbg) {
  IOStatus s;
  if (state_->should_fail(Op::kCreate, kind_of(f), f, &s)) return s;
  std::unique_ptr<rocksdb::FSWritableFile> file;
  s = target()->ReuseWritableFile(f, old, o, &file, dbg);
  if (s.ok()) r->reset(new FaultyWritableFile(std::move(file), f, state_));
  return s;
}

IOStatus FaultyFs::NewRandomAccessFile(const std::string& f, const rocksdb::FileOptions& o,
                                       std::unique_ptr<rocksdb::FSRandomAccessFile>* r,
                                       IODebugContext* dbg) {
  std::unique_ptr<rocksdb::FSRandomAccessFile> file;
  IOStatus s = target()->NewRandomAccessFile(f, o, &file, dbg);
  if (s.ok()) r->reset(new FaultyRandomAccessFile(std::move(file), f, state_));
  return s;
}

}  // namespace fakes
