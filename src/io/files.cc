// Atomic file writes, whole-file reads and the checkpoint container (mona/io/files.h).
#include "mona/io/files.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iomanip>
#include <sstream>

#include "mona/core/error.h"

namespace mona::io {
namespace {

using detail::fail;
using detail::fail_data;

std::string errno_text(int err) { return std::strerror(err); }

// Directory part of `path` ("." when there is none), and the file name part.
void split_path(const std::string& path, std::string* dir, std::string* name) {
  const auto slash = path.find_last_of('/');
  if (slash == std::string::npos) {
    *dir = ".";
    *name = path;
  } else {
    *dir = slash == 0 ? "/" : path.substr(0, slash);
    *name = path.substr(slash + 1);
  }
}

// Closes a file descriptor on scope exit unless released.
struct FdGuard {
  int fd = -1;
  ~FdGuard() {
    if (fd >= 0) ::close(fd);
  }
};

void put_u32(std::string* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}
void put_u64(std::string* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}
uint32_t get_u32(const std::string& s, std::size_t at) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= uint32_t(static_cast<unsigned char>(s[at + i])) << (8 * i);
  return v;
}
uint64_t get_u64(const std::string& s, std::size_t at) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= uint64_t(static_cast<unsigned char>(s[at + i])) << (8 * i);
  return v;
}

std::string hex32(uint32_t v) {
  std::ostringstream os;
  os << "0x" << std::hex << std::uppercase << std::setw(8) << std::setfill('0') << v;
  return os.str();
}

const std::array<uint32_t, 256>& crc_table() {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t n = 0; n < 256; ++n) {
      uint32_t c = n;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[n] = c;
    }
    return t;
  }();
  return table;
}

}  // namespace

namespace {

// Writes `bytes` to a fresh temporary file beside `path` and flushes it to disk; returns the
// temporary's name. On failure removes it and throws naming `path`.
std::string write_temporary(const std::string& path, const std::string& bytes) {
  if (path.empty()) fail("write_file_atomic: path is empty");
  std::string dir, name;
  split_path(path, &dir, &name);
  if (name.empty()) fail_data("write ", path, ": path names a directory, expected a file");

  // A fresh temporary name in the target's directory; O_EXCL guarantees it is ours.
  static std::atomic<uint64_t> counter{0};
  std::string tmp;
  FdGuard guard;
  for (int attempt = 0; attempt < 100 && guard.fd < 0; ++attempt) {
    tmp = (dir == "/" ? "/" : dir + "/") + "." + name + ".tmp." + std::to_string(::getpid()) +
          "." + std::to_string(counter.fetch_add(1));
    guard.fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (guard.fd < 0 && errno != EEXIST) {
      fail_data("write ", path, ": cannot create temporary file in ", dir, ": ", errno_text(errno));
    }
  }
  if (guard.fd < 0) fail_data("write ", path, ": cannot find a free temporary file name in ", dir);

  auto abandon = [&](const char* what, int err) {
    ::close(guard.fd);
    guard.fd = -1;
    ::unlink(tmp.c_str());
    fail_data("write ", path, ": ", what, ": ", errno_text(err));
  };

  const char* p = bytes.data();
  std::size_t left = bytes.size();
  while (left > 0) {
    const ssize_t n = ::write(guard.fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      abandon("cannot write temporary file", errno);
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
  if (::fsync(guard.fd) != 0) abandon("cannot flush temporary file to disk", errno);
  const int fd = guard.fd;
  guard.fd = -1;
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    fail_data("write ", path, ": cannot close temporary file: ", errno_text(err));
  }
  return tmp;
}

// Makes renames in the directory of `path` durable (best effort: some file systems refuse
// fsync on directories).
void sync_directory_of(const std::string& path) {
  std::string dir, name;
  split_path(path, &dir, &name);
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    (void)::fsync(dfd);
    ::close(dfd);
  }
}

}  // namespace

void write_file_atomic(const std::string& path, const std::string& bytes) {
  write_files_atomic({{path, bytes}});
}

