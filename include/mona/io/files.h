// mona/io/files.h: whole-file reads, atomic writes, and the checkpoint container.
//
// Atomic write: the bytes go to a fresh temporary file in the same
// directory as the target (".<name>.tmp.<pid>.<n>"), which is flushed with fsync and then
// renamed over the target. rename(2) within one file system is atomic, so a reader sees
// either the old file or the new one, never a mixture, and an interrupted run never leaves
// a broken file at `path`. On any failure the temporary file is removed, `path` is left as
// it was, and mona::Error names the path and the system error:
//   "write /ckpt/last.mona: cannot rename temporary file into place: Is a directory"
// The new file gets mode 0666 & ~umask, like a file created by open(2).
//
// Checkpoint container (all integers little-endian):
//
//   offset  size  field
//        0     8  magic "MONACKPT"
//        8     4  format version (uint32), currently 1
//       12     8  payload length in bytes (uint64)
//       20     4  CRC-32 (IEEE 802.3 / zlib polynomial, reflected 0xEDB88320) of the payload
//       24     n  payload (opaque bytes, e.g. a LibTorch archive; may contain NUL bytes)
//
// The file is exactly 24 + n bytes. unpack_checkpoint refuses anything else with
//   "checkpoint <path>: <problem>"
// where the problem is one of: truncated header, wrong magic (not a mona checkpoint),
// unsupported version, truncated payload, trailing bytes (length mismatch), CRC mismatch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace mona::io {

/// Writes `bytes` to `path` atomically (temporary file in the same directory, fsync,
/// rename). Throws mona::Error naming `path` on failure; then nothing at `path` changed
/// and no temporary file is left behind.
void write_file_atomic(const std::string& path, const std::string& bytes);

/// Writes several files (path, bytes) so that a failure changes none of them: every file's
/// temporary is written and flushed to disk before the first rename. Throws mona::DataError
/// naming the path; only a failing rename (after all writes succeeded, e.g. a target that
/// became a directory) can leave the files before it replaced, and the message says so.
void write_files_atomic(const std::vector<std::pair<std::string, std::string>>& files);

/// Returns the whole content of `path` (binary). Throws mona::Error naming `path` when it
/// does not exist, is a directory or cannot be read.
std::string read_file(const std::string& path);

/// CRC-32 (IEEE, as zlib's crc32 and `cksum -o 3`), e.g. crc32("123456789") = 0xCBF43926.
uint32_t crc32(const void* data, std::size_t size);
inline uint32_t crc32(const std::string& bytes) { return crc32(bytes.data(), bytes.size()); }

/// Container constants (see the table above).
inline constexpr char kCheckpointMagic[9] = "MONACKPT";
inline constexpr uint32_t kCheckpointVersion = 1;
inline constexpr std::size_t kCheckpointHeaderSize = 24;

/// Wraps `payload` in the checkpoint container (header + payload).
std::string pack_checkpoint(const std::string& payload);

/// Checks the container in `bytes` and returns the payload. Throws mona::Error
/// "checkpoint <path_for_errors>: <problem>" for a wrong magic, unknown version,
/// truncation, length mismatch or CRC mismatch.
std::string unpack_checkpoint(const std::string& bytes, const std::string& path_for_errors);

/// write_file_atomic(path, pack_checkpoint(payload)).
void write_checkpoint_atomic(const std::string& path, const std::string& payload);

/// unpack_checkpoint(read_file(path), path).
std::string read_checkpoint(const std::string& path);

/// An exclusive lock on the directory `path` (flock(2) on the directory itself: advisory,
/// released when this object is destroyed or the process ends, however it ends; no lock
/// file is left behind), for work that must not run twice at once in one directory (two
/// `mona train` runs into one train.output_dir would both pass the check for an existing
/// run and write over each other's log and checkpoints). Throws mona::DataError naming
/// `path` when it is not a directory that can be opened, or when another holder has it
/// locked (`what` says what the lock is for, e.g. "another mona train is running there").
class DirectoryLock {
 public:
  DirectoryLock(const std::string& path, const std::string& what);
  ~DirectoryLock();
  DirectoryLock(const DirectoryLock&) = delete;
  DirectoryLock& operator=(const DirectoryLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace mona::io
