// The user's default job secret: made once, private, the same for every task that reads it
// (also tasks starting together), and refused when other users could read it, as a
// CADRE_JOB_SECRET_FILE is.
#include "strategies/cluster/user_secret.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "cadre/base/errors.h"
#include "cadre/strategies/cluster_security.h"
#include "tests/support/temp_dir.h"

namespace cadre {
namespace {

unsigned mode_of(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 0777;
}

TEST(UserSecretTest, IsMadeOncePrivateAndRandom) {
  testing::TempDir home, other;
  std::string secret = user_secret(home.path());
  EXPECT_EQ(secret.size(), 64u);
  EXPECT_EQ(secret.find_first_not_of("0123456789abcdef"), std::string::npos) << secret;
  EXPECT_EQ(mode_of(home.file(".cadre")), 0700u);
  EXPECT_EQ(mode_of(user_secret_path(home.path())), 0600u);
  EXPECT_EQ(user_secret(home.path()), secret);
  EXPECT_NE(user_secret(other.path()), secret);
  // Nothing but the secret is left in the folder (no temporary files).
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(home.file(".cadre"))) {
    EXPECT_EQ(entry.path().filename(), "job_secret");
    ++files;
  }
  EXPECT_EQ(files, 1);
}

TEST(UserSecretTest, TasksStartingTogetherAgree) {
  testing::TempDir home;
  std::vector<std::string> seen(8);
  std::vector<std::thread> tasks;
  for (size_t i = 0; i < seen.size(); ++i) {
    tasks.emplace_back([&, i] { seen[i] = user_secret(home.path()); });
  }
  for (auto& task : tasks) task.join();
  for (const std::string& secret : seen) EXPECT_EQ(secret, seen[0]);
}

TEST(UserSecretTest, AFileOthersCanReadIsRefused) {
  testing::TempDir home;
  user_secret(home.path());
  std::string path = user_secret_path(home.path());
  ASSERT_EQ(::chmod(path.c_str(), 0640), 0);
  try {
    user_secret(home.path());
    ADD_FAILURE() << "a group-readable secret was accepted";
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("mode 0640"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("chmod 600"), std::string::npos) << e.what();
  }
  ASSERT_EQ(::chmod(path.c_str(), 0600), 0);
  std::ofstream(path, std::ios::trunc) << "\n";
  EXPECT_THROW(user_secret(home.path()), InvalidArgumentError);
}

// From the environment: a job secret wins; without one, the user's default, and where that
// cannot be had the cluster has no secret and says why.
TEST(UserSecretTest, ClusterSecurityFallsBackToTheUsersDefault) {
  testing::TempDir home;
  std::string saved_home = std::getenv("HOME") ? std::getenv("HOME") : "";
  ::unsetenv("CADRE_JOB_SECRET_FILE");
  ::unsetenv("CADRE_INSECURE");
  ::setenv("HOME", home.path().c_str(), 1);

  ::setenv("CADRE_JOB_SECRET", "the job's", 1);
  EXPECT_EQ(ClusterSecurity::from_environment().secret, "the job's");
  EXPECT_FALSE(std::filesystem::exists(home.file(".cadre")));

  ::unsetenv("CADRE_JOB_SECRET");
  ClusterSecurity fallback = ClusterSecurity::from_environment();
  EXPECT_EQ(fallback.secret, user_secret(home.path()));
  EXPECT_NE(fallback.secret_source.find("this user's default"), std::string::npos);

  ::chmod(user_secret_path(home.path()).c_str(), 0644);
  ClusterSecurity refused = ClusterSecurity::from_environment();
  EXPECT_TRUE(refused.secret.empty());
  EXPECT_NE(refused.secret_source.find("mode 0644"), std::string::npos) << refused.secret_source;

  ::setenv("HOME", saved_home.c_str(), 1);
}

// CADRE_JOB_SECRET_FILE is held to the default's rule: a file others can read is refused
// with its mode and what to do, a private one (0600, or 0400 as Kubernetes mounts it) is read.
TEST(UserSecretTest, AnExplicitSecretFileOthersCanReadIsRefusedToo) {
  testing::TempDir dir;
  std::string path = testing::write_file(dir.file("job_secret"), "the job's\n");
  ::unsetenv("CADRE_JOB_SECRET");
  ::setenv("CADRE_JOB_SECRET_FILE", path.c_str(), 1);
  for (unsigned mode : {0644u, 0640u, 0604u}) {
    ASSERT_EQ(::chmod(path.c_str(), mode), 0);
    try {
      ClusterSecurity::from_environment();
      ADD_FAILURE() << "a secret file of mode 0" << std::oct << mode << " was accepted";
    } catch (const InvalidArgumentError& e) {
      std::string what = e.what();
      char expected[16];
      std::snprintf(expected, sizeof expected, "mode 0%o", mode);
      EXPECT_NE(what.find("CADRE_JOB_SECRET_FILE=" + path), std::string::npos) << what;
      EXPECT_NE(what.find(expected), std::string::npos) << what;
      EXPECT_NE(what.find("chmod 600 " + path), std::string::npos) << what;
    }
  }
  for (unsigned mode : {0600u, 0400u}) {
    ASSERT_EQ(::chmod(path.c_str(), mode), 0);
    ClusterSecurity security = ClusterSecurity::from_environment();
    EXPECT_EQ(security.secret, "the job's");
    EXPECT_EQ(security.secret_source, "CADRE_JOB_SECRET_FILE=" + path);
  }
  // Missing: named, not taken for an empty secret.
  ::setenv("CADRE_JOB_SECRET_FILE", dir.file("absent").c_str(), 1);
  EXPECT_THROW(ClusterSecurity::from_environment(), InvalidArgumentError);
  ::unsetenv("CADRE_JOB_SECRET_FILE");
}

}  // namespace
}  // namespace cadre