void write_files_atomic(const std::vector<std::pair<std::string, std::string>>& files) {
  std::vector<std::string> temps;
  auto remove_temps = [&](std::size_t from) {
    for (std::size_t k = from; k < temps.size(); ++k) ::unlink(temps[k].c_str());
  };
  try {
    for (const auto& [path, bytes] : files) temps.push_back(write_temporary(path, bytes));
  } catch (...) {
    remove_temps(0);
    throw;
  }
  for (std::size_t k = 0; k < files.size(); ++k) {
    const std::string& path = files[k].first;
    if (::rename(temps[k].c_str(), path.c_str()) != 0) {
      const int err = errno;
      remove_temps(k);
      fail_data("write ", path, ": cannot rename temporary file into place: ", errno_text(err),
                k == 0 ? std::string() : "; " + std::to_string(k) + " of the " +
                                             std::to_string(files.size()) + " files were replaced");
    }
  }
  for (const auto& f : files) sync_directory_of(f.first);
}

std::string read_file(const std::string& path) {
  if (path.empty()) fail("read_file: path is empty");
  FdGuard guard;
  guard.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (guard.fd < 0) fail_data("cannot open ", path, ": ", errno_text(errno));
  struct stat st {};
  if (::fstat(guard.fd, &st) != 0) fail_data("cannot stat ", path, ": ", errno_text(errno));
  if (S_ISDIR(st.st_mode)) fail_data("cannot read ", path, ": is a directory, expected a file");
  std::string out;
  if (S_ISREG(st.st_mode) && st.st_size > 0) out.reserve(static_cast<std::size_t>(st.st_size));
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(guard.fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail_data("cannot read ", path, ": ", errno_text(errno));
    }
    if (n == 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  return out;
}

uint32_t crc32(const void* data, std::size_t size) {
  const auto& table = crc_table();
  const auto* p = static_cast<const unsigned char*>(data);
  uint32_t c = 0xFFFFFFFFu;
  for (std::size_t i = 0; i < size; ++i) c = table[(c ^ p[i]) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

std::string pack_checkpoint(const std::string& payload) {
  std::string out;
  out.reserve(kCheckpointHeaderSize + payload.size());
  out.append(kCheckpointMagic, 8);
  put_u32(&out, kCheckpointVersion);
  put_u64(&out, payload.size());
  put_u32(&out, crc32(payload));
  out.append(payload);
  return out;
}

std::string unpack_checkpoint(const std::string& bytes, const std::string& path_for_errors) {
  const std::string& path = path_for_errors;
  const std::string magic(kCheckpointMagic, 8);
  const std::size_t head = std::min<std::size_t>(bytes.size(), 8);
  if (bytes.compare(0, head, magic, 0, head) != 0) {
    fail_data("checkpoint ", path, ": not a mona checkpoint (expected magic \"MONACKPT\" at offset 0)");
  }
  if (bytes.size() < kCheckpointHeaderSize) {
    fail_data("checkpoint ", path, ": truncated: ", bytes.size(), " bytes, the header alone needs ",
         kCheckpointHeaderSize);
  }
  const uint32_t version = get_u32(bytes, 8);
  if (version != kCheckpointVersion) {
    fail_data("checkpoint ", path, ": unsupported format version ", version, " (this build reads ",
         kCheckpointVersion, ")");
  }
  const uint64_t length = get_u64(bytes, 12);
  const uint64_t have = bytes.size() - kCheckpointHeaderSize;
  if (have < length) {
    fail_data("checkpoint ", path, ": truncated: header says ", length, " payload bytes, file has ",
         have);
  }
  if (have > length) {
    fail_data("checkpoint ", path, ": length mismatch: header says ", length,
         " payload bytes, file has ", have, " (", have - length, " trailing bytes)");
  }
  std::string payload = bytes.substr(kCheckpointHeaderSize);
  const uint32_t stored = get_u32(bytes, 20);
  const uint32_t computed = crc32(payload);
  if (stored != computed) {
    fail_data("checkpoint ", path, ": CRC-32 mismatch (stored ", hex32(stored), ", computed ",
         hex32(computed), "): the file is corrupt");
  }
  return payload;
}

void write_checkpoint_atomic(const std::string& path, const std::string& payload) {
  write_file_atomic(path, pack_checkpoint(payload));
}

std::string read_checkpoint(const std::string& path) {
  return unpack_checkpoint(read_file(path), path);
}

DirectoryLock::DirectoryLock(const std::string& path, const std::string& what) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd_ < 0) detail::fail_data(path, ": cannot open the directory to lock it: ", std::strerror(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    ::close(fd_);
    fd_ = -1;
    if (err == EWOULDBLOCK) detail::fail_data(path, ": locked: ", what);
    detail::fail_data(path, ": cannot lock the directory: ", std::strerror(err));
  }
}

DirectoryLock::~DirectoryLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the lock
}

}  // namespace mona::io
