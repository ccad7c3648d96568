#include "mona/io/files.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <csignal>

#include "mona/core/error.h"
#include "util/temp_dir.h"

using mona::test::TempDir;
using Names = std::vector<std::string>;

namespace {

// A payload with NUL bytes and every byte value.
std::string binary_payload() {
  std::string p("\0\0head\0", 7);
  for (int i = 0; i < 512; ++i) p.push_back(static_cast<char>(i & 0xFF));
  p.append("\0tail", 5);
  return p;
}

// Lowers the soft file-size limit for the current scope, so that writes past `bytes`
// fail with EFBIG (also for root), and ignores SIGXFSZ so they fail instead of killing us.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    getrlimit(RLIMIT_FSIZE, &old_);
    old_handler_ = std::signal(SIGXFSZ, SIG_IGN);
    rlimit lim = old_;
    lim.rlim_cur = bytes;
    ok_ = setrlimit(RLIMIT_FSIZE, &lim) == 0;
  }
  ~FileSizeLimit() {
    setrlimit(RLIMIT_FSIZE, &old_);
    std::signal(SIGXFSZ, old_handler_);
  }
  bool ok() const { return ok_; }

 private:
  rlimit old_{};
  void (*old_handler_)(int) = nullptr;
  bool ok_ = false;
};

}  // namespace

TEST(Files, WriteThenReadRoundTrips) {
  TempDir dir;
  const std::string path = dir.file("a.bin");
  const std::string payload = binary_payload();
  mona::io::write_file_atomic(path, payload);
  EXPECT_EQ(mona::io::read_file(path), payload);
  mona::io::write_file_atomic(path, "second");  // replaces
  EXPECT_EQ(mona::io::read_file(path), "second");
  mona::io::write_file_atomic(path, "");
  EXPECT_EQ(mona::io::read_file(path), "");
  EXPECT_EQ(dir.entries(), (Names{"a.bin"}));  // no temporary files left
}

