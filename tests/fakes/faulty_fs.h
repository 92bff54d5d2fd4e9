// tests/fakes/faulty_fs.h - a RocksDB FileSystem that fails file operations on demand, for the
// SSD tier's fault tests (issue 16, "Injected faults"). Passed to the store through
// tiering::SsdOptions::file_system; every call goes to FileSystem::Default() unless a switch
// says to fail it.
//
// A switch is per operation kind (Op) and applies to the files of the kinds it names (by name:
// `*.log` the WAL, `*.sst` tables, `*.blob` blob files, anything else "other": MANIFEST,
// CURRENT, OPTIONS). A test flips it at any moment, from any thread: fail from now on
// (fail(op, files)), fail the next N matching calls (fail(op, files, N)), succeed again
// (heal(op) / heal_all()). Each failed call is counted per kind (failed(op)), and so is each
// call that matched (calls(op)), failed or not.
//
// A failed call returns IOStatus::IOError (as an EIO from the disk would) or, with
// Error::kNoSpace, IOStatus::NoSpace (an ENOSPC RocksDB meets itself), with "injected" in its
// message; nothing reaches the file. Thread-safe: RocksDB calls it from its own threads.
#pragma once

#include <rocksdb/file_system.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

namespace fakes {

class FaultyFs : public rocksdb::FileSystemWrapper {
 public:
  /// What can be made to fail.
  enum class Op : uint8_t {
    kCreate,  ///< NewWritableFile, ReopenWritableFile, ReuseWritableFile (a new WAL, SST, blob)
    kWrite,   ///< Append, PositionedAppend, Flush of a writable file
    kSync,    ///< Sync, Fsync, RangeSync of a writable file
    kRead,    ///< Read, MultiRead of a random-access file (Get of a flushed value or header)
  };
  static constexpr size_t kOps = 4;
  /// Which files a switch applies to (a mask).
  enum Files : unsigned { kWal = 1, kSst = 2, kBlob = 4, kOther = 8, kAny = 15 };
  /// What a failed call returns.
  enum class Error : uint8_t { kIoError, kNoSpace };
  /// fail()'s count for "from now on".
  static constexpr int64_t kForever = -1;

  /// A FaultyFs over FileSystem::Default(), every switch off.
  static std::shared_ptr<FaultyFs> make();

  /// Fails the calls of kind `op` on `files` from now on (times = kForever) or the next `times`
  /// of them; replaces the switch's previous setting.
  void fail(Op op, unsigned files = kAny, int64_t times = kForever, Error error = Error::kIoError);
  /// Calls of kind `op` succeed again.
  void heal(Op op) { fail(op, 0, 0); }
  /// Every call succeeds again.
  void heal_all();
  /// Calls of kind `op` failed so far.
  uint64_t failed(Op op) const { return state_->failed[index(op)].load(); }
  /// Calls of kind `op` on files a switch could name (any file), failed or not.
  uint64_t calls(Op op) const { return state_->calls[index(op)].load(); }

  const char* Name() const override { return "FaultyFs"; }

  rocksdb::IOStatus NewWritableFile(const std::string& f, const rocksdb::FileOptions& o,
                                    std::unique_ptr<rocksdb::FSWritableFile>* r,
                                    rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus ReopenWritableFile(const std::string& f, const rocksdb::FileOptions& o,
                                       std::unique_ptr<rocksdb::FSWritableFile>* r,
                                       rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus ReuseWritableFile(const std::string& f, const std::string& old,
                                      const rocksdb::FileOptions& o,
                                      std::unique_ptr<rocksdb::FSWritableFile>* r,
                                      rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus NewRandomAccessFile(const std::string& f, const rocksdb::FileOptions& o,
                                        std::unique_ptr<rocksdb::FSRandomAccessFile>* r,
                                        rocksdb::IODebugContext* dbg) override;

  /// The switches and counters, shared with the files this filesystem opened (they may outlive
  /// it inside RocksDB).
  struct State {
    struct Switch {
      unsigned files = 0;   // mask of Files; 0: off
      int64_t left = 0;     // calls still to fail; kForever: all
      Error error = Error::kIoError;
    };
    mutable std::mutex mu;  // guards switches (a few instructions per file call)
    std::array<Switch, kOps> switches{};
    std::array<std::atomic<uint64_t>, kOps> failed{}, calls{};
    /// Whether this call of `op` on a file of kind `file` fails; if so, the status to return.
    bool should_fail(Op op, unsigned file, const std::string& name, rocksdb::IOStatus* out);
  };
  static constexpr size_t index(Op op) { return static_cast<size_t>(op); }
  /// The Files kind of a file name.
  static unsigned kind_of(const std::string& name);

 private:
  explicit FaultyFs(std::shared_ptr<rocksdb::FileSystem> target);
  std::shared_ptr<State> state_ = std::make_shared<State>();
};

}  // namespace fakes
