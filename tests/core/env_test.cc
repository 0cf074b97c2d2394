// posix_env(), the real file system behind every Env: what each call does to the files, and
// each failure as the typed error that names the path (NotFoundError for a missing one).
// The publish helpers around it (write_file_atomically, the temporary names, the paths).
#include "cadre/base/env.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "cadre/base/errors.h"
#include "tests/support/temp_dir.h"

namespace cadre {
namespace {

using testing::TempDir;

// Runs `call`, expecting error type E whose message names `path`.
template <typename E, typename F>
void expect_error_naming(const F& call, const std::string& path) {
  try {
    call();
    ADD_FAILURE() << "expected an error naming " << path;
  } catch (const E& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
}

std::vector<std::string> sorted(std::vector<std::string> names) {
  std::sort(names.begin(), names.end());
  return names;
}

TEST(EnvTest, WritesReadsAndSizesAFile) {
  TempDir dir;
  auto env = posix_env();
  std::string path = dir.file("a.txt");
  EXPECT_FALSE(env->file_exists(path));
  env->write_file(path, "hello");
  EXPECT_TRUE(env->file_exists(path));
  EXPECT_EQ(env->read_file(path), "hello");
  EXPECT_EQ(env->file_size(path), 5u);
  env->write_file(path, "hi");  // truncates
  EXPECT_EQ(env->read_file(path), "hi");
  // Larger than one read's buffer, with every byte value.
  std::string big(100'000, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 7);
  env->write_file(path, big);
  EXPECT_EQ(env->read_file(path), big);
  EXPECT_NEAR(env->modified_seconds(path), env->now_seconds(), 60);
}

TEST(EnvTest, AWritableFileBuffersUntilFlushAndAppendsWhenAsked) {
  TempDir dir;
  auto env = posix_env();
  std::string path = dir.file("log");
  auto file = env->new_writable_file(path);
  file->append("abc");
  EXPECT_EQ(file->size(), 3u);
  EXPECT_EQ(env->read_file(path), "") << "buffered in the process until flush()";
  file->flush();
  EXPECT_EQ(env->read_file(path), "abc");
  file->append(std::string(100'000, 'x'));  // past the buffer: written through
  file->sync();
  EXPECT_EQ(env->file_size(path), 100'003u);
  file->close();
  file->close();  // a second close does nothing
  EXPECT_THROW(file->append("late"), UnavailableError);

  auto appended = env->new_writable_file(path, /*append=*/true);
  EXPECT_EQ(appended->size(), 100'003u);
  appended->append("!");
  appended->close();
  std::string contents = env->read_file(path);
  EXPECT_EQ(contents.size(), 100'004u);
  EXPECT_EQ(contents.substr(0, 3), "abc");
  EXPECT_EQ(contents.back(), '!');
  // The destructor flushes what close() would have.
  {
    auto unclosed = env->new_writable_file(dir.file("unclosed"));
    unclosed->append("kept");
  }
  EXPECT_EQ(env->read_file(dir.file("unclosed")), "kept");
}

TEST(EnvTest, ARandomAccessFileReadsAtAnyOffsetAndSeesTheFileGrow) {
  TempDir dir;
  auto env = posix_env();
  const std::string path = dir.file("r");
  env->write_file(path, "hello world");
  std::unique_ptr<RandomAccessFile> file = env->new_random_access_file(path);
  env.reset();  // the file outlives its Env
  char scratch[64];
  EXPECT_EQ(file->read(6, 5, scratch), "world");
  EXPECT_EQ(file->read(0, 5, scratch), "hello");
  EXPECT_EQ(file->read(6, 64, scratch), "world");  // short only at the end
  EXPECT_EQ(file->read(11, 4, scratch), "");
  EXPECT_EQ(file->read(1000, 4, scratch), "");
  EXPECT_EQ(file->read(3, 0, scratch), "");
  auto appending = posix_env()->new_writable_file(path, /*append=*/true);
  appending->append("!");
  appending->close();
  EXPECT_EQ(file->read(6, 64, scratch), "world!");
}

TEST(EnvTest, ARandomAccessFileServesThreadsAtOnce) {
  TempDir dir;
  auto env = posix_env();
  const std::string path = dir.file("big");
  std::string big(300'000, '\0');  // larger than a read of either side, every byte value
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 13 + i / 256);
  env->write_file(path, big);
  std::unique_ptr<RandomAccessFile> file = env->new_random_access_file(path);
  std::vector<std::thread> threads;
  std::vector<int> mismatches(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::string scratch(70'000, '\0');
      for (uint64_t offset = t * 1000; offset < big.size(); offset += 50'000) {
        std::string_view got = file->read(offset, scratch.size(), scratch.data());
        if (got != std::string_view(big).substr(offset, scratch.size())) ++mismatches[t];
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(mismatches, std::vector<int>(4, 0));
}

TEST(EnvTest, CreatesListsRenamesAndRemoves) {
  TempDir dir;
  auto env = posix_env();
  std::string nested = dir.file("a/b/c");
  env->create_dir(nested);  // with its missing parents
  env->create_dir(nested);  // exists already: fine
  EXPECT_TRUE(std::filesystem::is_directory(nested));
  env->write_file(nested + "/one", "1");
  env->write_file(nested + "/two", "2");
  EXPECT_EQ(sorted(env->list_dir(nested)), (std::vector<std::string>{"one", "two"}));
  EXPECT_EQ(env->list_dir(dir.path()), std::vector<std::string>{"a"});

  env->rename_file(nested + "/one", nested + "/two");  // replaces the target
  EXPECT_EQ(env->list_dir(nested), std::vector<std::string>{"two"});
  EXPECT_EQ(env->read_file(nested + "/two"), "1");
  env->rename_file(dir.file("a/b"), dir.file("moved"));  // a directory to a new name
  EXPECT_EQ(env->read_file(dir.file("moved/c/two")), "1");

  env->truncate_file(dir.file("moved/c/two"), 0);
  EXPECT_EQ(env->file_size(dir.file("moved/c/two")), 0u);
  env->sync_file(dir.file("moved/c/two"));
  env->sync_dir(dir.file("moved/c"));

  EXPECT_TRUE(env->remove_file(dir.file("moved/c/two")));
  EXPECT_FALSE(env->remove_file(dir.file("moved/c/two")));  // gone already
  EXPECT_TRUE(env->remove_dir_recursively(dir.file("moved")));
  EXPECT_FALSE(env->remove_dir_recursively(dir.file("moved")));
  EXPECT_EQ(sorted(env->list_dir(dir.path())), std::vector<std::string>{"a"});
}

TEST(EnvTest, MissingFilesAreNotFoundErrorsNamingThePath) {
  TempDir dir;
  auto env = posix_env();
  const std::string missing = dir.file("missing");
  expect_error_naming<NotFoundError>([&] { env->read_file(missing); }, missing);
  expect_error_naming<NotFoundError>([&] { env->file_size(missing); }, missing);
  expect_error_naming<NotFoundError>([&] { env->modified_seconds(missing); }, missing);
  expect_error_naming<NotFoundError>([&] { env->new_random_access_file(missing); }, missing);
  expect_error_naming<NotFoundError>([&] { env->list_dir(missing); }, missing);
  expect_error_naming<NotFoundError>([&] { env->truncate_file(missing, 0); }, missing);
  expect_error_naming<NotFoundError>([&] { env->sync_file(missing); }, missing);
  expect_error_naming<NotFoundError>([&] { env->sync_dir(missing); }, missing);
  expect_error_naming<NotFoundError>([&] { env->rename_file(missing, dir.file("to")); }, missing);
  const std::string in_missing_dir = dir.file("no/such/file");
  expect_error_naming<NotFoundError>([&] { env->write_file(in_missing_dir, "x"); }, in_missing_dir);
  expect_error_naming<NotFoundError>([&] { env->new_writable_file(in_missing_dir); },
                                     in_missing_dir);
}

TEST(EnvTest, OtherFailuresAreTypedErrorsNamingThePath) {
  TempDir dir;
  auto env = posix_env();
  const std::string file = dir.file("file");
  env->write_file(file, "x");
  // A directory where a file is expected, and a file where a directory is.
  expect_error_naming<UnavailableError>([&] { env->read_file(dir.path()); }, dir.path());
  expect_error_naming<UnavailableError>(
      [&] {
        char scratch[4];
        env->new_random_access_file(dir.path())->read(0, 4, scratch);  // EISDIR
      },
      dir.path());
  expect_error_naming<NotFoundError>([&] { env->list_dir(file); }, file);  // ENOTDIR
  expect_error_naming<NotFoundError>([&] { env->sync_dir(file); }, file);
  const std::string under_file = file + "/child";
  expect_error_naming<NotFoundError>([&] { env->create_dir(under_file); }, under_file);
  // Renaming a directory over a file names the source and the target.
  env->create_dir(dir.file("d"));
  try {
    env->rename_file(dir.file("d"), file);
    ADD_FAILURE() << "a directory renamed over a file";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(dir.file("d")), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(file), std::string::npos) << e.what();
  }
  if (::geteuid() != 0) {  // root reads and writes whatever the modes say
    std::filesystem::permissions(file, std::filesystem::perms::none);
    expect_error_naming<PermissionDeniedError>([&] { env->read_file(file); }, file);
    expect_error_naming<PermissionDeniedError>([&] { env->write_file(file, "y"); }, file);
  }
}

TEST(EnvTest, WriteFileAtomicallyReplacesTheFileAndLeavesNoTemporary) {
  TempDir dir;
  auto env = posix_env();
  const std::string path = dir.file("state");
  write_file_atomically(*env, path, "first");
  write_file_atomically(*env, path, "second", /*durable=*/false);
  EXPECT_EQ(env->read_file(path), "second");
  EXPECT_EQ(env->list_dir(dir.path()), std::vector<std::string>{"state"});
  // A failure (the directory is gone) leaves no temporary and names the path.
  const std::string gone = dir.file("gone/state");
  EXPECT_THROW(write_file_atomically(*env, gone, "x"), NotFoundError);
  EXPECT_EQ(env->list_dir(dir.path()), std::vector<std::string>{"state"});
}

TEST(EnvTest, TemporaryNamesNameTheirOwner) {
  std::string a = temporary_path_for("dir/model.ckpt");
  std::string b = temporary_path_for("dir/model.ckpt");
  EXPECT_NE(a, b);
  EXPECT_EQ(a.rfind("dir/model.ckpt.tmp-", 0), 0u) << a;
  EXPECT_TRUE(is_temporary_name(base_name(a)));
  EXPECT_FALSE(is_temporary_name("model.ckpt-10.h5"));
  EXPECT_TRUE(temporary_of_this_process(base_name(a)));
  EXPECT_FALSE(temporary_owner_is_dead(base_name(a)));
  EXPECT_FALSE(temporary_of_this_process("model.ckpt.tmp-garbage"));
  EXPECT_FALSE(temporary_owner_is_dead("model.ckpt.tmp-garbage"));
}

TEST(EnvTest, PathsJoinAndSplitAsPosixDoes) {
  EXPECT_EQ(join_path("a", "b"), "a/b");
  EXPECT_EQ(join_path("a/", "b"), "a/b");
  EXPECT_EQ(join_path("", "b"), "b");
  EXPECT_EQ(join_path("a", "/abs"), "/abs");
  EXPECT_EQ(dir_name("a/b/c"), "a/b");
  EXPECT_EQ(dir_name("c"), ".");
  EXPECT_EQ(dir_name("/c"), "/");
  EXPECT_EQ(base_name("a/b/c"), "c");
  EXPECT_EQ(base_name("c"), "c");
}

}  // namespace
}  // namespace cadre