TEST(Files, NewFileModeFollowsUmask) {
  TempDir dir;
  const mode_t old = ::umask(022);
  mona::io::write_file_atomic(dir.file("m"), "x");
  ::umask(old);
  struct stat st {};
  ASSERT_EQ(::stat(dir.file("m").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
}

TEST(Files, ReadErrorsNameThePath) {
  TempDir dir;
  EXPECT_ERROR_CONTAINS(mona::io::read_file(dir.file("missing")), dir.file("missing"),
                        "No such file");
  EXPECT_ERROR_CONTAINS(mona::io::read_file(dir.path()), dir.path(), "is a directory");
}

TEST(Files, FailedWriteLeavesOldFileIntactAndNoTempFiles) {
  TempDir dir;
  const std::string path = dir.file("ckpt");
  mona::test::write_raw(path, "old content");
  {
    FileSizeLimit limit(1000);
    ASSERT_TRUE(limit.ok());
    EXPECT_ERROR_CONTAINS(mona::io::write_file_atomic(path, std::string(5000, 'x')), path,
                          "cannot write temporary file");
  }
  EXPECT_EQ(mona::test::read_raw(path), "old content");
  EXPECT_EQ(dir.entries(), (Names{"ckpt"}));
}

// Several files: a failure while writing the third changes none of them (all temporaries are
// written before the first rename), and leaves no temporary behind.
TEST(Files, SeveralFilesAreAllReplacedOrNoneIs) {
  TempDir dir;
  const std::string a = dir.file("a"), b = dir.file("b"), c = dir.file("c");
  mona::test::write_raw(a, "old a");
  mona::test::write_raw(b, "old b");
  {
    FileSizeLimit limit(1000);
    ASSERT_TRUE(limit.ok());
    EXPECT_ERROR_CONTAINS(mona::io::write_files_atomic({{a, "new a"}, {b, "new b"}, {c, std::string(5000, 'x')}}),
                          c, "cannot write temporary file");
  }
  EXPECT_EQ(mona::test::read_raw(a), "old a");
  EXPECT_EQ(mona::test::read_raw(b), "old b");
  EXPECT_EQ(dir.entries(), (Names{"a", "b"}));
  mona::io::write_files_atomic({{a, "new a"}, {b, "new b"}, {c, "new c"}});
  EXPECT_EQ(mona::test::read_raw(a), "new a");
  EXPECT_EQ(mona::test::read_raw(c), "new c");
  EXPECT_EQ(dir.entries(), (Names{"a", "b", "c"}));
}

TEST(Files, TargetIsADirectory) {
  TempDir dir;
  const std::string target = dir.file("sub");
  ASSERT_EQ(::mkdir(target.c_str(), 0755), 0);
  mona::test::write_raw(target + "/keep", "k");
  EXPECT_ERROR_CONTAINS(mona::io::write_file_atomic(target, "data"), target,
                        "cannot rename temporary file into place");
  EXPECT_EQ(mona::test::read_raw(target + "/keep"), "k");
  EXPECT_EQ(dir.entries(), (Names{"sub"}));
  EXPECT_ERROR_CONTAINS(mona::io::write_file_atomic(dir.path() + "/", "data"),
                        "names a directory");
}

TEST(Files, MissingDirectory) {
  TempDir dir;
  const std::string path = dir.file("no/such/dir/f");
  EXPECT_ERROR_CONTAINS(mona::io::write_file_atomic(path, "x"), path,
                        "cannot create temporary file", "No such file");
  EXPECT_TRUE(dir.entries().empty());
}

TEST(Files, UnwritableDirectory) {
  if (::geteuid() == 0) {
    GTEST_SKIP() << "root ignores directory permissions; covered by the file-size-limit test";
  }
  TempDir dir;
  const std::string path = dir.file("f");
  mona::test::write_raw(path, "old");
  ASSERT_EQ(::chmod(dir.path().c_str(), 0555), 0);
  EXPECT_ERROR_CONTAINS(mona::io::write_file_atomic(path, "new"), path, "Permission denied");
  ::chmod(dir.path().c_str(), 0755);
  EXPECT_EQ(mona::test::read_raw(path), "old");
  EXPECT_EQ(dir.entries(), (Names{"f"}));
}

TEST(Crc32, KnownValues) {
  EXPECT_EQ(mona::io::crc32(std::string("123456789")), 0xCBF43926u);
  EXPECT_EQ(mona::io::crc32(std::string()), 0u);
  EXPECT_EQ(mona::io::crc32(std::string("The quick brown fox jumps over the lazy dog")),
            0x414FA339u);
}

TEST(Checkpoint, LayoutAndRoundTrip) {
  const std::string payload = binary_payload();
  const std::string bytes = mona::io::pack_checkpoint(payload);
  ASSERT_EQ(bytes.size(), 24 + payload.size());
  EXPECT_EQ(bytes.substr(0, 8), "MONACKPT");
  EXPECT_EQ(bytes.substr(8, 4), std::string("\x01\0\0\0", 4));  // version 1, little-endian
  EXPECT_EQ(static_cast<unsigned char>(bytes[12]), payload.size() & 0xFF);
  EXPECT_EQ(static_cast<unsigned char>(bytes[13]), (payload.size() >> 8) & 0xFF);
  EXPECT_EQ(mona::io::unpack_checkpoint(bytes, "x"), payload);
  EXPECT_EQ(mona::io::unpack_checkpoint(mona::io::pack_checkpoint(""), "x"), "");
}

TEST(Checkpoint, FileRoundTrip) {
  TempDir dir;
  const std::string path = dir.file("last.ckpt");
  mona::io::write_checkpoint_atomic(path, binary_payload());
  EXPECT_EQ(mona::io::read_checkpoint(path), binary_payload());
  EXPECT_EQ(dir.entries(), (Names{"last.ckpt"}));
}

TEST(Checkpoint, RefusesBadBytesWithPath) {
  const std::string p = "/runs/x/best.ckpt";
  const std::string good = mona::io::pack_checkpoint(binary_payload());
  // Truncation at every length.
  for (std::size_t n = 0; n < good.size(); n += (n < 40 ? 1 : 97)) {
    EXPECT_ERROR_CONTAINS(mona::io::unpack_checkpoint(good.substr(0, n), p),
                          "checkpoint " + p + ": truncated");
  }
  // Wrong magic.
  std::string bad = good;
  bad[3] = 'X';
  EXPECT_ERROR_CONTAINS(mona::io::unpack_checkpoint(bad, p), "checkpoint " + p + ":",
                        "not a mona checkpoint");
  EXPECT_ERROR_CONTAINS(mona::io::unpack_checkpoint("PK\x03\x04 a zip file", p),
                        "not a mona checkpoint");
  // Unknown version.
  bad = good;
  bad[8] = 2;
  EXPECT_ERROR_CONTAINS(mona::io::unpack_checkpoint(bad, p), "checkpoint " + p + ":",
                        "unsupported format version 2");
  // Trailing bytes.
  EXPECT_ERROR_CONTAINS(mona::io::unpack_checkpoint(good + "zz", p), "checkpoint " + p + ":",
                        "length mismatch", "2 trailing bytes");
  // A flipped bit anywhere in the payload, and a corrupted stored CRC.
  for (std::size_t at : {std::size_t{24}, std::size_t{30}, good.size() - 1}) {
    bad = good;
    bad[at] ^= 0x10;
    EXPECT_ERROR_CONTAINS(mona::io::unpack_checkpoint(bad, p), "checkpoint " + p + ":",
                          "CRC-32 mismatch", "corrupt");
  }
  bad = good;
  bad[21] ^= 1;
  EXPECT_ERROR_CONTAINS(mona::io::unpack_checkpoint(bad, p), "CRC-32 mismatch");
}

TEST(Checkpoint, CorruptFileIsRefusedAndLeftAlone) {
  TempDir dir;
  const std::string path = dir.file("last.ckpt");
  std::string bytes = mona::io::pack_checkpoint("model weights");
  bytes.resize(bytes.size() - 3);
  mona::test::write_raw(path, bytes);
  EXPECT_ERROR_CONTAINS(mona::io::read_checkpoint(path), "checkpoint " + path + ": truncated");
  // A file's problem, not the caller's argument: DataError (a std::runtime_error).
  EXPECT_THROW(mona::io::read_checkpoint(path), mona::DataError);
  EXPECT_THROW(mona::io::read_checkpoint(path), std::runtime_error);
  EXPECT_EQ(mona::test::read_raw(path), bytes);
}

TEST(Files, DirectoryLockIsExclusiveAndReleasedWithItsHolder) {
  TempDir dir;
  {
    mona::io::DirectoryLock held(dir.path(), "test: held");
    // A second holder (another open file description, as another process has) is refused.
    EXPECT_ERROR_CONTAINS(mona::io::DirectoryLock(dir.path(), "another mona train is running there"),
                          dir.path() + ": locked: another mona train is running there");
  }
  mona::io::DirectoryLock again(dir.path(), "released with its holder");
  EXPECT_EQ(dir.entries(), Names{});  // no lock file left behind
  EXPECT_ERROR_CONTAINS(mona::io::DirectoryLock(dir.file("none"), "x"), dir.file("none"),
                        "cannot open the directory to lock it");
}
