// The ids of TensorFlow's categorical feature columns: every case of
// tests/io/testdata/tf_categorical.txt, written by TensorFlow 2.15 itself
// (tools/compat/make_tf_categorical.py), must come out the same.
#include "cadre/io/categorical.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "cadre/base/errors.h"

namespace cadre::io {
namespace {

std::string unhex(const std::string& hex) {
  std::string bytes;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    bytes.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  }
  return bytes;
}

std::vector<std::vector<std::string>> cases(const std::string& kind) {
  std::ifstream in(std::string(CADRE_IO_TESTDATA) + "/tf_categorical.txt");
  std::vector<std::vector<std::string>> found;
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string> fields;
    std::stringstream split(line);
    for (std::string field; std::getline(split, field, '\t');) fields.push_back(field);
    if (!fields.empty() && fields[0] == kind) found.push_back(fields);
  }
  return found;
}

CrossValue cross_value(const std::string& kind, const std::string& field) {
  if (kind == "s") return unhex(field);
  return static_cast<int64_t>(std::stoll(field));
}

// Missing values, which TensorFlow's categorical columns drop before any lookup.
bool missing(const std::string& kind, const std::string& field) {
  return kind == "s" ? field.empty() : field == "-1";
}

TEST(CategoricalTest, FingerprintsAreFarmHashsAsTensorFlowComputesThem) {
  auto all = cases("fingerprint");
  ASSERT_GT(all.size(), 130u);  // every length to 130, and longer ones
  for (const auto& c : all) {
    EXPECT_EQ(fingerprint64(unhex(c[1])), std::stoull(c[2], nullptr, 16))
        << unhex(c[1]).size() << " bytes";
  }
}

TEST(CategoricalTest, HashBucketsAreTensorFlows) {
  auto all = cases("hash");
  ASSERT_EQ(all.size(), 11u);
  for (const auto& c : all) {
    if (missing(c[1], c[2])) continue;
    int64_t buckets = std::stoll(c[3]);
    int64_t id = c[1] == "s" ? hash_bucket(unhex(c[2]), buckets)
                             : hash_bucket(static_cast<int64_t>(std::stoll(c[2])), buckets);
    EXPECT_EQ(id, std::stoll(c[4])) << c[2];
  }
  EXPECT_THROW(hash_bucket("a", 0), InvalidArgumentError);
}

TEST(CategoricalTest, VocabulariesGiveTensorFlowsIdsOutOfVocabularyToo) {
  const std::vector<std::string> words = {"apple", "banana", "cherry", "7"};
  auto all = cases("vocabulary");
  ASSERT_EQ(all.size(), 14u);
  for (const auto& c : all) {
    if (c[1].empty()) continue;  // "" is a missing value
    Vocabulary vocabulary(words, std::stoll(c[2]));
    EXPECT_EQ(vocabulary.id(unhex(c[1])), std::stoll(c[3])) << unhex(c[1]) << " oov " << c[2];
  }
  EXPECT_EQ(Vocabulary(words, 5).num_ids(), 9);
  EXPECT_EQ(Vocabulary(words).id(int64_t{7}), 3);
  EXPECT_EQ(Vocabulary(words, 0, 99).id("durian"), 99);
  EXPECT_THROW(Vocabulary({"a", "b", "a"}), InvalidArgumentError);
  EXPECT_THROW(Vocabulary({}), InvalidArgumentError);
  EXPECT_THROW(Vocabulary({"a"}, 2, 5), InvalidArgumentError);
}

TEST(CategoricalTest, BucketsAreTensorFlowsAtEveryBoundary) {
  const std::vector<double> boundaries = {0.0, 1.5, 10.0};
  auto all = cases("bucketize");
  ASSERT_EQ(all.size(), 7u);
  for (const auto& c : all) {
    EXPECT_EQ(bucketize(std::stod(c[1]), boundaries), std::stoll(c[2])) << c[1];
  }
  EXPECT_THROW(bucketize(1, std::vector<double>{1, 1}), InvalidArgumentError);
}

TEST(CategoricalTest, CrossesAreTensorFlowsOfStringsAndIntegers) {
  auto all = cases("cross");
  ASSERT_EQ(all.size(), 7u);
  for (const auto& c : all) {
    std::vector<CrossValue> values = {cross_value(c[1], c[2]), cross_value(c[3], c[4])};
    EXPECT_EQ(cross_hashed(values, std::stoll(c[5])), std::stoll(c[6])) << c[2] << " x " << c[4];
  }
}

}  // namespace
}  // namespace cadre::io
