// CSV files read by a schema.
#include "cadre/io/csv.h"

#include <gtest/gtest.h>

#include "cadre/base/errors.h"
#include "tests/support/temp_dir.h"

namespace cadre::io {
namespace {

class CsvTest : public cadre::testing::TempDirTest {
 protected:
  std::vector<Element> read_all(const std::vector<std::string>& files, const CsvOptions& options) {
    std::vector<Element> out;
    Iterator it = csv_dataset(files, options).make_iterator();
    while (auto e = it.next()) out.push_back(std::move(*e));
    return out;
  }

  std::string error_of(const std::string& contents, const CsvOptions& options) {
    try {
      read_all({write_file("bad.csv", contents)}, options);
    } catch (const InvalidArgumentError& e) {
      return e.what();
    }
    return "no InvalidArgumentError";
  }
};

TEST_F(CsvTest, ReadsColumnsByHeaderNameWithQuotesAndDefaults) {
  std::string file = write_file("people.csv",
                                "name,age,height,note\r\n"
                                "ann,31,1.68,\"likes \"\"tea\"\", and\ncake\"\r\n"
                                "\n"
                                "bob,,1.8,plain\n");
  CsvOptions options;
  options.columns = {{"height", CsvType::kFloat32},
                     {"name", CsvType::kString},
                     {"note", CsvType::kString},
                     {"age", CsvType::kInt64, "-1"}};
  options.label_column = "age";
  std::vector<Element> rows = read_all({file}, options);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].features.names(), (std::vector<std::string>{"height", "name", "note"}));
  EXPECT_EQ(rows[0].features.at("height").dtype(), DType::kFloat32);
  EXPECT_FLOAT_EQ(rows[0].features.at("height").item<float>(), 1.68f);
  EXPECT_EQ(tensor_bytes(rows[0].features.at("name")), "ann");
  EXPECT_EQ(tensor_bytes(rows[0].features.at("note")), "likes \"tea\", and\ncake");
  EXPECT_EQ(rows[0].labels.item<int64_t>(), 31);
  EXPECT_EQ(rows[1].labels.item<int64_t>(), -1);  // the default for an empty field
  EXPECT_EQ(tensor_bytes(rows[1].features.at("note")), "plain");
}

TEST_F(CsvTest, WithoutHeaderColumnsArePositional) {
  std::string file = write_file("n.csv", "1;2.5\n3;4.5");  // no final newline
  CsvOptions options;
  options.header = false;
  options.delimiter = ';';
  options.columns = {{"i", CsvType::kInt32}, {"d", CsvType::kFloat64}};
  std::vector<Element> rows = read_all({file, file}, options);
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[1].features.at("i").dtype(), DType::kInt32);
  EXPECT_EQ(rows[1].features.at("i").item<int32_t>(), 3);
  EXPECT_EQ(rows[3].features.at("d").item<double>(), 4.5);
}

TEST_F(CsvTest, MalformedRecordsNameFileLineAndColumn) {
  CsvOptions options;
  options.columns = {{"a", CsvType::kInt64}, {"b", CsvType::kFloat32}};
  std::string m = error_of("a,b\n1,2\n3,x\n", options);
  EXPECT_NE(m.find("bad.csv line 3: column 'b' expects float32, got 'x'"), std::string::npos) << m;
  m = error_of("a,b\n1,2,3\n", options);
  EXPECT_NE(m.find("line 2: 3 fields where 2 were expected"), std::string::npos) << m;
  m = error_of("a,b\n,2\n", options);
  EXPECT_NE(m.find("column 'a' is empty and has no default"), std::string::npos) << m;
  m = error_of("a,c\n1,2\n", options);
  EXPECT_NE(m.find("has no column 'b'"), std::string::npos) << m;
  m = error_of("a,b\n1,\"2\n", options);
  EXPECT_NE(m.find("not closed"), std::string::npos) << m;
  EXPECT_THROW(csv_dataset({path("absent.csv")}, options), NotFoundError);
}

}  // namespace
}  // namespace cadre::io
