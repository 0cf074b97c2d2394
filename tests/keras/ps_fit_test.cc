// fit under ParameterServerStrategy, every task a process on 127.0.0.1 with its TF_CONFIG:
// a chief (the only training task, which validates each epoch) and two ps tasks holding the
// variables in slices end with the History of a one-device fit.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "cadre/cadre.h"
#include "tests/keras/fresh_dir.h"
#include "tests/keras/keras_test_data.h"
#include "tests/support/job_secret.h"
#include "tests/support/processes.h"

namespace cadre::keras {
namespace {

using cadre::testing::free_port;
using cadre::testing::read_log;
using cadre::testing::tail;

constexpr double kPsTaskSeconds = 120;

pid_t start_task(const std::string& tf_config, const std::string& dir, const std::string& log) {
  std::vector<std::pair<std::string, std::string>> env{cadre::testing::job_secret_env()};
  if (!tf_config.empty()) env.emplace_back("TF_CONFIG", tf_config);
  return cadre::testing::spawn({CADRE_KERAS_FIT_HELPER, dir}, env, log);
}

// The History keras_fit_helper wrote: (epoch, name) -> value.
std::map<std::pair<int, std::string>, double> read_history(const std::string& path) {
  std::map<std::pair<int, std::string>, double> out;
  std::ifstream in(path);
  int epoch;
  std::string name;
  double value;
  while (in >> epoch >> name >> value) out[{epoch, name}] = value;
  return out;
}

TEST(PsFitTest, AChiefAndTwoPsTasksEndWithTheHistoryOfOneDevice) {
  std::string root = testing::fresh_dir("ps_fit");
  cadre::testing::Children children;
  std::filesystem::create_directories(root + "/single");
  pid_t single = children.add(start_task("", root + "/single", root + "/single.log"));
  ASSERT_EQ(children.wait(single, kPsTaskSeconds), 0) << tail(read_log(root + "/single.log"));

  std::string dir = root + "/ps";
  std::filesystem::create_directories(dir);
  std::string cluster = "\"cluster\": {\"chief\": [\"127.0.0.1:" + std::to_string(free_port()) +
                        "\"], \"ps\": [\"127.0.0.1:" + std::to_string(free_port()) +
                        "\", \"127.0.0.1:" + std::to_string(free_port()) + "\"]}";
  auto tf_config = [&](const std::string& type, int index) {
    return "{" + cluster + ", \"task\": {\"type\": \"" + type +
           "\", \"index\": " + std::to_string(index) + "}}";
  };
  for (int i = 0; i < 2; ++i) {
    children.add(start_task(tf_config("ps", i), dir, dir + "/ps" + std::to_string(i) + ".log"));
  }
  pid_t chief = children.add(start_task(tf_config("chief", 0), dir, dir + "/chief.log"));
  ASSERT_EQ(children.wait(chief, kPsTaskSeconds), 0) << tail(read_log(dir + "/chief.log"));
  children.stop();  // the ps tasks serve until stopped
  std::string log = read_log(dir + "/chief.log");
  EXPECT_NE(log.find("dense/kernel/part_1"), std::string::npos) << "sliced over both ps tasks";

  auto expected = read_history(root + "/single/history_local.txt");
  auto got = read_history(dir + "/history_chief.txt");
  ASSERT_EQ(expected.size(), 12u);  // 3 epochs of loss, accuracy, val_loss, val_accuracy
  ASSERT_EQ(got.size(), expected.size());
  // One training task: a push returns once the ps tasks have applied it, so each step pulls
  // what the previous step's push made, and the updates are one device's, in the same order,
  // with the same elementwise Adam on the slices. So no tolerance: the Histories are equal to
  // the last bit (printed with 17 digits), and any lost or stale update would show (one moves
  // the epoch's loss in its third decimal).
  for (const auto& [key, value] : expected) {
    EXPECT_EQ(got[key], value) << "epoch " << key.first << " " << key.second;
  }
}

}  // namespace
}  // namespace cadre::keras
